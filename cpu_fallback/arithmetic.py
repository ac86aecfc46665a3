"""The Ascend hardware behaviours the AscendC documentation leaves open, as named parameters.

The kernels, the executable AscendC stand-in (``ascendc_kernels/tests/exec_ascendc/``) and this
NumPy model all have to assume something where the public docs are silent.  Each such point is a
field of :class:`Arithmetic`; the field's first value is the model's default (what the kernels were
written for), the others are what the docs, the headers or an older simulator leave possible:

``cast`` (910A only): FP32 -> FP16 ``Cast`` with ``CAST_NONE``
    ``"rint"``: round to nearest even (``Cast.md``: "CAST_RINT when lossy");
    ``"trunc"``: toward zero (AKG's old open simulator; dav_c100 issues the plain
    ``vconv_f322f16``).  The 910B's split asks for ``CAST_RINT`` by name: documented, not open.
``overflow``: FP32 -> FP16 conversion of a value beyond FP16's range
    ``"inf"``: to infinity (IEEE); ``"saturate"``: to +-65504 (the docs' default saturation mode).
``subnormals``: FP16 subnormals in ``Cast`` (both directions) and in Mmad's inputs
    ``"gradual"``: kept; ``"flush"``: read and written as zero of the same sign.
``accumulate``: Mmad's FP32 accumulation inside one call (``Mmad.md`` documents neither order nor rounding)
    ``"cube16"``: each 16-long K chunk summed exactly, rounded once, then one FP32 add
    (:mod:`.accumulate`); ``"sequential"``: one FP32 round-to-nearest add per product;
    ``"truncate"``: ``cube16``'s chunks with every rounding toward zero (as NVIDIA's tensor
    cores truncate).
``atomic``: the FP32 atomic add into GM (910A UB -> GM, 910B Fixpipe)
    ``"rne"``: round to nearest even; ``"trunc"``: toward zero.
``l0c_to_ub`` (910A only): the ``BLOCK_MODE_MATRIX`` copy L0C -> UB
    ``"block"``: as dav_c100's header implements it; ``"unsupported"``: as the doc page lists the
    training series (the copy fails).  No design covers this one: it is the 910A's only way out of L0C
    in the kernels.

Spelled as text (the stand-in's ``SGEMM_CUBE_EXEC_ARITHMETIC`` environment variable, the package's
``SGEMM_CUBE_NPU_ARITHMETIC``): comma-separated ``field=value`` pairs, fields left out at their
default, e.g. ``"cast=trunc,subnormals=flush"``; :meth:`Arithmetic.parse` and :meth:`Arithmetic.spec`.
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["Arithmetic", "CHOICES", "DEFAULT", "WORST", "alternatives", "as_arithmetic"]

#: field -> its values, the model's default first
CHOICES = {
    "cast": ("rint", "trunc"),
    "overflow": ("inf", "saturate"),
    "subnormals": ("gradual", "flush"),
    "accumulate": ("cube16", "sequential", "truncate"),
    "atomic": ("rne", "trunc"),
    "l0c_to_ub": ("block", "unsupported"),
}


class Arithmetic(NamedTuple):
    """One choice for every open hardware behaviour (module docstring); defaults are the model's."""

    cast: str = "rint"
    overflow: str = "inf"
    subnormals: str = "gradual"
    accumulate: str = "cube16"
    atomic: str = "rne"
    l0c_to_ub: str = "block"

    def check(self) -> "Arithmetic":
        """Return self, or raise ValueError naming the field and its valid values."""
        for field, value in zip(self._fields, self):
            if value not in CHOICES[field]:
                raise ValueError(f"unknown {field}={value!r}; choose one of {list(CHOICES[field])}")
        return self

    @classmethod
    def parse(cls, text: str | None) -> "Arithmetic":
        """From ``"field=value,..."`` (None or "" gives the default); unknown fields or values raise ValueError."""
        values = {}
        for item in (text or "").replace(" ", "").split(","):
            if not item:
                continue
            field, sep, value = item.partition("=")
            if not sep or field not in CHOICES:
                raise ValueError(f"bad arithmetic item {item!r}: write field=value with a field of {list(CHOICES)}")
            values[field] = value
        return cls(**values).check()

    def spec(self) -> str:
        """The fields that differ from the default, as ``"field=value,..."`` ("" for the default)."""
        return ",".join(f"{f}={v}" for f, v, d in zip(self._fields, self, DEFAULT) if v != d)

    def __str__(self) -> str:
        return self.spec() or "default"


#: The model's assumptions (what the kernels were written for).
DEFAULT = Arithmetic()
#: Every alternative at once that can cost accuracy (the L0C -> UB copy, which cannot, stays).
WORST = Arithmetic(cast="trunc", overflow="saturate", subnormals="flush", accumulate="truncate", atomic="trunc")


def alternatives() -> list[Arithmetic]:
    """Each non-default value of each field alone, in field order (the L0C -> UB copy's included)."""
    return [DEFAULT._replace(**{field: value}) for field, values in CHOICES.items() for value in values[1:]]


def as_arithmetic(value) -> Arithmetic:
    """The :class:`Arithmetic` a model function was given: None is :data:`DEFAULT`, a string is
    :meth:`Arithmetic.parse`'d, an :class:`Arithmetic` is checked; anything else raises TypeError."""
    if value is None:
        return DEFAULT
    if isinstance(value, str):
        return Arithmetic.parse(value)
    if isinstance(value, Arithmetic):
        return value.check()
    raise TypeError(f"arithmetic must be an Arithmetic, a spec string or None, got {value!r}")
