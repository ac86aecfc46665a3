// The switch's kernels in C++: PyTorch's own route decided without entering Python.
//
// sgemm_cube.switch registers a Python kernel per operator (mm, addmm, ...) and device key.  Calling
// into Python and back costs a few microseconds per call, which is the whole cost of a small product
// routed native (sgemm_cube's plan says PyTorch's FP32 kernel is faster there).  This library
// registers, in front of each Python kernel, a boxed C++ kernel that answers the common calls itself:
//
//   * the switch does not route the device, or the call comes from inside sgemm_cube (or bypass()):
//     PyTorch's own kernel, as it was before the switch;
//   * the operands are float32 on one device and their shapes were planned native before (the Python
//     kernel planned them and told this library, sgemm_cube_switch_remember_native): PyTorch's own
//     kernel with TF32 off for the call, as the Python kernel's native route runs it;
//   * anything else: the Python kernel, which checks, plans and computes as before.
//
// So the decision is the Python plan's, remembered per (device, batch, m, n, k) as the Python kernel
// keeps it; nothing of the plan's rule is repeated here.  No Python API is used (no Python.h): Python
// drives this library through the extern "C" functions at the end, with ctypes.  Built and loaded by
// sgemm_cube/switch_kernels.py.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "true_fp32.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <unordered_set>

