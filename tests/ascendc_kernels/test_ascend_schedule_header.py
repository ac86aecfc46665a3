"""The AscendC kernels' plain C++ scheduling header, compiled with g++ and tested.

* ``ascendc_kernels/tests/test_schedule.cpp`` checks the header itself
  (coverage of C, buffer offsets inside each SoC's capacities, the ping-pong
  flag protocol replayed on a pipe model) and exits non-zero on failure;
* its ``--dump`` mode prints every core's step sequence, which must equal the
  Python model's (:mod:`sgemm_cube.backends.npu_schedule`) for the same
  problem, tiling and core count;
* the SoC constants of ``arch/arch.hpp`` must equal the tuner's table
  ``tuning/profiles/ascend.json``.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sgemm_cube.backends import npu_schedule as ns

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "ascendc_kernels"
ARCH_HPP = KERNELS / "include" / "sgemm_cube" / "arch" / "arch.hpp"
PROFILES = ROOT / "tuning" / "profiles" / "ascend.json"


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: the C++ schedule header cannot be compiled here")
    exe = tmp_path_factory.mktemp("ascend_schedule") / "test_schedule"
    cmd = [gxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(KERNELS / "include"), "-I",
           str(KERNELS / "host"), str(KERNELS / "tests" / "test_schedule.cpp"), "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"g++ failed:\n{res.stderr}"
    return exe


def test_schedule_header_self_checks(driver):
    res = subprocess.run([str(driver)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-4000:]
    assert re.search(r"\b0 failures", res.stdout), res.stdout


# soc, batch, m, n, k, (bm, bk, bn, n_fused[, per_term[, l0c_stages]]), cores, terms
DUMP_CASES = [
    ("910b", 1, 1, 2, 3, (16, 16, 16, 1), 20, 3),
    ("910b", 2, 33, 17, 65, (16, 32, 16, 2), 3, 3),
    ("910b", 1, 100, 90, 130, (32, 32, 32, 2), 4, 4),
    ("910b", 1, 16, 1000, 64, (16, 16, 64, 4), 20, 3),
    ("910b", 3, 50, 70, 300, (48, 64, 32, 3), 7, 3),
    ("910a", 1, 300, 200, 700, (128, 64, 128, 4), 32, 3),
    ("910a", 2, 64, 48, 1000, (64, 64, 48, 3), 5, 4),
    ("910a", 1, 200, 190, 700, (176, 64, 176, 44, 1), 3, 3),  # the paper's tiling, one pass per term
    ("910b", 2, 64, 48, 1000, (64, 64, 48, 3, 1), 5, 4),
    # two L0C stages: the write-backs alternate between two accumulator sets
    ("910a", 1, 300, 200, 700, (128, 64, 64, 4, 0, 2), 32, 3),
    ("910a", 2, 64, 48, 1000, (32, 64, 48, 3, 0, 2), 3, 4),
    ("910a", 1, 200, 190, 700, (176, 64, 176, 44, 1, 2), 3, 3),
    ("910b", 1, 100, 200, 130, (32, 32, 32, 2, 0, 2), 2, 3),
    ("910b", 1, 16, 1000, 64, (16, 16, 64, 4, 0, 2), 3, 3),
    ("910a", 1, 64, 64, 64, (176, 64, 176, 44), 2, 3),  # plan rejected: L1 (both planes resident)
    ("910b", 1, 64, 64, 64, (128, 64, 128, 1), 2, 3),   # plan rejected: L0C
    ("910a", 1, 64, 64, 64, (128, 64, 128, 1, 0, 2), 2, 3),  # plan rejected: L0C (two sets of three)
    ("910b", 1, 64, 64, 64, (16, 16, 16, 1, 0, 3), 2, 3),  # rejected: l0c_stages 3
]


def _parse_dump(text: str):
    lines = text.strip().splitlines()
    if lines[0].startswith("status"):
        return int(lines[0].split()[1]), None, []
    geo = dict(kv.split("=") for kv in lines[0].split()[1:])
    steps = []
    for line in lines[1:]:
        if line.startswith("op "):
            continue
        f = line.split()
        flags = tuple(ch == "1" for ch in f[17])
        steps.append((int(f[1]),) + tuple(int(x) for x in f[2:17]) + flags)
    return 0, {k: int(v) for k, v in geo.items()}, steps


@pytest.mark.parametrize("case", DUMP_CASES, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}x{c[3]}x{c[4]}-{c[5]}")
def test_python_model_follows_the_header(driver, case):
    soc, batch, m, n, k, tiling, cores, terms = case
    args = [soc, batch, m, n, k, *tiling[:4], cores, terms, *(int(x) for x in tiling[4:])]
    res = subprocess.run([str(driver), "--dump", *map(str, args)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    status, geo, cpp_steps = _parse_dump(res.stdout)
    cap = ns.capacity_from_profile(soc)
    if status:
        with pytest.raises(ns.TilingError) as err:
            ns.make_geometry(batch, m, n, k, ns.Tiling(*tiling), cores, terms, cap)
        assert int(err.value.status) == status
        return
    g = ns.make_geometry(batch, m, n, k, ns.Tiling(*tiling), cores, terms, cap)
    py_geo = {"mp": g.mp, "np": g.np, "kp": g.kp, "mb": g.mb, "nb": g.nb, "kb": g.kb, "n_fused": g.n_fused,
              "groups": g.groups, "n_split": g.n_split, "items": g.items, "cores": g.cores,
              "l0_stages": g.plan.l0_stages, "l0c_stages": g.plan.l0c_stages, "l1": g.plan.l1_bytes, "l0a": g.plan.l0a_bytes,
              "l0b": g.plan.l0b_bytes, "l0c": g.plan.l0c_bytes, "ub": g.plan.ub_bytes, "passes": g.passes,
              "combine_in_epilogue": int(g.combine_in_epilogue)}
    assert py_geo == geo
    py_steps = [(core,) + tuple(int(x) for x in s[:15]) + tuple(s[15:])
                for core in range(g.cores) for s in ns.core_steps(g, core)]
    assert py_steps == cpp_steps


_KINDS = ("set", "wait", "load_a_group", "load_b", "load_l0", "mmad", "store_c")


@pytest.mark.parametrize("case", DUMP_CASES[:-4], ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}x{c[3]}x{c[4]}-{c[5]}")
def test_python_program_follows_run_core(driver, case):
    """Every SetFlag/WaitFlag and data operation of run_core, in order, on every core."""
    soc, batch, m, n, k, tiling, cores, terms = case
    args = [soc, batch, m, n, k, *tiling[:4], cores, terms, *(int(x) for x in tiling[4:])]
    res = subprocess.run([str(driver), "--dump", *map(str, args)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    cpp = [tuple(int(x) for x in line.split()[1:]) for line in res.stdout.splitlines() if line.startswith("op ")]
    g = ns.make_geometry(batch, m, n, k, ns.Tiling(*tiling), cores, terms, ns.capacity_from_profile(soc))
    py = []
    for core in range(g.cores):
        for op in ns.core_program(g, core):
            flag = op.kind in ("set", "wait")
            py.append((core, _KINDS.index(op.kind), int(op.sync) if flag else -1, op.event if flag else -1,
                       0 if flag else op.step.index))
    assert len(cpp) > 0 and py == cpp


def _arch_constants(text: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for struct, body in re.findall(r"struct (Ascend910\w)\s*\{(.*?)\};", text, re.S):
        name = re.search(r'kName = "(\w+)"', body).group(1)
        consts = {k: int(v) for k, v in re.findall(r"static constexpr uint32_t (\w+) = (\d+);", body)}
        consts["kCThroughUb"] = int("kCThroughUb = true" in body)
        out[name] = consts
    return out


def test_arch_header_matches_tuning_profiles():
    profiles = json.loads(PROFILES.read_text())["profiles"]
    consts = _arch_constants(ARCH_HPP.read_text())
    assert set(consts) == {"910a", "910b"}
    for key, c in consts.items():
        p = profiles[key]
        assert c["kAiCores"] == p["ai_cores"], key
        assert c["kClockMHz"] == round(p["clock_ghz"] * 1000), key
        assert c["kL1Bytes"] == p["l1_bytes"], key
        assert c["kL0ABytes"] == p["l0a_bytes"], key
        assert c["kL0BBytes"] == p["l0b_bytes"], key
        assert c["kL0CBytes"] == p["l0c_bytes"], key
        assert c["kUbBytes"] == p["ub_bytes"], key
        through_ub = "ub" in p["c_path"]
        assert c["kCThroughUb"] == int(through_ub), key
        assert c["kUbReservedBytes"] == (p["blocking"].get("c_reserved_bytes", 0) if through_ub else 0), key
        # The Python model reads the same numbers from the profile.
        cap = ns.capacity_from_profile(key)
        assert (cap.l1, cap.l0a, cap.l0b, cap.l0c, cap.ub, cap.ub_reserved, int(cap.c_through_ub)) == (
            c["kL1Bytes"], c["kL0ABytes"], c["kL0BBytes"], c["kL0CBytes"], c["kUbBytes"], c["kUbReservedBytes"],
            c["kCThroughUb"])


def test_vector_tile_constants_match_the_header():
    text = (KERNELS / "include" / "sgemm_cube" / "schedule" / "schedule.hpp").read_text()
    assert int(re.search(r"kSplitTileCols = (\d+);", text).group(1)) == ns.SPLIT_TILE_COLS
    assert int(re.search(r"kSplitStages = (\d+);", text).group(1)) == ns.SPLIT_STAGES
    assert int(re.search(r"kCombineTile = (\d+);", text).group(1)) == ns.COMBINE_TILE
    assert int(re.search(r"kStatsTileCols = (\d+);", text).group(1)) == ns.STATS_TILE_COLS
    assert int(re.search(r"kStatsStages = (\d+);", text).group(1)) == ns.STATS_STAGES
    assert int(re.search(r"kMetaChunk = (\d+);", text).group(1)) == ns.META_CHUNK
    assert int(re.search(r"kUnscaleTile = (\d+);", text).group(1)) == ns.UNSCALE_TILE
    assert int(re.search(r"kUnscaleUnit = (\d+);", text).group(1)) == ns.UNSCALE_UNIT
