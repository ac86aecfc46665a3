"""CUDA backend of sgemm_cube: the SGEMM-cube algorithm on tensor cores, in Triton.

Importing this package needs neither torch nor triton nor a GPU; the kernels
are imported on first use.  One entry point runs a product: :func:`run`, which reads
a :class:`~sgemm_cube.plan.Plan` only (:func:`matmul`, the checked entry of
benchmarks and tests, makes the plan and calls it).  A product is five or six launches (:mod:`.launch`): the
statistics of both operands; their line meta and fix-up lists; the scaled
split; the GEMM with its fix-up programs; the recheck of outputs that overflowed where the emulation's
error bound cannot tell whether the exact ones do (six where the line meta follows a summary of both
operands' lines: BF16 schemes, and FP16 schemes from K = 16 under ``scale`` "auto" or "rows",
:func:`sgemm_cube.cpu_fallback.guard.fp16_rule`).  A plan of scheme ``"auto"`` (the default's from
``launch.AUTO_MIN_FLOPS`` or ``launch.AUTO_MIN_K`` on) is eight: the statistics, both schemes' summaries and
line meta (two launches), the GPU's choice, the split in the chosen scheme, both GEMMs (the one not chosen
returns at once), the recheck.  Layers, one per module:

* :mod:`.split_kernel` -- FP32 -> padded buffer of FP16 (hi, lo) or three
  BF16 slices, with the line meta (:mod:`.line_meta`) and fix-up lists (three
  memory-bound passes, each over both operands);
* :mod:`.gemm_kernel` -- one GEMM kernel for every scheme: the scheme's
  tensor-core products per K step (3 or 4 FP16, 9 or 6 BF16), the level-0
  partial flushed into a round-to-nearest FP32 accumulator every ``flush_k``
  elements, termwise or elementwise combination; around the K loop (a tile's
  place, line meta and epilogue): :mod:`.gemm_tiles`;
* :mod:`.fixup_kernel` -- the fix-up programs of the GEMM launch: the fix-up
  lines' outputs from the unscaled operands, in FP64;
* :mod:`.launch` -- config resolution, padding, launches (:func:`.launch.run`);
* :mod:`.configs` -- the schema, key list and validator of ``configs/<gpu>.json``
  and ``configs/default.json`` (written by ``tuning/gpu.py`` alone);
* :mod:`.hybrid` -- per-GPU tables and :func:`prefers_native`.

Measurements behind every default: ``docs/cuda_design.md``.
"""
from __future__ import annotations

from .configs import ORDERS, SCHEMES
from .hybrid import interpreter_active, prefers_native

__all__ = ["SCHEMES", "ORDERS", "is_available", "unavailable_reason", "plan", "run", "matmul", "prefers_native",
           "interpreter_active"]


def unavailable_reason() -> str:
    """One line saying what is missing for this backend, or ``""`` if nothing is.

    The backend runs on CUDA tensors, or on CPU data when Triton's NumPy
    interpreter is on (``TRITON_INTERPRET=1`` before triton is imported).
    """
    try:
        import torch
    except ImportError:
        return "the cuda backend needs torch and triton: pip install 'sgemm_cube[cuda]'"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "the cuda backend needs triton beside torch: pip install 'sgemm_cube[cuda]'"
    if not torch.cuda.is_available() and not interpreter_active():
        return ("the cuda backend needs a CUDA GPU (torch.cuda.is_available() is False; "
                "TRITON_INTERPRET=1 runs its kernels on the CPU, slowly)")
    return ""


def is_available() -> bool:
    """Whether torch and triton import and there is a GPU (or the Triton interpreter is on)."""
    return unavailable_reason() == ""


