"""Shared fixtures: seeds, and random data of several distributions and exponent ranges.

Test data are fixed by default and fresh on request:

* ``SGEMM_CUBE_TEST_SEED`` unset: session seed 0, so every run sees the same numbers.  This is what
  CI runs (``.ci/run``, README's test command).
* ``SGEMM_CUBE_TEST_SEED=random``: a fresh session seed, printed in pytest's header; ``.ci/fresh_seeds``
  runs the suite this way (opt-in, by hand or on a schedule).
* ``SGEMM_CUBE_TEST_SEED=<int>``: that session seed, to replay a failure of a fresh-seed run.

Every test that draws random data takes it from the session seed and its own node id, so a test's
data do not depend on which tests ran before it: the ``rng`` fixture (``numpy.random.Generator``),
``node_seed`` (an integer, for code that takes a seed), ``torch_gen`` (a ``torch.Generator``).  The
global generators (``random``, ``numpy.random``, torch's default one) are seeded the same way before
every test.  Hypothesis tests are derandomized by default (the same examples every run) and draw
fresh examples, seeded from the session seed, under ``SGEMM_CUBE_TEST_SEED`` set.
"""
import os
import random
import secrets
import sys
import zlib

import numpy as np
import pytest

# Without a GPU the Triton kernels run on Triton's CPU interpreter.  The flag must
# be set before triton is first imported, which any test module may do.
if "TRITON_INTERPRET" not in os.environ:
    try:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    except ImportError:
        pass


def _subnormals_survive() -> bool:
    """Whether float32 arithmetic keeps subnormals here: a process running with flush-to-zero or
    denormals-are-zero (a library built with -ffast-math, ``torch.set_flush_denormal(True)``) changes
    every FP32 result near underflow, the tests' references included."""
    tiny = np.float32(2.0 ** -140)
    return bool(tiny * np.float32(0.5) > 0 and np.float32(2.0 ** -126) - np.float32(2.0 ** -126 * 1.5) != 0)


def pytest_sessionstart(session):
    if not _subnormals_survive():
        raise pytest.UsageError("float32 subnormals flush to zero in this process (FTZ/DAZ): the accuracy "
                                "tests' references and the underflow generators assume IEEE arithmetic")


_SEED_ENV = os.environ.get("SGEMM_CUBE_TEST_SEED", "").strip()


def _session_seed() -> int:
    """0 unless ``SGEMM_CUBE_TEST_SEED`` says otherwise: ``random`` draws a fresh seed, an integer replays one."""
    if _SEED_ENV.lower() == "random":
        return secrets.randbits(32)
    try:
        return int(_SEED_ENV) if _SEED_ENV else 0
    except ValueError:
        raise ValueError(f"SGEMM_CUBE_TEST_SEED={_SEED_ENV!r}: expected 'random' or an integer") from None


#: Fixed data by default (every run sees the same numbers); ``SGEMM_CUBE_TEST_SEED=random`` draws fresh
#: data, ``SGEMM_CUBE_TEST_SEED=<int>`` replays a run (the header prints the seed either way).
SESSION_SEED = _session_seed()


#: True when the seed was asked for (``random`` or an integer): hypothesis then draws its examples from it.
SEEDED_BY_ENV = bool(_SEED_ENV)


def pytest_report_header(config):
    how = "fresh: SGEMM_CUBE_TEST_SEED=random" if _SEED_ENV.lower() == "random" else \
        ("SGEMM_CUBE_TEST_SEED" if _SEED_ENV else "fixed default")
    return f"sgemm_cube test data seed {SESSION_SEED} ({how}): replay with SGEMM_CUBE_TEST_SEED={SESSION_SEED}"


def seed_for_node(nodeid: str) -> int:
    """A 32-bit seed from the session seed and a test's node id (independent of the order tests run in)."""
    return int(np.random.SeedSequence([SESSION_SEED, zlib.crc32(nodeid.encode())]).generate_state(1)[0])


# ---- hypothesis: derandomized by default, fresh examples from the session seed when one is asked for
try:
    import hypothesis
except ImportError:  # the property tests skip themselves
    hypothesis = None