namespace {

// Where an operator's schema keeps the operands that make the product's shape; sgemm_cube's plan key
// is (batch, m, n, k) of the product as the Python kernels form it (sgemm_cube/switch.py, _native).
enum class Form : int {
  kMatrixProduct = 0,   // mm(self, mat2):                      (1, m, n, k)
  kBatchedProduct = 1,  // bmm(self, mat2):                     (batch, m, n, k)
  kUpdate = 2,          // addmm(input, mat1, mat2):            (1, m, n, k)
  kBatchedUpdate = 3,   // baddbmm(input, batch1, batch2):      (batch, m, n, k)
  kSummedUpdate = 4,    // addbmm(input, batch1, batch2):       (1, m, n, batch * k)
  kVectorUpdate = 5,    // addmv(input, mat, vec):              (1, m, 1, k)
  kDot = 6,             // dot(self, other):                    (1, 1, 1, k)
};

struct PlanKey {
  int device_type;
  int device_index;
  int64_t batch, m, n, k;
  bool operator==(const PlanKey& o) const {
    return device_type == o.device_type && device_index == o.device_index && batch == o.batch && m == o.m &&
           n == o.n && k == o.k;
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const {
    size_t h = static_cast<size_t>(key.device_type) * 1000003u + static_cast<size_t>(key.device_index + 1);
    for (int64_t v : {key.batch, key.m, key.n, key.k}) h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// The switch's state, set from Python (sgemm_cube.switch) under its lock; read by every call.
std::atomic<uint32_t> routed_devices{0};           // bit (1 << c10::DeviceType) per routed device type
std::mutex native_plans_mutex;
std::unordered_set<PlanKey, PlanKeyHash> native_plans;  // products planned native since the last enable
std::atomic<int64_t> native_calls{0};              // calls this library sent to PyTorch's kernel (a diagnostic)
thread_local int own_depth = 0;                    // > 0: inside sgemm_cube's computation or bypass()

bool planned_native(const PlanKey& key) {
  std::lock_guard<std::mutex> guard(native_plans_mutex);
  return native_plans.count(key) != 0;
}

class SwitchKernel final : public c10::OperatorKernel {
 public:
  SwitchKernel(c10::SafeKernelFunction original, c10::SafeKernelFunction python, Form form, c10::DeviceType device,
               size_t num_arguments)
      : original_(std::move(original)),
        python_(std::move(python)),
        form_(form),
        device_bit_(1u << static_cast<unsigned>(device)),
        cuda_(device == c10::DeviceType::CUDA),
        num_arguments_(num_arguments) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    if (!(routed_devices.load(std::memory_order_relaxed) & device_bit_) || own_depth > 0) {
      original_.callBoxed(op, keys, stack);
      return;
    }
    PlanKey key{};
    if (float32_operands(*stack) && plan_key(*stack, &key) && planned_native(key)) {
      native_calls.fetch_add(1, std::memory_order_relaxed);
      sgemm_cube::TrueFp32 true_fp32(cuda_);
      original_.callBoxed(op, keys, stack);
      return;
    }
    python_.callBoxed(op, keys, stack);
  }

 private:
  // Every tensor argument (out= included) float32 on one device, as the Python kernels ask.
  bool float32_operands(const torch::jit::Stack& stack) const {
    std::optional<c10::Device> device;
    for (const c10::IValue& value : torch::jit::last(stack, num_arguments_)) {
      if (!value.isTensor()) continue;
      const at::Tensor& t = value.toTensor();
      if (!t.defined() || t.scalar_type() != at::kFloat) return false;
      if (!device) {
        device = t.device();
      } else if (t.device() != *device) {
        return false;
      }
    }
    return device.has_value();
  }

  // The product's (device, batch, m, n, k) as sgemm_cube.switch keys its plans; false if the operands
  // do not have the dimensions of this form (the Python kernel passes such calls to PyTorch).
  bool plan_key(const torch::jit::Stack& stack, PlanKey* key) const {
    auto args = torch::jit::last(stack, num_arguments_);
    const bool update = form_ == Form::kUpdate || form_ == Form::kBatchedUpdate || form_ == Form::kSummedUpdate ||
                        form_ == Form::kVectorUpdate;
    const at::Tensor& a = args[update ? 1 : 0].toTensor();
    const at::Tensor& b = args[update ? 2 : 1].toTensor();
    const auto sa = a.sizes();
    const auto sb = b.sizes();
    switch (form_) {
      case Form::kMatrixProduct:
      case Form::kUpdate:
        if (sa.size() != 2 || sb.size() != 2 || sa[1] != sb[0]) return false;
        *key = PlanKey{0, 0, 1, sa[0], sb[1], sa[1]};
        break;
      case Form::kBatchedProduct:
      case Form::kBatchedUpdate:
        if (sa.size() != 3 || sb.size() != 3 || sa[0] != sb[0] || sa[2] != sb[1]) return false;
        *key = PlanKey{0, 0, sa[0], sa[1], sb[2], sa[2]};
        break;
      case Form::kSummedUpdate:
        if (sa.size() != 3 || sb.size() != 3 || sa[0] != sb[0] || sa[2] != sb[1]) return false;
        *key = PlanKey{0, 0, 1, sa[1], sb[2], sa[0] * sa[2]};
        break;
      case Form::kVectorUpdate:
        if (sa.size() != 2 || sb.size() != 1 || sa[1] != sb[0]) return false;
        *key = PlanKey{0, 0, 1, sa[0], 1, sa[1]};
        break;
      case Form::kDot:
        if (sa.size() != 1 || sb.size() != 1 || sa[0] != sb[0]) return false;
        *key = PlanKey{0, 0, 1, 1, 1, sa[0]};
        break;
    }
    key->device_type = static_cast<int>(a.device().type());
    key->device_index = a.device().index();
    return true;
  }

  c10::SafeKernelFunction original_;  // PyTorch's kernel, as it was before the switch registered
  c10::SafeKernelFunction python_;    // sgemm_cube.switch's Python kernel
  Form form_;
  uint32_t device_bit_;
  bool cuda_;
  size_t num_arguments_;
};

// Registering in front of a kernel makes the dispatcher warn "Overriding a previously registered
// kernel": that is the point, so the warnings of our own registrations are dropped.
class SilentWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

std::mutex registry_mutex;
std::map<std::pair<std::string, int>, c10::SafeKernelFunction> originals;  // (name, device type) -> PyTorch's kernel
std::map<int, std::unique_ptr<torch::Library>> libraries;       // dispatch key -> our registrations
std::string last_error;

c10::OperatorHandle find_operator(const std::string& name) {
  const auto dot = name.find('.');
  const std::string base = "aten::" + name.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
  return c10::Dispatcher::singleton().findSchemaOrThrow(base.c_str(), overload.c_str());
}

Form form_of(const std::string& name) {
  std::string base = name.substr(0, name.find('.'));
  if (!base.empty() && base.back() == '_') base.pop_back();  // in-place: addmm_ is addmm
  static const std::map<std::string, Form> forms = {
      {"mm", Form::kMatrixProduct},   {"bmm", Form::kBatchedProduct},     {"addmm", Form::kUpdate},
      {"_addmm_activation", Form::kUpdate}, {"baddbmm", Form::kBatchedUpdate}, {"addbmm", Form::kSummedUpdate},
      {"addmv", Form::kVectorUpdate}, {"dot", Form::kDot},                {"vdot", Form::kDot}};
  const auto found = forms.find(base);
  TORCH_CHECK(found != forms.end(), "sgemm_cube's C++ switch kernels have no form for aten::", name);
  return found->second;
}

c10::DispatchKey dispatch_key(c10::DeviceType device) {
  return c10::computeDispatchKey(std::nullopt, std::nullopt, c10::Device(device));
}

template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const c10::Error& e) {
    last_error = e.what_without_backtrace();
    return 1;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 1;
  }
}

}  // namespace

