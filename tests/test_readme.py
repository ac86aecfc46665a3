"""README's Python blocks run as written, in order, in one namespace (as a reader pastes them).

Every ```python fence of README.md runs; a block whose lines start with
``>>>`` runs as a doctest (its printed results are checked).  A block is
skipped only by an explicit marker on the line before its fence,
``<!-- readme-test: skip (why) -->``, and every such block is listed in
:data:`SKIPPED` with the reason: a new skip fails this test until it is
listed here.
"""
import doctest
import pathlib
import re
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"(?:<!-- readme-test: skip \((?P<why>[^\n]*)\) -->\n)?```python\n(?P<code>.*?)\n```", re.S)

#: The blocks not run here (first line of the block -> why).  Only the distributed block: it needs
#: processes that torchrun starts (tests/distributed runs the same calls through
#: examples/distributed_matmul.py with 2 gloo processes).  No block needs a GPU or an NPU: the
#: PyTorch block's switch routes no device on a CPU-only machine (it warns so) and its CPU lines run.
SKIPPED = {
    "from torch.distributed.tensor import distribute_tensor, Shard, Replicate": "needs a process group",
}


def _blocks():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [(m.group("code"), m.group("why")) for m in _FENCE.finditer(text)]


def test_skips_are_explicit_and_listed():
    skipped = {code.splitlines()[0]: why for code, why in _blocks() if why is not None}
    assert set(skipped) == set(SKIPPED), skipped
    assert len(_blocks()) >= 4


def test_every_python_block_runs_as_written():
    pytest.importorskip("torch")
    import sgemm_cube

    namespace = {"__name__": "readme"}
    ran = 0
    try:
        for code, why in _blocks():
            if why is not None:
                continue
            with warnings.catch_warnings():
                # the switch's default (CUDA, NPU) routes no device on a CPU-only machine: it says so
                warnings.filterwarnings("ignore", message="sgemm_cube's switch routes no device")
                if code.lstrip().startswith(">>>"):
                    test = doctest.DocTestParser().get_doctest(code, namespace, "README", "README.md", 0)
                    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
                    runner.run(test, clear_globs=False)
                    assert runner.failures == 0, f"README block failed as a doctest:\n{code}"
                else:
                    exec(compile(code, "README.md", "exec"), namespace)
            ran += 1
    finally:
        sgemm_cube.disable()  # a block may leave the switch on; the others' tests expect it off
    assert ran == len(_blocks()) - len(SKIPPED)
