// sgemm_cube.matmul's remembered native plans, in C++: a small call planned native before runs
// PyTorch's matmul without sgemm_cube's Python checks.
//
// sgemm_cube.product.compute remembers (remember) each CUDA product whose plan is PyTorch's own matmul
// of the operands as they are, with its options object (a sgemm_cube.plan.Request).  A call is
// answered here only if both operands are plain torch.Tensor objects of the same shapes, dtypes,
// layouts and devices as a remembered call with the same (identical) options object, no operand
// needs grad while grad mode is on, and no __torch_function__ mode is active (torch.matmul would call
// it); then it is at::matmul, with TF32 off on CUDA and the GIL released, as torch.matmul runs it.
// Anything else returns None and takes the Python path, which gives the same answer.  The decision
// is the Python plan's: nothing of its rule is repeated here.
//
// Two ways in: call(a, b, request) once the options are validated (sgemm_cube.product.native_call),
// and matmul(a, b, sb, ..., fixup) with sgemm_cube.matmul's own arguments, the first thing it does.
// The second knows an options object only through bind(request, sb, ...): the option values that
// product.native_call saw validated into it, compared by identity (the defaults, literals and small
// integers are the same objects from call to call; any other object misses and is validated in
// Python).  A CPython extension module (sgemm_cube._fast_path), built and loaded by
// sgemm_cube/fast_path.py.
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/ops/matmul.h>
#include <c10/core/GradMode.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include "true_fp32.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace {

// (shapes, dtypes, layouts, devices) of both operands and the options object's address; inline up to
// 8 dimensions each (no allocation per call).
using KeyValues = c10::SmallVector<int64_t, 27>;

struct CallKey {
  KeyValues values;
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

// sgemm_cube.matmul's options, in its signature's order: sb, scheme, scale, order, accumulate, backend, fixup.
constexpr int kOptions = 7;
constexpr size_t kMaxBindings = 64;  // more option objects than any program spells: start over

struct Binding {
  std::array<PyObject*, kOptions> options;  // referenced while bound, so that their addresses stay theirs
  PyObject* request;                       // referenced in requests
};
std::vector<Binding> bindings;  // under plans_mutex

bool plain_tensor(PyObject* obj) { return Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(THPVariableClass); }

void append_operand(const at::Tensor& t, KeyValues* values) {
  values->push_back(t.dim());
  for (int64_t size : t.sizes()) values->push_back(size);
  values->push_back(static_cast<int64_t>(t.scalar_type()));
  values->push_back(static_cast<int64_t>(t.layout()));
  values->push_back(static_cast<int64_t>(t.device().type()));
  values->push_back(t.device().index());
}

CallKey key_of(const at::Tensor& a, const at::Tensor& b, PyObject* request) {
  CallKey key;
  append_operand(a, &key.values);
  append_operand(b, &key.values);
  key.values.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(request)));
  return key;
}

void drop_bindings() {  // under plans_mutex, with the GIL held
  for (const Binding& binding : bindings) {
    for (PyObject* option : binding.options) Py_DECREF(option);
  }
  bindings.clear();
}

void forget_all() {  // under plans_mutex, with the GIL held
  plans.clear();
  drop_bindings();
  for (PyObject* request : requests) Py_DECREF(request);
  requests.clear();
}

bool count_is(const char* name, Py_ssize_t count, Py_ssize_t wanted, const char* arguments) {
  if (count == wanted) return true;
  PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%s), got %zd", name, wanted, arguments, count);
  return false;
}

bool three_arguments(const char* name, Py_ssize_t count) { return count_is(name, count, 3, "a, b, request"); }

// The binding of these option values (identical objects), or nullptr.  Under plans_mutex.
Binding* binding_of(PyObject* const* options) {
  for (Binding& binding : bindings) {
    bool same = true;
    for (int i = 0; i < kOptions && same; ++i) same = binding.options[i] == options[i];
    if (same) return &binding;
  }
  return nullptr;
}

