"""Shared fixtures: random data of several distributions and exponent ranges (fixed seed by default)."""
import os
import secrets
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


def _session_seed() -> int:
    """0 unless ``SGEMM_CUBE_TEST_SEED`` says otherwise: ``random`` draws a fresh seed, an integer replays one."""
    env = os.environ.get("SGEMM_CUBE_TEST_SEED", "").strip()
    if env.lower() == "random":
        return secrets.randbits(32)
    return int(env) if env else 0


#: Fixed data by default (every run sees the same numbers); ``SGEMM_CUBE_TEST_SEED=random`` draws fresh
#: data, ``SGEMM_CUBE_TEST_SEED=<int>`` replays a run (the header prints the seed either way).
SESSION_SEED = _session_seed()


def pytest_report_header(config):
    how = "fresh: SGEMM_CUBE_TEST_SEED=random" if os.environ.get("SGEMM_CUBE_TEST_SEED", "").strip().lower() \
        == "random" else "fixed"
    return f"sgemm_cube test data seed ({how}): replay with SGEMM_CUBE_TEST_SEED={SESSION_SEED}"


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
