"""First run of sgemm_cube's AscendC backend on an Ascend host: check, build, validate, in one command.

    source /usr/local/Ascend/ascend-toolkit/set_env.sh
    python ascendc_kernels/bringup.py              # report, build if needed, run the checks
    python ascendc_kernels/bringup.py --rebuild    # build even if an extension is importable
    python ascendc_kernels/bringup.py --dry-run    # anywhere: report, show the build command, checks on the CPU model

1. Report: Python, torch / torch_npu / pybind11 (found, not imported), the
   CANN toolkit, CMake against ``cmake_minimum_required``, the SoC the build
   would target (``SGEMM_CUBE_SOC_VERSION`` or ``npu-smi``) -- and stop with
   the build's own message (``build_ext.preflight``) if the build cannot work.
2. Build: ``pip install --no-build-isolation -v .`` from the repository root
   (skipped when ``sgemm_cube.backends._npu_ext`` is already importable,
   unless ``--rebuild``; ``--no-build`` never builds).
3. Probe: ``ascendc_kernels/probes.py`` asks the chip first what the docs leave open
   (the 910A cast's rounding, FP16 subnormals, the cube's accumulation, the
   atomic add's rounding, FP16 overflow, the 910A L0C -> UB copy): one row per
   behaviour with the chip's answer beside the model's default, and a plain
   line for each behaviour no code path covers.
4. Validate: ``ascendc_kernels/tests/check_on_npu.py`` in a fresh interpreter:
   tail shapes (1x1x1, 17x33x65), K over several K groups, NaN/Inf, data near
   FP32 overflow and underflow, tiny and huge magnitudes; one table row per
   case (difference from the CPU backend and bit-exactness, error against
   float64 beside native FP32's, the componentwise error bound); then the
   precision mode and HF32 setting found and the routes they give, the
   no-synchronisation property (event timing), and the guarantee on the
   adversarial generators next to native FP32 under the chip's mode.

``--dry-run`` builds nothing and needs no NPU: step 3 runs the probes against the
executable AscendC stand-in under every modelled alternative (g++ needed) and
checks that each is identified; step 4 runs the kernels' CPU model
(``npu_schedule.simulate``) in place of the device.  Exit status: that
of the first step that fails (1 = build impossible or checks failed).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "ascendc_kernels" / "tests" / "check_on_npu.py"
PROBES = ROOT / "ascendc_kernels" / "probes.py"
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # ascendc_kernels.build_ext; installed packages stay first

__all__ = ["main", "report", "build_command", "extension_built"]


def build_command() -> list[str]:
    """The install command step 2 runs (``build_ext.INSTALL_COMMAND`` with this Python)."""
    from ascendc_kernels.build_ext import INSTALL_COMMAND

    return [sys.executable, "-m", *INSTALL_COMMAND.split()]


def extension_built() -> str:
    """Where ``sgemm_cube.backends._npu_ext`` is, as a fresh interpreter outside the clone finds it ("" if nowhere)."""
    probe = ("import importlib.util as u; s = u.find_spec('sgemm_cube.backends._npu_ext'); "
             "print(s.origin if s else '')")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=Path.home())
    return res.stdout.strip() if res.returncode == 0 else ""


def report(out=print) -> None:
    """Step 1's environment lines (nothing here raises)."""
    from ascendc_kernels import build_ext as be

    out(f"python      {sys.executable} ({platform.python_version()})")
    for name, where in be.python_packages().items():
        out(f"{name:<11} {where or 'NOT FOUND'}")
    cann = be.cann_toolkit()
    home = os.environ.get("ASCEND_HOME_PATH")
    out(f"CANN        {cann or ('no kernel CMake flow under ' + home if home else 'ASCEND_HOME_PATH not set')}")
    have = be.cmake_version()
    need = ".".join(map(str, be.cmake_minimum()))
    out(f"cmake       {'.'.join(map(str, have)) if have else 'NOT FOUND'} (need >= {need})")
    try:
        soc, how = be.find_soc()
        out(f"SoC         {soc} ({how}; kernels: {be.soc_family(soc)})")
    except be.NpuBuildError as exc:
        out(f"SoC         unknown: {exc}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="build nothing, run the checks on the kernels' CPU model (no CANN or NPU needed)")
    parser.add_argument("--soc", choices=("910a", "910b"), default="910b", help="chip family of the dry run")
    parser.add_argument("--rebuild", action="store_true", help="build even if the extension is importable")
    parser.add_argument("--no-build", action="store_true", help="never build; check what is installed")
    parser.add_argument("--quick", action="store_true", help="only the small cases")
    parser.add_argument("--bench", action="store_true", help="also time 2048^3 .. 8192^3 (NPU only)")
    args = parser.parse_args(argv)

    print("== 1. environment")
    report()
    print("\n== 2. build")
    cmd = build_command()
    if args.dry_run:
        print(f"dry run: would run `{' '.join(cmd[2:])}` in {ROOT} (with {cmd[0]})")
    elif args.no_build:
        print("--no-build: using what is installed")
    else:
        built = extension_built()
        if built and not args.rebuild:
            print(f"already built: {built} (--rebuild to build again)")
        else:
            from ascendc_kernels import build_ext as be

            try:
                be.preflight()
            except be.NpuBuildError as exc:
                print(exc)
                return 1
            print("+ " + " ".join(cmd), flush=True)
            res = subprocess.run(cmd, cwd=ROOT)
            if res.returncode != 0:
                print(f"the build failed (exit status {res.returncode}); its output is above")
                return 1
    print("\n== 3. probes" + (" (the executable stand-in, under each alternative)" if args.dry_run else ""),
          flush=True)
    dry = ["--dry-run", "--soc", args.soc] if args.dry_run else []
    probed = subprocess.run([sys.executable, str(PROBES), *dry], cwd=Path.home()).returncode
    print("\n== 4. checks" + (" (CPU model)" if args.dry_run else ""), flush=True)
    check = [sys.executable, str(CHECK), *dry]
    check += ["--quick"] * args.quick + ["--bench"] * (args.bench and not args.dry_run)
    return subprocess.run(check, cwd=Path.home()).returncode or probed


if __name__ == "__main__":
    sys.exit(main())
