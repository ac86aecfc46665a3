"""The stand-in's level-0 vector instructions (mask, repeatTime, BinaryRepeatParams) against values worked
out by hand.

``exec_ascendc/kernel_operator.h`` models And, Or (16-bit) and Max, Min (int32) in their level-0 form as
the docs' 基础API通用说明 / 高维切分API describe it: eight 32-byte blocks per repeat, block j of repeat i at
``(i * repStride + j * blkStride) * 32`` bytes, repeat stride 0 reading the same blocks again, a
continuous mask keeping the first ``mask`` elements of each repeat (the others of dst untouched).  The
line-statistics kernel uses them (``line_stats_kernel.hpp``: a one-block constant, per-row folds); a
test-only driver, ``exec_ascendc/run_vector_ops.cpp``, applies one instruction to a UB region.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from .executed import EXEC, build

DRIVER = EXEC / "run_vector_ops.cpp"
AND, OR, MAX, MIN = 0, 1, 2, 3


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build(tmp_path_factory.mktemp("vector_ops") / "run_vector_ops", "910A", harness=DRIVER)


def _run(binary, tmp_path, region: np.ndarray, op, mask, repeat, strides, dst, src0, src1):
    """The region (bytes) after one instruction; offsets in bytes.  Returns (rc, stdout, region after)."""
    raw = region.tobytes()
    params = [op, mask, repeat, *strides, dst, src0, src1, len(raw)]
    inp, out = tmp_path / "ops.in", tmp_path / "ops.out"
    inp.write_bytes(np.asarray(params, np.int64).tobytes() + raw)
    if out.exists():
        out.unlink()
    proc = subprocess.run([str(binary), str(inp), str(out)], capture_output=True, text=True, timeout=60)
    after = np.frombuffer(out.read_bytes(), region.dtype) if out.exists() else None
    return proc.returncode, proc.stdout + proc.stderr, after


def test_max_folds_each_row_by_repeat_stride(driver, tmp_path):
    # Two rows of 256 int32, v[r, c] = 1000 r + c; one repeat per row (row stride 32 blocks): the first 64
    # elements of each row take the max with the 64 starting 128 further on.
    v = (1000 * np.arange(2)[:, None] + np.arange(256)[None, :]).astype(np.int32)
    rc, log, after = _run(driver, tmp_path, v, MAX, 64, 2, (1, 1, 1, 32, 32, 32), 0, 0, 128 * 4)
    assert rc == 0 and "CHECK-SUMMARY errors=0 " in log, log
    after = after.reshape(2, 256)
    assert after[0, 0] == 128 and after[0, 63] == 191 and after[1, 0] == 1128 and after[1, 63] == 1191
    assert after[0, 64] == 64 and after[1, 255] == 1255  # past the mask / outside the operand: untouched
    want = v.copy()
    want[:, :64] = v[:, 128:192]
    assert np.array_equal(after, want)


def test_min_with_a_partial_mask(driver, tmp_path):
    # v[r, c] = 1000 r - c (decreasing along the row); mask 8: min(v[c], v[c + 8]) = v[c + 8] for c < 8 only.
    v = (1000 * np.arange(3)[:, None] - np.arange(256)[None, :]).astype(np.int32)
    rc, log, after = _run(driver, tmp_path, v, MIN, 8, 3, (1, 1, 1, 32, 32, 32), 0, 0, 8 * 4)
    assert rc == 0 and "CHECK-SUMMARY errors=0 " in log, log
    after = after.reshape(3, 256)
    assert after[0, 0] == -8 and after[0, 7] == -15 and after[2, 0] == 1992 and after[2, 7] == 1985
    assert after[0, 8] == -8 and after[2, 8] == 1992  # the ninth element: not under the mask
    want = v.copy()
    want[:, :8] = v[:, 8:16]
    assert np.array_equal(after, want)


def test_and_or_with_a_broadcast_block_and_block_strides(driver, tmp_path):
    # And: 512 bytes of 0xFFFF (two repeats) with one 256-byte block set [0xFFFF, 0x7FFF] read by both
    # repeats (src1 repeat stride 0): every int32 becomes 0x7FFFFFFF.
    region = np.full(384, 0xFFFF, np.uint16)
    region[256:] = np.tile(np.array([0xFFFF, 0x7FFF], np.uint16), 64)
    rc, log, after = _run(driver, tmp_path, region, AND, 128, 2, (1, 1, 1, 8, 8, 0), 0, 0, 512)
    assert rc == 0 and "CHECK-SUMMARY errors=0 " in log, log
    assert np.all(after[:256].view(np.uint32) == 0x7FFFFFFF) and np.array_equal(after[256:], region[256:])
    # Or with dst block stride 2: src0 = blocks 0..7 (zeros), src1 = 0x1234; dst blocks 0, 2, .., 14 get
    # 0 | 0x1234 (read before written), the odd blocks keep what they held (0 in 1..7, 1 in 9..15).
    region = np.full(640, 1, np.uint16)
    region[:128] = 0
    region[512:] = 0x1234
    rc, log, after = _run(driver, tmp_path, region, OR, 128, 1, (2, 1, 1, 8, 8, 8), 0, 0, 1024)
    assert rc == 0 and "CHECK-SUMMARY errors=0 " in log, log
    blocks = after[:256].reshape(16, 16)
    assert np.all(blocks[0::2] == 0x1234) and np.all(blocks[1:8:2] == 0) and np.all(blocks[9::2] == 1)
    assert np.array_equal(after[256:], region[256:])


@pytest.mark.parametrize("mask,repeat,src1,what", [
    (65, 1, 256, "mask 65"),                    # int32: at most 64 elements per repeat
    (0, 1, 256, "mask 0"),
    (64, 0, 256, "repeatTime 0"),
    (64, 1, 260, "not 32-byte aligned"),        # the documented start-address alignment (UB: 32 bytes)
])
def test_refused(driver, tmp_path, mask, repeat, src1, what):
    v = np.zeros(128, np.int32)
    rc, log, _ = _run(driver, tmp_path, v, MAX, mask, repeat, (1, 1, 1, 8, 8, 8), 0, 0, src1)
    assert rc != 0 or "CHECK-SUMMARY errors=0 " not in log, f"{what} accepted:\n{log}"
