"""The bring-up's probe table (``ascendc_kernels/probes.py``): each open hardware behaviour identified.

The probes run the real kernels in the executable AscendC stand-in under the default, under each
alternative of :mod:`sgemm_cube.cpu_fallback.arithmetic` alone and under all of them at once, and
must name the behaviour the stand-in was set to, for both chips.  A chip that matches no modelled
alternative must be reported as not covered, never as one of them.
"""
from __future__ import annotations

import pytest

from sgemm_cube.cpu_fallback.arithmetic import CHOICES, DEFAULT, WORST, Arithmetic, alternatives

pytest.importorskip("torch")
probes = pytest.importorskip("ascendc_kernels.probes")

from .executed import ExecutedExtension, build_chips  # noqa: E402
from .test_ascend_kernel_sources import CHIPS  # noqa: E402

SOCS = {"910A": "910a", "910B": "910b"}


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    return {SOCS[c]: path for c, path in build_chips(tmp_path_factory.mktemp("probes"), "run_kernels").items()}


def test_every_probe_tells_its_alternatives_apart():
    for p in probes.PROBES:
        values = list(p.predict.values())
        for i, x in enumerate(values):
            for y in values[i + 1:]:
                assert not probes._same(x, y), f"{p.field}: two alternatives predict the same output"
        assert set(p.predict) <= set(CHOICES[p.field])


@pytest.mark.parametrize("soc", sorted(SOCS.values()))
@pytest.mark.parametrize("arithmetic", [DEFAULT, *alternatives(), WORST], ids=str)
def test_probes_identify_the_stand_ins_behaviour(binaries, soc, arithmetic, tmp_path):
    ext = ExecutedExtension(soc, 2, binaries[soc], tmp_path, arithmetic=arithmetic)
    results = probes.run_probes(ext, soc, device="cpu")
    assert [r.field for r in results] == list(Arithmetic._fields)
    assert probes._consistent(results, arithmetic, soc) == [], probes.format_table(results, expected=arithmetic)
    found, uncovered = probes.identified(results)
    if soc == "910a" and arithmetic.l0c_to_ub == "unsupported":
        assert found.l0c_to_ub == "unsupported" and any("L0C" in line for line in uncovered)
        return
    assert found == probes.observable(arithmetic, soc) and uncovered == []


class _OddChip:
    """An extension whose cube adds one ulp to every output: an accumulation no alternative models."""

    def __init__(self, inner):
        self.inner = inner
        self.MatmulOptions = inner.MatmulOptions

    def soc(self):
        return self.inner.soc()

    def matmul(self, a, b, out, options):
        self.inner.matmul(a, b, out, options)
        out.copy_(out.view(dtype=__import__("torch").int32).add(1).view(dtype=out.dtype))

    def split(self, *args):
        self.inner.split(*args)


def test_an_unmodelled_chip_is_reported_not_covered(binaries, tmp_path):
    ext = _OddChip(ExecutedExtension("910b", 2, binaries["910b"], tmp_path))
    results = probes.run_probes(ext, "910b", device="cpu")
    by_field = {r.field: r for r in results}
    assert by_field["accumulate"].answer is None and by_field["subnormals"].answer is None
    found, uncovered = probes.identified(results)
    # unanswered fields keep the design safe under every modelled alternative (the narrower split range)
    assert found.accumulate == WORST.accumulate and found.subnormals == WORST.subnormals == "flush"
    assert any(line.startswith("accumulate:") and "not covered" in line for line in uncovered)


def test_dry_run_prints_every_table(capsys):
    lines = []
    assert probes.dry_run("910a", out=lines.append) == 0
    text = "\n".join(lines)
    for arithmetic in [DEFAULT, *alternatives(), WORST]:
        assert f"-- 910a stand-in, {arithmetic}: identified" in text
    assert sum(line.startswith("accumulate ") for line in text.splitlines()) == 2 + len(alternatives())


def test_the_answers_are_recorded_where_the_backend_reads_them(binaries, tmp_path, monkeypatch):
    from sgemm_cube.backends import npu

    monkeypatch.delenv(npu.ARITHMETIC_ENV, raising=False)
    monkeypatch.setattr(npu, "ARITHMETIC_FILE", tmp_path / "npu_arithmetic.json")
    assert npu.arithmetic("910b").arithmetic == WORST  # unprobed: the design safe under every alternative
    ext = ExecutedExtension("910b", 2, binaries["910b"], tmp_path, arithmetic="accumulate=sequential")
    found, uncovered = probes.identified(probes.run_probes(ext, "910b", device="cpu"))
    assert uncovered == [] and probes.record(found, "910b") == npu.ARITHMETIC_FILE
    recorded = npu.arithmetic("910b")
    assert recorded.arithmetic == DEFAULT._replace(accumulate="sequential") and "file" in recorded.source
    assert npu.arithmetic("910a").arithmetic == WORST  # a record of another chip is not this chip's answer
