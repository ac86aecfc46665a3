"""sgemm_cube.matmul's small-call lookup in C++ (sgemm_cube/csrc/fast_path.cpp): it answers only calls
remembered with the same operand kind and options object, as torch.matmul answers them; anything else
is None (the Python path).  On the CPU: the extension is device-agnostic, sgemm_cube.product remembers
CUDA calls only (tests/gpu covers that route)."""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from sgemm_cube import fast_path, product, switch_kernels  # noqa: E402
from sgemm_cube.plan import make_request  # noqa: E402


@pytest.fixture
def lookup():
    """The extension, emptied before and after the test."""
    status = fast_path.status()
    if switch_kernels.find_compiler() and sys.platform in ("linux", "darwin"):
        assert status.language == "c++", status.detail
    else:  # the fallback says why, and the Python lookup runs (tests/sgemm_cube/test_api.py)
        assert status.language == "python" and "compiler" in status.detail
        pytest.fail("no C++ compiler here: the C++ lookup cannot be tested (its status says why, as checked)")
    module = fast_path.load()
    module.forget()
    yield module
    module.forget()


def test_it_answers_only_remembered_calls(lookup):
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(6, 8, generator=g), torch.randn(8, 5, generator=g)
    req = make_request()
    assert lookup.call(a, b, req) is None and lookup.size() == 0
    lookup.remember(a, b, req)
    lookup.remember(a, b, req)  # once
    assert lookup.size() == 1
    got = lookup.call(a, b, req)
    assert got.__class__ is torch.Tensor and torch.equal(got, torch.matmul(a, b))
    c = torch.randn(6, 8, generator=g)  # other values, same kind: remembered
    assert torch.equal(lookup.call(c, b, req), torch.matmul(c, b))
    assert torch.equal(lookup.call(a.T.contiguous().T, b, req), torch.matmul(a, b))  # strides are not the key
    for x, y, options in [
        (a, b, make_request(sb=10)),                   # other options
        (a, b, make_request()._replace(sb=12)),        # equal options, another object
        (a[:5], b, req),                               # other shapes
        (a.double(), b.double(), req),                 # other dtypes
        (a[None], b, req),                             # other dimensions
        (torch.nn.Parameter(a), b, req),               # a subclass
    ]:
        assert lookup.call(x, y, options) is None
    lookup.forget()
    assert lookup.size() == 0 and lookup.call(a, b, req) is None


def test_grad_and_torch_function_modes_take_the_python_path(lookup):
    """Operands that require grad are answered only with grad mode off (no graph to record), and never
    while a __torch_function__ mode is active (torch.matmul would call it)."""
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    req = make_request()
    lookup.remember(a, b, req)
    w = torch.randn(4, 4, requires_grad=True)
    assert lookup.call(w, b, req) is None
    with torch.no_grad():
        got = lookup.call(w, b, req)
    assert torch.equal(got, torch.matmul(w.detach(), b)) and not got.requires_grad

    class Seen(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Seen():
        assert lookup.call(a, b, req) is None


def test_bad_arguments_raise(lookup):
    a = torch.randn(2, 2)
    with pytest.raises(TypeError, match="3 arguments"):
        lookup.call(a, a)
    with pytest.raises(TypeError, match="torch.Tensor"):
        lookup.remember(a, [1.0], make_request())
    lookup.remember(a, torch.randn(3, 2), make_request())  # shapes that do not multiply: torch's error
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        lookup.call(a, torch.randn(3, 2), make_request())


def test_native_call_asks_the_lookup(lookup, monkeypatch):
    """product.native_call hands every call to the C++ lookup once it is loaded (out= aside)."""
    monkeypatch.setattr(product, "_FAST", lookup)
    a, b = torch.randn(3, 16), torch.randn(16, 2)
    req = make_request()
    assert product.native_call(req, a, b, None) is None
    lookup.remember(a, b, req)
    assert torch.equal(product.native_call(req, a, b, None), torch.matmul(a, b))
    assert product.native_call(req, a, b, torch.empty(3, 2)) is None
