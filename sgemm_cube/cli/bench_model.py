"""Model-level benchmark: a TransformerEncoder in FP32, native against sgemm_cube's drop-in switch.

A ``torch.nn.TransformerEncoder`` (6 layers, d_model 768, 12 heads,
feed-forward 3072, ``batch_first``, dropout 0) on a batch of 16 x 512
tokens, FP32 with TF32 off, and a float64 copy of it (same weights, input
in float64) as the reference.  It measures, each as the median of several
synchronized runs after warm-up, with the relative Frobenius error against
the float64 model:

* eval forward, native FP32 and under ``with sgemm_cube.enabled():``, each
  with PyTorch's fused fast path allowed (the default) and disabled
  (``torch.backends.mha.set_fastpath_enabled(False)``; on a torch without it,
  by running with gradients enabled, which the fast path refuses).  The
  switch works at PyTorch's dispatcher, so it reaches the products of the
  fused fast path (``torch._transformer_encoder_layer_fwd``) as well: every
  case reports which path ran, how many products the switch took
  (:func:`sgemm_cube.switch.routed_calls`) and how many sgemm_cube computed
  (a counter on ``sgemm_cube.product.compute``, which the switch calls; the
  fused kernels are counted with counters on their torch functions);
* one training step (forward, backward, SGD step) in train mode, native and
  under the switch: time, and the relative error of the parameter gradients
  (from the same weights) against the float64 model's.

Attention's own products inside ``scaled_dot_product_attention``'s fused
kernels (flash, memory-efficient) are not ATen GEMMs: they stay native FP32
in every case.

Run from the repository root (JSON to
``benchmarks/results/model_<gpu>_<timestamp>.json``)::

    python benchmarks/model_bench.py               # the full model on CUDA
    sgemm-cube bench --model                       # the same
    python benchmarks/model_bench.py --tiny --device cpu   # smoke test: 2 layers, d_model 64, 2 x 16 tokens
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import datetime
import json
import pathlib
import sys
import time

from .._option_types import nonnegative_int, positive_int
from ..backends.native import true_fp32
from .records import RESULTS_DIR
from .records import environment as _env
from .records import rel_error as _rel_err
from .records import synchronize as _sync

__all__ = ["ModelConfig", "FULL", "TINY", "COUNTED", "count_calls", "eval_mode", "build_model", "run_model_bench",
           "format_model_report", "add_model_arguments", "config_from_args", "run", "main"]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Size of the benchmarked encoder and of its input (``batch`` sequences of ``tokens``)."""

    layers: int = 6
    d_model: int = 768
    heads: int = 12
    ffn: int = 3072
    batch: int = 16
    tokens: int = 512


#: The benchmark's model: 6 x (768, 12 heads, 3072), 16 x 512 tokens.
FULL = ModelConfig()
#: The CPU smoke test's: 2 x (64, 4 heads, 128), 2 x 16 tokens.
TINY = ModelConfig(layers=2, d_model=64, heads=4, ffn=128, batch=2, tokens=16)

#: Counter name -> (module path, attribute) of the counted function.
COUNTED = {
    "products": ("sgemm_cube.product", "compute"),        # every product sgemm_cube computes (native plans too)
    "fused_layers": ("torch", "_transformer_encoder_layer_fwd"),  # the encoder layer's fast path
    "fused_mha": ("torch", "_native_multi_head_attention"),       # MultiheadAttention's fast path
}


def _torch():
    import torch

    return torch


@contextlib.contextmanager
def count_calls():
    """Count calls of the :data:`COUNTED` functions inside the block; yields the live dict of counts.

    Each function is replaced by a counting wrapper on its module and put
    back afterwards; a function this torch or sgemm_cube does not have
    counts as ``None``.
    """
    import importlib

    from .. import switch

    counts, patched = {}, []
    routed_before = sum(switch.routed_calls().values())
    for key, (module, name) in COUNTED.items():
        try:
            owner = importlib.import_module(module)
            original = getattr(owner, name)
        except (ImportError, AttributeError):
            counts[key] = None
            continue
        counts[key] = 0

        def wrapper(*args, _original=original, _key=key, **kwargs):
            counts[_key] += 1
            return _original(*args, **kwargs)

        setattr(owner, name, wrapper)
        patched.append((owner, name, original))
    try:
        yield counts
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)
        # products the switch took at the dispatcher (forward and backward, fused fast paths included)
        counts["routed"] = sum(switch.routed_calls().values()) - routed_before