else:
    hypothesis.settings.register_profile("sgemm_cube_fixed", derandomize=True, database=None)
    hypothesis.settings.register_profile("sgemm_cube_seeded", derandomize=False, database=None, print_blob=True)
    hypothesis.settings.load_profile("sgemm_cube_seeded" if SEEDED_BY_ENV else "sgemm_cube_fixed")


#: Test modules whose every test is ``slow`` (``pytest -m "not slow"`` leaves them out of the quick run):
#: each takes tens of seconds or more on the 2-core CI machine -- compiling and executing the AscendC
#: kernels in their stand-in, or running the Triton kernels under the interpreter.  Listed here rather
#: than marked in each file, so that one place says what the quick run leaves out.
SLOW_MODULES = (
    "tests/ascendc_kernels/test_executed_kernels.py",
    "tests/ascendc_kernels/test_executed_guard.py",
    "tests/ascendc_kernels/test_exec_arithmetic.py",
    "tests/ascendc_kernels/test_guarantee_alternatives.py",
    "tests/ascendc_kernels/test_probes.py",
    "tests/ascendc_kernels/test_ascend_build.py",
    "tests/sgemm_cube/backends/cuda/test_cuda_backend.py",
)


def pytest_collection_modifyitems(config, items):
    """Mark the tests of :data:`SLOW_MODULES` ``slow``; under ``SGEMM_CUBE_TEST_SEED``, each hypothesis test
    draws from the session seed and its node id."""
    for item in items:
        if item.nodeid.split("::")[0] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    if hypothesis is None or not SEEDED_BY_ENV:
        return
    for item in items:
        fn = getattr(item, "obj", None)
        if getattr(fn, "is_hypothesis_test", False):
            hypothesis.seed(seed_for_node(item.nodeid))(fn)


@pytest.fixture(autouse=True)
def _seed_global_generators(request):
    """Seed ``random``, ``numpy.random`` and torch's default generator (if torch is loaded) per test."""
    seed = seed_for_node(request.node.nodeid)
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(seed)


#: name -> generator(rng, shape) of float32 data (never zeros, never constant).
DISTRIBUTIONS = {
    "normal": lambda rng, s: rng.standard_normal(s),
    "uniform01": lambda rng, s: rng.uniform(0.0, 1.0, s),
    "uniform_pm1": lambda rng, s: rng.uniform(-1.0, 1.0, s),
    # signed log-normal, sigma 2, clipped at 2**14 so that it stays inside the FP16 split's range (sb=12)
    "lognormal": lambda rng, s: np.minimum(rng.lognormal(0.0, 2.0, s), 2.0 ** 14) * rng.choice([-1.0, 1.0], s),
    "wide_exponent": lambda rng, s: rng.uniform(-1.0, 1.0, s) * 2.0 ** rng.integers(-12, 12, s),
}


def draw(rng, name, shape, scale_exp=0):
    """float32 array of the named distribution, times 2**scale_exp."""
    return (DISTRIBUTIONS[name](rng, shape) * 2.0 ** scale_exp).astype(np.float32)


@pytest.fixture
def rng(request):
    """A generator per test, from the session seed (printed in the header) and the test's id."""
    return np.random.default_rng([SESSION_SEED, zlib.crc32(request.node.nodeid.encode())])


@pytest.fixture
def node_seed(request):
    """An integer seed per test (for APIs that take one), from the session seed and the test's id."""
    return seed_for_node(request.node.nodeid)


@pytest.fixture
def torch_gen(node_seed):
    """A ``torch.Generator`` (CPU) per test, from the session seed and the test's id."""
    torch = pytest.importorskip("torch")
    return torch.Generator().manual_seed(node_seed)


@pytest.fixture
def shipped_npu_tilings_only(monkeypatch, tmp_path):
    """The NPU tiling tables as shipped: a user's own (``$SGEMM_CUBE_TUNING_DIR/npu``) points at an empty
    temporary folder, and the lookups' caches are cleared before and after."""
    from sgemm_cube.backends import npu

    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "user"))
    npu.choose_tiling.cache_clear()
    npu._predicted_tflops.cache_clear()
    yield
    npu.choose_tiling.cache_clear()
    npu._predicted_tflops.cache_clear()
