// What the host drivers of this folder share (run_kernels.cpp, run_line_meta.cpp, run_probe_ops.cpp,
// run_vector_ops.cpp): the command line, the input file taken apart front to back (little-endian int64
// parameters, then the data), GM buffers as the device allocator gives them, and the output file.
// A driver that cannot read its input or write its output says why on stderr and exits with status 64
// (the stand-in's own exit statuses are 0 clean, 1 checker errors, 2 fatal: ascend_exec::report, fatal).
#ifndef EXEC_ASCENDC_DRIVER_IO_H
#define EXEC_ASCENDC_DRIVER_IO_H

#include "kernel_operator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace driver {

constexpr int kBadInput = 64;

[[noreturn]] inline void bad_input(const char* what)
{
    std::fprintf(stderr, "%s\n", what);
    std::exit(kBadInput);
}

/// Exits (status 64, the usage on stderr) unless the command line has `args` arguments.
inline void expect_args(int argc, char** argv, int args, const char* usage)
{
    if (argc != args + 1) {
        std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        std::exit(kBadInput);
    }
}

/// The input file, read whole, then taken apart in order; reading past its end exits (status 64).
class Input {
public:
    explicit Input(const char* path)
    {
        FILE* f = std::fopen(path, "rb");
        if (!f) {
            std::perror(path);
            std::exit(kBadInput);
        }
        for (int ch; (ch = std::fgetc(f)) != EOF;) {
            data_.push_back(uint8_t(ch));
        }
        std::fclose(f);
    }
    /// The next little-endian int64 parameter.
    int64_t param()
    {
        int64_t v;
        take(&v, 8, "short header");
        return v;
    }
    /// The next `bytes` bytes, copied to `dst`.
    void take(void* dst, size_t bytes, const char* what = "short data")
    {
        if (at_ + bytes > data_.size()) {
            bad_input(what);
        }
        std::memcpy(dst, data_.data() + at_, bytes);
        at_ += bytes;
    }
    /// The next `n` values of T.
    template <typename T>
    std::vector<T> values(size_t n)
    {
        std::vector<T> v(n);
        take(v.data(), n * sizeof(T));
        return v;
    }

private:
    std::vector<uint8_t> data_;
    size_t at_ = 0;
};

/// GM buffers are 512-byte aligned, as the device allocator's are (the race checker's 32-byte shadow
/// blocks must not straddle two buffers); registered with the stand-in by the caller or gm_buffer.
template <typename T>
struct AlignedAllocator {
    using value_type = T;
    AlignedAllocator() = default;
    template <typename U>
    AlignedAllocator(const AlignedAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T) + 1, std::align_val_t(512))); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(512)); }
    template <typename U>
    bool operator==(const AlignedAllocator<U>&) const { return true; }
    template <typename U>
    bool operator!=(const AlignedAllocator<U>&) const { return false; }
};
template <typename T>
using GmVector = std::vector<T, AlignedAllocator<T>>;

/// A GM buffer of `bytes` bytes (512 more allocated, zeroed, so that a whole-block read past a short
/// buffer stays in memory), 512-byte aligned and registered with the stand-in; never freed.
inline uint8_t* gm_buffer(size_t bytes)
{
    uint8_t* p = static_cast<uint8_t*>(::operator new(bytes + 512, std::align_val_t(512)));
    std::memset(p, 0, bytes + 512);
    ascend_exec::register_gm(p, bytes);
    return p;
}

/// The output file, written piece by piece; a file that cannot be opened exits (status 64).
class Output {
public:
    explicit Output(const char* path) : path_(path), f_(std::fopen(path, "wb"))
    {
        if (!f_) {
            std::perror(path);
            std::exit(kBadInput);
        }
    }
    ~Output() { close(); }
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;
    void write(const void* p, size_t bytes)
    {
        if (bytes != 0 && std::fwrite(p, 1, bytes, f_) != bytes) {
            std::perror(path_);
            std::exit(kBadInput);
        }
    }
    void close()
    {
        if (f_) {
            std::fclose(f_);
            f_ = nullptr;
        }
    }

private:
    const char* path_;
    FILE* f_;
};

}  // namespace driver

#endif  // EXEC_ASCENDC_DRIVER_IO_H
