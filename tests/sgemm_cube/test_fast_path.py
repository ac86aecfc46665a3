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


#: sgemm_cube.matmul's defaults, as its signature holds them (the objects a call without options passes).
DEFAULTS = (12, "auto", "auto", "termwise", None, "auto", True)  # sb, scheme, scale, order, accumulate, backend, fixup


def _ask(lookup, a, b, options, out=None):
    """lookup.matmul with sgemm_cube.matmul's argument order (out between backend and fixup)."""
    return lookup.matmul(a, b, *options[:6], out, options[6])


def test_matmul_answers_only_bound_options(lookup):
    """matmul(a, b, sb, ..., fixup) answers where the option objects were bound to a remembered request."""
    g = torch.Generator().manual_seed(9)
    a, b = torch.randn(5, 7, generator=g), torch.randn(7, 3, generator=g)
    req = make_request()
    lookup.remember(a, b, req)
    assert _ask(lookup, a, b, DEFAULTS) is None                # nothing bound
    lookup.bind(make_request(sb=10), *DEFAULTS)                # a request never remembered: not bound
    assert _ask(lookup, a, b, DEFAULTS) is None
    lookup.bind(req, *DEFAULTS)
    lookup.bind(req, *DEFAULTS)  # once
    assert torch.equal(_ask(lookup, a, b, DEFAULTS), torch.matmul(a, b))
    equal_not_same = ("".join(["a", "uto"]),) + DEFAULTS[2:]  # an equal scheme string, another object
    assert equal_not_same[0] == DEFAULTS[1] and equal_not_same[0] is not DEFAULTS[1]
    for options in [(10,) + DEFAULTS[1:], (DEFAULTS[0],) + equal_not_same, DEFAULTS[:6] + (False,)]:
        assert _ask(lookup, a, b, options) is None
    assert _ask(lookup, a, b, DEFAULTS, out=torch.empty(5, 3)) is None  # out= takes the Python path
    assert _ask(lookup, a[:4], b, DEFAULTS) is None                     # a call never remembered
    w = b.clone().requires_grad_()
    assert _ask(lookup, a, w, DEFAULTS) is None                         # grad mode on, an operand needs grad
    with pytest.raises(TypeError, match="10 arguments"):
        lookup.matmul(a, b)
    with pytest.raises(TypeError, match="8 arguments"):
        lookup.bind(req)
    # The same option values validated again into another object (make_request's cache is bounded): the
    # binding follows the newer one.
    again = make_request()._replace(sb=12)
    c = torch.randn(2, 7, generator=g)
    lookup.remember(c, b, again)
    assert _ask(lookup, c, b, DEFAULTS) is None  # remembered under the newer object only
    lookup.bind(again, *DEFAULTS)
    assert torch.equal(_ask(lookup, c, b, DEFAULTS), torch.matmul(c, b))
    lookup.forget()  # forgets the bindings with the plans
    lookup.remember(a, b, req)
    assert _ask(lookup, a, b, DEFAULTS) is None


def test_sgemm_cube_matmul_asks_first_then_binds(lookup, monkeypatch):
    """sgemm_cube.matmul asks the lookup with its own arguments before anything else: a remembered call
    with options validated once before (native_call binds them) never reaches the Python option checks."""
    import sgemm_cube
    from sgemm_cube import api

    monkeypatch.setattr(product, "_FAST", lookup)
    monkeypatch.setattr(product, "fast_matmul", lookup.matmul)
    validated = []
    real_options = api._options
    monkeypatch.setattr(api, "_options", lambda *args: validated.append(args) or real_options(*args))
    g = torch.Generator().manual_seed(11)
    a, b = torch.randn(6, 9, generator=g), torch.randn(9, 4, generator=g)
    # what product.compute remembers for a CUDA call planned native: the options object the defaults give
    lookup.remember(a, b, real_options(*DEFAULTS))
    first = sgemm_cube.matmul(a, b)
    assert len(validated) == 1 and torch.equal(first, torch.matmul(a, b))
    again = sgemm_cube.matmul(a, b)  # bound by the first call: answered in C++
    assert len(validated) == 1 and torch.equal(again, first)
    sgemm_cube.matmul(a, b, sb=12, backend="auto")  # literals are the defaults' objects
    assert len(validated) == 1
    sgemm_cube.matmul(a, b, sb=11)  # other options: validated (and computed by the CPU model, not remembered)
    assert len(validated) == 2
    out = torch.empty(6, 4)
    sgemm_cube.matmul(a, b, out=out)
    assert len(validated) == 3 and torch.equal(out, first)
