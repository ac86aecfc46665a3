// sgemm_cube.matmul's remembered native plans, in C++: a small call planned native before runs
// PyTorch's matmul without sgemm_cube's Python checks.
//
// sgemm_cube.product.compute remembers (remember) each CUDA product whose plan is PyTorch's own matmul
// of the operands as they are; sgemm_cube.product.native_call asks (call) before anything else.  A
// call is answered here only if both operands are plain torch.Tensor objects of the same shapes,
// dtypes, layouts and devices as a remembered call with the same (identical) options object, no
// operand needs grad while grad mode is on, and no __torch_function__ mode is active (torch.matmul
// would call it); then it is at::matmul, with TF32 off on CUDA and the GIL released, as torch.matmul
// runs it.  Anything else returns None and takes the Python path, which gives the same answer.  The
// decision is the Python plan's: nothing of its rule is repeated here.  A CPython extension module
// (sgemm_cube._fast_path), built and loaded by sgemm_cube/fast_path.py.
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/ops/matmul.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include "true_fp32.h"

#include <cstdint>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace {

// (shapes, dtypes, layouts, devices) of both operands and the options object's address.
struct CallKey {
  std::vector<int64_t> values;
  bool operator==(const CallKey& other) const { return values == other.values; }
};

struct CallKeyHash {
  size_t operator()(const CallKey& key) const {
    size_t h = 0;
    for (int64_t v : key.values) h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

constexpr size_t kMaxPlans = 4096;  // many shapes (dynamic sequence lengths): start over, as the Python dict

std::mutex plans_mutex;
std::unordered_set<CallKey, CallKeyHash> plans;
std::vector<PyObject*> requests;  // the options objects of remembered calls, referenced while remembered

bool plain_tensor(PyObject* obj) { return Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(THPVariableClass); }

void append_operand(const at::Tensor& t, std::vector<int64_t>* values) {
  values->push_back(t.dim());
  for (int64_t size : t.sizes()) values->push_back(size);
  values->push_back(static_cast<int64_t>(t.scalar_type()));
  values->push_back(static_cast<int64_t>(t.layout()));
  values->push_back(static_cast<int64_t>(t.device().type()));
  values->push_back(t.device().index());
}

CallKey key_of(const at::Tensor& a, const at::Tensor& b, PyObject* request) {
  CallKey key;
  key.values.reserve(16);
  append_operand(a, &key.values);
  append_operand(b, &key.values);
  key.values.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(request)));
  return key;
}

void forget_all() {  // under plans_mutex, with the GIL held
  plans.clear();
  for (PyObject* request : requests) Py_DECREF(request);
  requests.clear();
}

bool three_arguments(const char* name, Py_ssize_t count) {
  if (count == 3) return true;
  PyErr_Format(PyExc_TypeError, "%s() takes 3 arguments (a, b, request), got %zd", name, count);
  return false;
}

// remember(a, b, request): later calls of these operands' kind with this options object run here.
PyObject* remember(PyObject*, PyObject* const* args, Py_ssize_t count) {
  HANDLE_TH_ERRORS
  if (!three_arguments("remember", count)) return nullptr;
  if (!plain_tensor(args[0]) || !plain_tensor(args[1])) {
    PyErr_SetString(PyExc_TypeError, "remember() takes two torch.Tensor objects");
    return nullptr;
  }
  CallKey key = key_of(THPVariable_Unpack(args[0]), THPVariable_Unpack(args[1]), args[2]);
  std::lock_guard<std::mutex> guard(plans_mutex);
  if (plans.size() >= kMaxPlans) forget_all();
  if (plans.insert(std::move(key)).second) {
    Py_INCREF(args[2]);  // its address stays its own while remembered
    requests.push_back(args[2]);
  }
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// call(a, b, request): a @ b by at::matmul if remembered (see the top of this file), else None.
PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t count) {
  HANDLE_TH_ERRORS
  if (!three_arguments("call", count)) return nullptr;
  if (!plain_tensor(args[0]) || !plain_tensor(args[1]) || at::impl::torch_function_mode_enabled()) {
    Py_RETURN_NONE;
  }
  const at::Tensor& a = THPVariable_Unpack(args[0]);
  const at::Tensor& b = THPVariable_Unpack(args[1]);
  if ((a.requires_grad() || b.requires_grad()) && c10::GradMode::is_enabled()) Py_RETURN_NONE;
  {
    const CallKey key = key_of(a, b, args[2]);
    std::lock_guard<std::mutex> guard(plans_mutex);
    if (plans.count(key) == 0) Py_RETURN_NONE;
  }
  at::Tensor result;
  {
    Py_BEGIN_ALLOW_THREADS  // as torch.matmul: other Python threads run meanwhile
    try {
      sgemm_cube::TrueFp32 true_fp32(a.is_cuda());
      result = at::matmul(a, b);
    } catch (...) {
      Py_BLOCK_THREADS
      throw;
    }
    Py_END_ALLOW_THREADS
  }
  return THPVariable_Wrap(std::move(result));
  END_HANDLE_TH_ERRORS
}

// forget(): no call is remembered any more.
PyObject* forget(PyObject*, PyObject*) {
  std::lock_guard<std::mutex> guard(plans_mutex);
  forget_all();
  Py_RETURN_NONE;
}

// size(): how many calls are remembered (a diagnostic for tests).
PyObject* size(PyObject*, PyObject*) {
  std::lock_guard<std::mutex> guard(plans_mutex);
  return PyLong_FromSize_t(plans.size());
}

PyMethodDef methods[] = {
    {"remember", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(remember)), METH_FASTCALL,
     "remember(a, b, request): calls of these operands' kind with this options object run here"},
    {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call)), METH_FASTCALL,
     "call(a, b, request): a @ b by at::matmul if remembered, else None"},
    {"forget", forget, METH_NOARGS, "forget(): no call is remembered any more"},
    {"size", size, METH_NOARGS, "size(): how many calls are remembered"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "sgemm_cube._fast_path",
                          "sgemm_cube.matmul's remembered native plans (sgemm_cube/csrc/fast_path.cpp)", -1,
                          methods};

}  // namespace

PyMODINIT_FUNC PyInit__fast_path() { return PyModule_Create(&module_def); }