def _auto_scheme(req, batch: int, m: int, n: int, k: int) -> tuple[str, str] | None:
    """``make_plan``'s ``auto_scheme``: from ``launch.AUTO_MIN_FLOPS`` flops or ``launch.AUTO_MIN_K`` on
    (termwise, scale not "matrix"), ``scheme="auto"`` is the GPU's choice per call between fp16x3 and bf16x6;
    below both, fp16x3 (None)."""
    if req.scheme != "auto" or req.order != "termwise" or req.scale == "matrix" or not (batch and m and n and k):
        return None
    from . import launch

    if 2.0 * batch * m * n * k < launch.AUTO_MIN_FLOPS and k < launch.AUTO_MIN_K:
        return None
    return "auto", (f"the GPU chooses per call, bf16x6 where fp16x3 would recompute more than "
                    f"{launch.AUTO_MARGIN:.0%} more of the outputs in FP64 than bf16x6, fp16x3 otherwise "
                    f"(2*batch*m*n*k >= {launch.AUTO_MIN_FLOPS:.3g} or K >= {launch.AUTO_MIN_K}: "
                    f"configs/default.json's auto_scheme); both keep SGEMM's error bound")


def plan(req, batch: int, m: int, n: int, k: int, like=None):
    """The plan for a (batch, m, k) @ (batch, k, n) product on ``like``'s device (:func:`sgemm_cube.backends.base.make_plan`).

    Under ``backend="auto"`` the measured hybrid rule (:func:`prefers_native`) may choose native FP32.
    An emulated plan's ``config`` is the launch configuration that runs (:func:`.launch.plan_config`:
    ``configs/default.json``, the GPU's table, the user's measured table); a test or study forces
    another, a kernel variant say, with ``plan.with_config(variant=...)``.  A plan of scheme ``"auto"``
    (the GPU chooses fp16x3 or bf16x6 per call) has ``config`` None: each scheme's GEMM runs its own
    stored config, and ``with_config`` overrides apply to both.
    """
    from ..base import make_plan

    native = None
    if req.backend == "auto" and like is not None and prefers_native(batch, m, n, k, like.device):
        native = "the measured hybrid rule says cuBLAS SGEMM is faster for this shape on this GPU"
    chosen = make_plan(req, "cuda", SCHEMES, k, orders=ORDERS, native_reason=native,
                       auto_scheme=_auto_scheme(req, batch, m, n, k))
    if chosen.backend == "cuda" and batch and m and n and k:  # an empty product launches nothing
        import torch

        from .launch import plan_config

        device = like.device if isinstance(like, torch.Tensor) else torch.device("cpu" if interpreter_active()
                                                                                else "cuda")
        if chosen.scheme != "auto":  # "auto" runs each scheme's own stored config (two GEMMs are queued)
            chosen = chosen._replace(config=plan_config(batch, m, n, k, device, order=chosen.order,
                                                        scheme=chosen.scheme))
    return chosen


def run(plan, a, b, out, alpha: float = 1.0) -> None:
    """Run ``plan`` on (B, M, K) and (B, K, N) float32 tensors into (B, M, N) ``out`` (times ``alpha``): no sync.

    Every decision comes from ``plan``: scheme, sb, scale, order, fixup, and ``config``, the launch
    configuration (None: the stored tables choose, :func:`.launch.resolve_config`).
    """
    import warnings

    import torch

    from .launch import run as _run

    assert plan.backend == "cuda" and plan.scheme in (*SCHEMES, "auto") and plan.order in ORDERS, plan
    if interpreter_active() and not isinstance(a, torch.Tensor):  # NumPy data for the CPU interpreter
        with warnings.catch_warnings():  # broadcast views are read-only; the kernels only read a and b
            warnings.simplefilter("ignore", UserWarning)
            a, b, out = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
    options = dict(sb=plan.sb, order=plan.order, scheme=plan.scheme, scale=plan.scale, fixup=plan.fixup,
                   config=plan.config, alpha=alpha)
    if out.shape[2] > 1 and out.stride(2) != 1:
        res = torch.empty(out.shape, dtype=out.dtype, device=out.device)
        _run(a, b, res, **options)
        out.copy_(res)
        return
    _run(a, b, out, **options)