@contextlib.contextmanager
def eval_mode(fastpath: bool):
    """Inference as a user runs it, with PyTorch's fused fast path allowed or not; yields how.

    ``torch.no_grad()`` plus ``torch.backends.mha.set_fastpath_enabled``
    (restored afterwards); on a torch without that switch the fast path is
    refused by running with gradients enabled instead.
    """
    torch = _torch()
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "set_fastpath_enabled"):
        saved = mha.get_fastpath_enabled()
        mha.set_fastpath_enabled(fastpath)
        try:
            with torch.no_grad():
                yield "torch.backends.mha.set_fastpath_enabled"
        finally:
            mha.set_fastpath_enabled(saved)
    elif fastpath:
        with torch.no_grad():
            yield "torch.no_grad() (fast path allowed)"
    else:
        with torch.enable_grad():
            yield "gradients enabled (the fast path needs no_grad)"


def _path(counts: dict) -> str:
    if counts.get("fused_layers"):
        return "fused layer (torch._transformer_encoder_layer_fwd)"
    if counts.get("fused_mha"):
        return "fused MHA (torch._native_multi_head_attention) + F.linear"
    return "unfused (F.linear, scaled_dot_product_attention)"


def build_model(cfg: ModelConfig, device, seed: int = 0):
    """The FP32 encoder (eval mode) with seeded weights, and a random normal input on ``device``."""
    torch = _torch()
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(cfg.d_model, cfg.heads, dim_feedforward=cfg.ffn, dropout=0.0,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False).to(device).eval()
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    x = torch.randn(cfg.batch, cfg.tokens, cfg.d_model, device=device, generator=gen)
    return model, x