// a @ b by at::matmul if remembered (see the top of this file) with request, or where options is
// given with the request bound to those option objects; else None.
PyObject* answer(PyObject* a_obj, PyObject* b_obj, PyObject* request, PyObject* const* options) {
  if (!plain_tensor(a_obj) || !plain_tensor(b_obj) || at::impl::torch_function_mode_enabled()) {
    Py_RETURN_NONE;
  }
  const at::Tensor& a = THPVariable_Unpack(a_obj);
  const at::Tensor& b = THPVariable_Unpack(b_obj);
  if ((a.requires_grad() || b.requires_grad()) && c10::GradMode::is_enabled()) Py_RETURN_NONE;
  {
    std::lock_guard<std::mutex> guard(plans_mutex);
    if (options != nullptr) {
      const Binding* binding = binding_of(options);
      if (binding == nullptr) Py_RETURN_NONE;
      request = binding->request;
    }
    if (plans.count(key_of(a, b, request)) == 0) Py_RETURN_NONE;
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
  return answer(args[0], args[1], args[2], nullptr);
  END_HANDLE_TH_ERRORS
}

// bind(request, sb, scheme, scale, order, accumulate, backend, fixup): matmul() with these option
// objects (identical ones) asks for request's remembered calls.
PyObject* bind(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (!count_is("bind", count, 1 + kOptions, "request, sb, scheme, scale, order, accumulate, backend, fixup")) {
    return nullptr;
  }
  std::lock_guard<std::mutex> guard(plans_mutex);
  PyObject* request = args[0];
  bool remembered = false;  // bound requests stay referenced through requests, as remember's
  for (PyObject* known : requests) remembered = remembered || known == request;
  if (!remembered) Py_RETURN_NONE;
  if (Binding* bound = binding_of(args + 1)) {  // the same option values validated into a new object
    bound->request = request;                    // (make_request's cache let the old one go): the new one
    Py_RETURN_NONE;
  }
  if (bindings.size() >= kMaxBindings) drop_bindings();
  Binding binding;
  for (int i = 0; i < kOptions; ++i) {
    Py_INCREF(args[1 + i]);
    binding.options[i] = args[1 + i];
  }
  binding.request = request;
  bindings.push_back(binding);
  Py_RETURN_NONE;
}

// matmul(a, b, sb, scheme, scale, order, accumulate, backend, out, fixup): sgemm_cube.matmul's
// arguments as it received them; a @ b by at::matmul if remembered with the options bound to these
// option objects and no out, else None.
PyObject* matmul(PyObject*, PyObject* const* args, Py_ssize_t count) {
  HANDLE_TH_ERRORS
  if (!count_is("matmul", count, 3 + kOptions,
                "a, b, sb, scheme, scale, order, accumulate, backend, out, fixup")) {
    return nullptr;
  }
  if (args[8] != Py_None) Py_RETURN_NONE;  // out=
  const std::array<PyObject*, kOptions> options = {args[2], args[3], args[4], args[5], args[6], args[7], args[9]};
  return answer(args[0], args[1], nullptr, options.data());
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
    {"bind", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(bind)), METH_FASTCALL,
     "bind(request, sb, scheme, scale, order, accumulate, backend, fixup): matmul() with these option "
     "objects asks for request's remembered calls (request must be remembered)"},
    {"matmul", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(matmul)), METH_FASTCALL,
     "matmul(a, b, sb, scheme, scale, order, accumulate, backend, out, fixup): sgemm_cube.matmul's "
     "arguments; a @ b by at::matmul if remembered with the options bound to them, else None"},
    {"forget", forget, METH_NOARGS, "forget(): no call is remembered any more"},
    {"size", size, METH_NOARGS, "size(): how many calls are remembered"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "sgemm_cube._fast_path",
                          "sgemm_cube.matmul's remembered native plans (sgemm_cube/csrc/fast_path.cpp)", -1,
                          methods};

}  // namespace

PyMODINIT_FUNC PyInit__fast_path() { return PyModule_Create(&module_def); }