def plan_state() -> tuple:
    """What :func:`plan` reads besides its arguments and the (cached) config files: ``launch.AUTO_MIN_FLOPS``
    and ``launch.AUTO_MIN_K``, which studies and tests set.  A remembered call (:mod:`sgemm_cube.product`)
    holds only while it is the same."""
    from . import launch

    return (launch.AUTO_MIN_FLOPS, launch.AUTO_MIN_K)


def replayable(plan, a, b, out):
    """What :func:`run` just queued for ``plan`` on these (B, M, K), (B, K, N) and (B, M, N) tensors, as
    ``launches(a, b, out) -> bool`` for later calls of the same shapes, strides, alignment and device
    (:mod:`sgemm_cube.product`'s remembered calls): it queues the same launches on the new tensors and returns
    True, or launches nothing and returns False where the workspace does not fit in the GPU's memory now (the
    full path then chunks the product).  ``None`` where :func:`.launch.run` keeps no launches to replay."""
    from .launch import _OUT_OF_MEMORY, replay

    if out.shape[2] > 1 and out.stride(2) != 1:  # run computes such an out through a copy
        return None
    cached = replay(a, b, out, sb=plan.sb, order=plan.order, scheme=plan.scheme, scale=plan.scale,
                    fixup=plan.fixup, config=plan.config)
    if cached is None:
        return None

    def launches(a, b, out) -> bool:
        try:
            cached(a, b, out)
        except _OUT_OF_MEMORY:
            return False
        return True

    return launches


def matmul(a, b, *, out, sb=12, order: str = "termwise", scheme: str = "fp16x3", keep_lo_lo: bool = False,
           scale="auto", fixup: bool = True, flush_k: int | None = None, config: dict | None = None) -> None:
    """Emulated FP32 batched product ``out[i] = a[i] @ b[i]`` on tensor cores, with checked arguments.

    The options become a plan as :func:`sgemm_cube.matmul`'s do (:func:`sgemm_cube.plan.make_request`
    checks them, :func:`plan` decides), with ``config`` and ``flush_k`` overriding its launch
    configuration (:meth:`sgemm_cube.plan.Plan.with_config`); then :func:`run` runs it.

    Parameters
    ----------
    a : torch.Tensor, shape (B, M, K), float32
    b : torch.Tensor, shape (B, K, N), float32
        Any strides; a batch stride of 0 broadcasts.
    out : torch.Tensor, shape (B, M, N), float32, last stride 1
        Written in full.
    sb : int
        Scaling exponent of the FP16 residuals, 0 <= sb <= 24 (unused by the BF16 schemes).
    order : {"termwise", "elementwise"}
    scheme : {"fp16x3", "fp16x4", "bf16x9", "bf16x6"}
        The split scheme (:mod:`sgemm_cube.cpu_fallback.schemes`); ``keep_lo_lo`` is shorthand for fp16x4.
    scale, fixup
        As in :func:`sgemm_cube.matmul` (:mod:`sgemm_cube.cpu_fallback.guard`).
    flush_k : int, optional
        K elements between round-to-nearest flushes of the hi*hi tensor-core
        partial (default: the config's: 32 for K <= ``launch.SMALL_K_FLUSH[0]`` (2048) on a GPU, else 64
        unless a measured table says otherwise); 0 never flushes (for comparison only).
    config : dict, optional
        Overrides of the launch configuration (keys of :func:`.launch.resolve_config`; ``variant``
        forces a kernel variant).
    """
    from ...plan import make_request
    from .launch import _scheme, check_operands

    check_operands(a, b, out)
    req = make_request(sb, _scheme(scheme, keep_lo_lo), scale, order, None, "cuda", fixup)
    batch, m, k = a.shape
    chosen = plan(req, batch, m, b.shape[2], k, a)
    overrides = dict(config or {})
    if flush_k is not None:
        overrides["flush_k"] = flush_k
    if overrides:
        chosen = chosen.with_config(**overrides)
    run(chosen, a, b, out)