extern "C" {

// The c10::DeviceType of a device name ("cuda"), the device types of the functions below.
int sgemm_cube_switch_device_type(const char* name) {
  try {
    return static_cast<int>(c10::Device(name).type());
  } catch (const c10::Error& e) {
    last_error = e.what_without_backtrace();
    return -1;
  } catch (const std::exception& e) {
    last_error = e.what();
    return -1;
  }
}

// The message of the last failed call (a return of 1).
const char* sgemm_cube_switch_last_error() { return last_error.c_str(); }

// Remember PyTorch's kernel of `name` ("mm.out") for this device type (a c10::DeviceType), before
// sgemm_cube's Python kernel is registered in front of it.
int sgemm_cube_switch_keep_original(const char* name, int device_type) {
  return guarded([&] {
    std::lock_guard<std::mutex> guard(registry_mutex);
    const auto device = static_cast<c10::DeviceType>(device_type);
    const auto op = find_operator(name);
    originals.insert_or_assign({name, device_type}, op.getComputedKernelForDispatchKey(dispatch_key(device)));
  });
}

// Register the C++ kernel of `name` for this device type in front of the Python kernel registered
// there now.  keep_original must have been called for it first.
int sgemm_cube_switch_register(const char* name, int device_type) {
  return guarded([&] {
    std::lock_guard<std::mutex> guard(registry_mutex);
    const auto device = static_cast<c10::DeviceType>(device_type);
    const auto found = originals.find({name, device_type});
    TORCH_CHECK(found != originals.end(), "sgemm_cube_switch_register: keep_original was not called for ", name);
    const auto op = find_operator(name);
    const auto key = dispatch_key(device);
    auto kernel = std::make_unique<SwitchKernel>(found->second, op.getComputedKernelForDispatchKey(key),
                                                 form_of(name), device, op.schema().arguments().size());
    auto& library = libraries[static_cast<int>(key)];
    if (!library) library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    SilentWarnings silent;
    c10::WarningUtils::WarningHandlerGuard quiet(&silent);
    library->impl(name, torch::CppFunction::makeFromBoxedFunctor(std::move(kernel)));
  });
}

// Remove every C++ kernel (the Python kernels behind them are in force again).  Only with no other
// thread running PyTorch operators, as sgemm_cube.switch.restore().
int sgemm_cube_switch_unregister() {
  return guarded([&] {
    std::lock_guard<std::mutex> guard(registry_mutex);
    libraries.clear();
    originals.clear();
  });
}

// Route (on != 0) or stop routing a device type's calls.
void sgemm_cube_switch_route(int device_type, int on) {
  const uint32_t bit = 1u << static_cast<unsigned>(device_type);
  if (on) {
    routed_devices.fetch_or(bit);
  } else {
    routed_devices.fetch_and(~bit);
  }
}

// The Python kernel planned this product native: later calls of the same shapes take PyTorch's kernel here.
void sgemm_cube_switch_remember_native(int device_type, int device_index, int64_t batch, int64_t m, int64_t n,
                                       int64_t k) {
  std::lock_guard<std::mutex> guard(native_plans_mutex);
  native_plans.insert(PlanKey{device_type, device_index, batch, m, n, k});
}

// Forget every plan (new options, or too many shapes).
void sgemm_cube_switch_forget_plans() {
  std::lock_guard<std::mutex> guard(native_plans_mutex);
  native_plans.clear();
}

// Calls inside sgemm_cube's own computation and in bypass() blocks go to PyTorch's kernels (this thread).
void sgemm_cube_switch_enter_own() { ++own_depth; }
void sgemm_cube_switch_exit_own() { --own_depth; }

// How many calls went to PyTorch's kernel through a remembered native plan (a diagnostic for tests).
int64_t sgemm_cube_switch_native_calls() { return native_calls.load(); }

}  // extern "C"
