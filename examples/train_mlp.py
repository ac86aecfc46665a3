"""Train a small MLP with native FP32 and with sgemm_cube: the loss curves agree.

A student MLP learns a random teacher MLP's function on synthetic data.
The same initial weights and the same minibatches are trained three times
on the CPU -- in float64 (the reference), in native float32, and in float32
with every product routed to sgemm_cube by the drop-in switch -- and, when
a CUDA GPU is present, twice more on it (native float32 with TF32 off, and
sgemm_cube's Triton kernels).  The only change between the float32 runs is::

    with sgemm_cube.switch.enabled():
        train(...)

For scale, one more CPU run uses ``torch.autocast`` with bfloat16, the
usual mixed-precision shortcut.  The plot shows the loss curves and each
run's relative distance from the float64 one: sgemm_cube's stays at native
FP32's level, orders of magnitude below bfloat16 autocast's.

Usage::

    python examples/train_mlp.py                 # CPU (and CUDA if present), writes the PNG
    python examples/train_mlp.py --steps 40 --no-plot   # a quick run, as tests/sgemm_cube/test_torch_example.py does
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
import torch

import sgemm_cube.switch

__all__ = ["make_data", "make_model", "train", "run", "plot", "main"]

HERE = pathlib.Path(__file__).resolve().parent


def make_data(n: int = 4096, dim: int = 16, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (n, dim) ~ N(0, 1) and targets (n, 1) from a random tanh teacher plus 1% noise, float64."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g, dtype=torch.float64)
    w1 = torch.randn(dim, 32, generator=g, dtype=torch.float64) / dim ** 0.5
    w2 = torch.randn(32, 1, generator=g, dtype=torch.float64) / 32 ** 0.5
    y = torch.tanh(x @ w1) @ w2
    return x, y + 0.01 * torch.randn(y.shape, generator=g, dtype=torch.float64)


def make_model(dim: int = 16, width: int = 64, depth: int = 3, *, seed: int = 1) -> torch.nn.Sequential:
    """A float64 MLP ``dim -> width (x depth, tanh) -> 1`` with seeded initial weights."""
    torch.manual_seed(seed)
    layers, d = [], dim
    for _ in range(depth):
        layers += [torch.nn.Linear(d, width, dtype=torch.float64), torch.nn.Tanh()]
        d = width
    return torch.nn.Sequential(*layers, torch.nn.Linear(d, 1, dtype=torch.float64))


def train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, steps: int, batch: int = 128,
          lr: float = 0.05, seed: int = 2, autocast: torch.dtype | None = None) -> np.ndarray:
    """SGD with momentum 0.9 on the mean squared error; returns the loss of each step, shape (steps,).

    ``model``, ``x`` and ``y`` must share a dtype and device; the minibatch
    order depends on ``seed`` only, so every run sees the same batches.
    ``autocast``: run the forward pass under ``torch.autocast`` to this dtype.
    """
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    order = torch.Generator().manual_seed(seed)
    losses = np.empty(steps)
    for step in range(steps):
        idx = torch.randint(0, x.shape[0], (batch,), generator=order).to(x.device)
        with torch.autocast(x.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
            loss = torch.nn.functional.mse_loss(model(x[idx]).to(y.dtype), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses[step] = loss.item()
    return losses


def run(*, steps: int = 300, devices: tuple[str, ...] = ("cpu",), seed: int = 0,
        log=print) -> dict[str, np.ndarray]:
    """Train the reference and the float32 runs; returns ``{label: losses}``.

    Labels: ``"float64 (cpu)"``, ``"autocast BF16 (cpu)"`` and, per device,
    ``"native FP32 (<dev>)"`` and ``"sgemm_cube FP32 (<dev>)"``.
    """
    x64, y64 = make_data(seed=seed)
    init = make_model(dim=x64.shape[1], seed=seed + 1)
    curves = {}

    def fresh(dtype, device):
        model = make_model(dim=x64.shape[1], seed=seed + 1)
        model.load_state_dict(init.state_dict())
        return model.to(dtype=dtype, device=device)

    def timed(label, fn):
        t0 = time.perf_counter()
        curves[label] = fn()
        log(f"{label:<26} final loss {curves[label][-1]:.6e}   {time.perf_counter() - t0:6.2f} s")

    timed("float64 (cpu)", lambda: train(fresh(torch.float64, "cpu"), x64, y64, steps=steps, seed=seed + 2))
    timed("autocast BF16 (cpu)", lambda: train(fresh(torch.float32, "cpu"), x64.float(), y64.float(), steps=steps,
                                               seed=seed + 2, autocast=torch.bfloat16))
    for dev in devices:
        x32, y32 = x64.float().to(dev), y64.float().to(dev)
        saved_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # native means true FP32 SGEMM
        try:
            timed(f"native FP32 ({dev})",
                  lambda: train(fresh(torch.float32, dev), x32, y32, steps=steps, seed=seed + 2))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved_tf32

        def emulated():
            with sgemm_cube.switch.enabled(devices=(dev,)):  # the one change (the CPU is routed when named)
                return train(fresh(torch.float32, dev), x32, y32, steps=steps, seed=seed + 2)

        timed(f"sgemm_cube FP32 ({dev})", emulated)
    return curves


def deviation(curves: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each float32 run's ``|loss - loss_float64| / loss_float64`` per step."""
    ref = curves["float64 (cpu)"]
    return {k: np.abs(v - ref) / ref for k, v in curves.items() if k != "float64 (cpu)"}


def plot(curves: dict[str, np.ndarray], path: pathlib.Path) -> None:
    """Two panels: the loss curves, and their relative distance from the float64 run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    styles = {"float64": dict(color="black", lw=2.5, alpha=0.35), "autocast": dict(color="gray", lw=0.8),
              "native": dict(ls="-", lw=1.2), "sgemm_cube": dict(ls="--", lw=1.2)}
    for label, losses in curves.items():
        top.plot(losses, label=label, **styles[label.split()[0]])
    top.set_yscale("log")
    top.set_ylabel("training loss (MSE)")
    top.set_title("MLP on synthetic data: native FP32 vs sgemm_cube (FP32 from FP16 products)")
    top.legend()
    for label, dev in deviation(curves).items():
        bottom.plot(np.where(dev > 0, dev, np.nan), label=label, **styles[label.split()[0]])  # log axis
    bottom.set_yscale("log")
    bottom.set_xlabel("step")
    bottom.set_ylabel("|loss - loss(float64)| / loss(float64)")
    bottom.legend(loc="center", bbox_to_anchor=(0.5, 0.62), ncol=3, fontsize="small")  # the empty band
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: the CPU, plus CUDA when a GPU is present")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "train_mlp_loss.png")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    devices = {"auto": ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",), "cpu": ("cpu",),
               "cuda": ("cuda",)}[args.device]
    curves = run(steps=args.steps, devices=devices, seed=args.seed)
    for label, dev in deviation(curves).items():
        print(f"{label:<26} max relative distance from float64: {dev.max():.2e}")
    if not args.no_plot:
        plot(curves, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