def _time_ms(fn, device, *, warmup: int, runs: int) -> list:
    """Wall times (ms) of ``runs`` (at least one) calls after ``warmup`` ones, each between two synchronizes."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def _switch(on: bool, device):
    import sgemm_cube

    return sgemm_cube.enabled(devices=(_torch().device(device).type,)) if on else contextlib.nullcontext()


def _grads(model, x, cotangent) -> dict:
    """Parameter gradients of ``sum(model(x) * cotangent) / tokens`` (one forward and backward)."""
    model.zero_grad(set_to_none=True)
    out = model(x)
    (out * cotangent).sum().div(x.shape[0] * x.shape[1]).backward()
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def _grad_errors(grads: dict, ref: dict) -> dict:
    """Relative Frobenius errors of gradients: all parameters together, weight matrices together, worst one."""
    torch = _torch()

    def pooled(names):
        num = sum(float(torch.linalg.norm((grads[n].double() - ref[n]).flatten())) ** 2 for n in names)
        den = sum(float(torch.linalg.norm(ref[n].flatten())) ** 2 for n in names)
        return (num / den) ** 0.5 if den else float("nan")

    names = [n for n in ref if n in grads]
    per = {n: _rel_err(grads[n], ref[n]) for n in names}
    worst = max(per, key=lambda n: per[n]) if per else None
    return {"all": pooled(names), "weight_matrices": pooled([n for n in names if ref[n].dim() >= 2]),
            "max": per.get(worst, float("nan")), "max_param": worst, "per_param": per}


def run_model_bench(cfg: ModelConfig = FULL, *, device="cuda", runs: int = 10, warmup: int = 3, seed: int = 0,
                    train: bool = True, lr: float = 1e-4, log=print) -> dict:
    """Run the benchmark (see the module docstring); return its record (without the environment).

    ``record["eval"]`` and ``record["train"]`` hold one entry per case with
    ``median_ms``, ``times_ms``, the error(s) against float64, the path that
    ran and the call counts.  TF32 is off throughout (restored afterwards).
    """
    torch = _torch()
    model, x = build_model(cfg, device, seed)
    model64, x64 = copy.deepcopy(model).double(), x.double()
    record = {"config": dataclasses.asdict(cfg), "options": {"runs": runs, "warmup": warmup, "seed": seed,
                                                              "train": train, "lr": lr},
              "eval": [], "train": []}
    with true_fp32():
        with eval_mode(False):
            ref = model64(x64).detach()
        for fastpath in (True, False):
            for on in (False, True):
                with eval_mode(fastpath) as control, _switch(on, device):
                    with count_calls() as counts:
                        out = model(x)
                    _sync(device)
                    err = _rel_err(out.detach(), ref)
                    del out
                    times = _time_ms(lambda: model(x), device, warmup=warmup, runs=runs)
                entry = {"case": "eval forward", "mode": "sgemm_cube.enabled()" if on else "native FP32",
                         "fastpath_allowed": fastpath, "fastpath_control": control, "path": _path(counts),
                         "calls": counts, "sgemm_cube_called": bool(counts.get("products") or counts.get("routed")),
                         "median_ms": _median(times), "times_ms": times, "rel_err": err}
                record["eval"].append(entry)
                log(_line(entry))
        del ref
        if train:
            record["train"] = _train_cases(model, model64, x, x64, device, runs=runs, warmup=warmup, seed=seed,
                                           lr=lr, log=log)
    return record


def _train_cases(model, model64, x, x64, device, *, runs, warmup, seed, lr, log) -> list:
    """One SGD step in train mode, native and under the switch: time and gradient errors vs float64."""
    torch = _torch()
    gen = torch.Generator(device=device).manual_seed(seed + 2)
    cotangent = torch.randn(x.shape, device=device, generator=gen)
    ref = _grads(model64.train(), x64, cotangent.double())
    cases = []
    for on in (False, True):
        m = copy.deepcopy(model).train()
        with _switch(on, device):
            with count_calls() as counts:
                grads = _grads(m, x, cotangent)
            errors = _grad_errors(grads, ref)
            del grads
            opt = torch.optim.SGD(m.parameters(), lr=lr)

            def step():
                opt.zero_grad(set_to_none=True)
                (m(x) * cotangent).sum().div(x.shape[0] * x.shape[1]).backward()
                opt.step()

            times = _time_ms(step, device, warmup=warmup, runs=runs)
        entry = {"case": "train step", "mode": "sgemm_cube.enabled()" if on else "native FP32",
                 "path": _path(counts), "calls": counts,
                 "sgemm_cube_called": bool(counts.get("products") or counts.get("routed")),
                 "median_ms": _median(times), "times_ms": times, "grad_rel_err": errors}
        cases.append(entry)
        log(_line(entry))
        del m, opt
    return cases


def _line(e: dict) -> str:
    err = e["rel_err"] if "rel_err" in e else e["grad_rel_err"]["all"]
    fast = f" fastpath {'on ' if e['fastpath_allowed'] else 'off'}" if "fastpath_allowed" in e else " " * 12
    return (f"{e['case']:<13}{fast} {e['mode']:<21} {e['median_ms']:9.2f} ms  err {err:.2e}  "
            f"sgemm_cube products {e['calls'].get('products')!s:>4}  path: {e['path']}")


def format_model_report(record: dict) -> str:
    """The end-of-run table: time, speed relative to native, error, path and whether sgemm_cube ran."""
    lines = [f"{'case':<13} {'fast path':>9} {'mode':<21} {'median ms':>10} {'x native':>9} "
             f"{'rel err':>9}  {'products':>8}  path"]
    base = {}
    for e in record["eval"] + record["train"]:
        key = (e["case"], e.get("fastpath_allowed"))
        if e["mode"] == "native FP32":
            base[key] = e["median_ms"]
        speed = base.get(key, float("nan")) / e["median_ms"] if e["median_ms"] else float("nan")
        err = e["rel_err"] if "rel_err" in e else e["grad_rel_err"]["all"]
        fast = {True: "allowed", False: "off", None: "-"}[e.get("fastpath_allowed")]
        lines.append(f"{e['case']:<13} {fast:>9} {e['mode']:<21} {e['median_ms']:>10.2f} {speed:>8.2f}x "
                     f"{err:>9.2e}  {e['calls'].get('products')!s:>8}  {e['path']}")
    lines.append("rel err: output (eval) or all parameter gradients (train step) against the float64 model; "
                 "x native: native time / this time")
    return "\n".join(lines)


def add_model_arguments(p, *, standalone: bool = False) -> None:
    """The model benchmark's options (on a parser or argument group); ``standalone`` adds
    ``--seed`` and ``--results-dir``, which ``sgemm-cube bench`` already has."""
    p.add_argument("--tiny", action="store_true",
                   help="smoke-test sizes: 2 layers, d_model 64, 4 heads, ffn 128, batch 2 x 16 tokens")
    for name, what in (("layers", "encoder layers"), ("d-model", "model width"), ("heads", "attention heads"),
                       ("ffn", "feed-forward width"), ("batch", "sequences per batch"),
                       ("tokens", "tokens per sequence")):
        p.add_argument(f"--{name}", type=positive_int, default=None, metavar="N",
                       help=f"{what} (default {getattr(FULL, name.replace('-', '_'))}; "
                            f"{getattr(TINY, name.replace('-', '_'))} with --tiny)")
    p.add_argument("--runs", type=positive_int, default=None, metavar="N",
                   help="timed runs per case (default 10; 2 with --tiny)")
    p.add_argument("--warmup", type=nonnegative_int, default=None, metavar="N",
                   help="untimed runs first (default 3; 1 with --tiny)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--no-train", action="store_true", help="skip the training-step cases")
    p.add_argument("--lr", type=float, default=1e-4, help="SGD learning rate of the training step")
    if standalone:
        p.add_argument("--seed", type=nonnegative_int, default=0,
                       help="seed of the model and data (default: %(default)s)")
        p.add_argument("--results-dir", type=pathlib.Path, default=RESULTS_DIR, help="where the JSON goes")


def config_from_args(args) -> ModelConfig:
    """:data:`FULL` (or :data:`TINY` with ``--tiny``) with the sizes given on the command line."""
    base = TINY if getattr(args, "tiny", False) else FULL
    given = {f.name: getattr(args, f.name, None) for f in dataclasses.fields(ModelConfig)}
    return dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})


def run(args) -> int:
    """Run the model benchmark described by parsed ``args``, print the table, write the JSON."""
    try:
        torch = _torch()
    except ImportError:
        print("model bench: needs torch, which is not installed: pip install 'sgemm_cube[torch]'", file=sys.stderr)
        return 2
    device = getattr(args, "device", None) or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device_type = torch.device(device).type
    except RuntimeError:
        print(f"model bench: --device {device!r} is not a torch device (cuda, cuda:N or cpu)", file=sys.stderr)
        return 2
    if device_type == "cuda" and not torch.cuda.is_available():
        print("model bench: no CUDA GPU (use --device cpu, with --tiny)", file=sys.stderr)
        return 2
    tiny = getattr(args, "tiny", False)
    runs = args.runs if getattr(args, "runs", None) is not None else (2 if tiny else 10)
    warmup = args.warmup if getattr(args, "warmup", None) is not None else (1 if tiny else 3)
    cfg = config_from_args(args)
    if cfg.d_model % cfg.heads:
        print(f"model bench: the model width ({cfg.d_model}) must be a multiple of the attention heads "
              f"({cfg.heads}): set --d-model or --heads", file=sys.stderr)
        return 2
    env = _env(device)
    print(json.dumps(env), flush=True)
    print(f"model: {cfg}", flush=True)
    record = run_model_bench(cfg, device=device, runs=runs, warmup=warmup, seed=getattr(args, "seed", 0),
                             train=not getattr(args, "no_train", False), lr=getattr(args, "lr", 1e-4))
    print(format_model_report(record))
    if device_type == "cuda":
        from ..backends.cuda.hybrid import device_key

        key = device_key(device)
    else:
        key = "cpu"
    results_dir = pathlib.Path(getattr(args, "results_dir", RESULTS_DIR))
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = results_dir / f"model_{key}_{stamp}.json"
    path.write_text(json.dumps(dict(env, tiny=tiny, **record), indent=1, default=str) + "\n")
    print(f"wrote {path}")
    return 0


def main(argv=None) -> int:
    """Command-line entry point (``python benchmarks/model_bench.py --help``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser, standalone=True)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
