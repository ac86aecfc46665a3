// TF32 off for a scope: cuBLAS computes FP32 products in FP32 (torch.backends.cuda.matmul.allow_tf32),
// as sgemm_cube.backends.native.true_fp32 does in Python; the previous setting comes back after it.
#pragma once

#include <ATen/Context.h>

namespace sgemm_cube {

class TrueFp32 {
 public:
  explicit TrueFp32(bool cuda) : saved_(cuda && at::globalContext().allowTF32CuBLAS()) {
    if (saved_) at::globalContext().setAllowTF32CuBLAS(false);
  }
  ~TrueFp32() {
    if (saved_) at::globalContext().setAllowTF32CuBLAS(true);
  }
  TrueFp32(const TrueFp32&) = delete;
  TrueFp32& operator=(const TrueFp32&) = delete;

 private:
  bool saved_;
};

}  // namespace sgemm_cube
