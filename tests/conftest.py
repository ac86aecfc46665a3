"""Shared fixtures: fresh random data of several distributions and exponent ranges."""
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

#: Fresh data every run; set SGEMM_CUBE_TEST_SEED to replay a run (the header prints it).
SESSION_SEED = int(os.environ.get("SGEMM_CUBE_TEST_SEED", secrets.randbits(32)))


def pytest_report_header(config):
    return f"sgemm_cube test data seed: SGEMM_CUBE_TEST_SEED={SESSION_SEED}"

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
    """A generator per test: fresh data each run, replayable with the printed session seed."""
    return np.random.default_rng([SESSION_SEED, zlib.crc32(request.node.nodeid.encode())])
