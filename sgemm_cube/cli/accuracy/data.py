"""Random inputs of the studies: named distributions and deterministic seeding.

Every array a study draws comes from :func:`study_rng` with the study's seed
and a key naming what is drawn, so a study is reproduced exactly by its seed
and parameters (and a different key gives independent data).
"""
from __future__ import annotations

import zlib

import numpy as np

__all__ = ["DISTRIBUTIONS", "study_rng", "draw", "scale_by_power_of_two"]

#: name -> (description, generator(rng, shape) -> float64 array); SGEMM-cube Sec. 4 sampling (a) and (b).
DISTRIBUTIONS = {
    "symmetric": ("uniform in [-2^e, 2^e]", lambda rng, shape: rng.uniform(-1.0, 1.0, shape)),
    "nonnegative": ("uniform in [0, 2^e]", lambda rng, shape: rng.uniform(0.0, 1.0, shape)),
    "normal": ("normal, standard deviation 2^e", lambda rng, shape: rng.standard_normal(shape)),
}


def study_rng(seed: int, *key) -> np.random.Generator:
    """Generator for the data named by ``key`` (ints and strings) in a study seeded ``seed``."""
    words = [int(seed)]
    for part in key:
        words.append(zlib.crc32(part.encode()) if isinstance(part, str) else int(part))
    return np.random.default_rng(words)


def draw(rng: np.random.Generator, distribution: str, shape: tuple[int, ...]) -> np.ndarray:
    """float32 sample of a named distribution at offset exponent 0 (scale it afterwards)."""
    try:
        generate = DISTRIBUTIONS[distribution][1]
    except KeyError:
        raise ValueError(f"unknown distribution {distribution!r}; choose one of {list(DISTRIBUTIONS)}") from None
    return generate(rng, shape).astype(np.float32)


def scale_by_power_of_two(x: np.ndarray, exponent: int) -> np.ndarray:
    """``x * 2**exponent`` in float32, exact unless it under- or overflows FP32.

    The studies scale one base sample to every offset exponent, so that the
    exponent is the only thing that changes along a sweep.
    """
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(x, np.int32(exponent)).astype(np.float32, copy=False)
