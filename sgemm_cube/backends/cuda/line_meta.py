"""The line meta as the CUDA kernels hold it: one int32 per line, and the line classes.

A line (a row of A, a column of B) has two integers, its *line meta*
(:mod:`sgemm_cube.cpu_fallback.guard`): the scaling exponent ``t`` and the class ``cls``
(:class:`~sgemm_cube.cpu_fallback.guard.LineClass`).  The split pass writes them packed into one
int32 per line, as :func:`sgemm_cube.cpu_fallback.guard.pack_meta` does (the definition; a test
checks the constants below against it)::

    bits 0-1   cls            (META_CLS_BITS bits)
    bits 2-12  t + META_T_BIAS (t in [-1024, 1023], META_T_MASK)

Every constant here is a ``tl.constexpr``, so the kernels read them as literals: the compiled code
is the same as with the numbers written out.
"""
from __future__ import annotations

import triton
import triton.language as tl

from sgemm_cube.cpu_fallback import guard
from sgemm_cube.cpu_fallback.guard import LineClass

__all__ = ["SPLIT", "LOSES_BITS", "SPECIAL", "META_CLS_BITS", "META_CLS_MASK", "META_T_BIAS", "META_T_MASK",
           "PAD_META", "NO_BOTTOM", "BF16_NARROW_LOW", "BF16_FLOOR", "BF16_PAIR_FLOOR", "BF16_EVERY_LINE",
           "FP16_TIGHT_SPAN", "encode_meta", "decode_meta"]

# The line classes (guard.LineClass), as the kernels compare them.
#: Every nonzero entry keeps 22 bits in the split: the line is emulated.
SPLIT = tl.constexpr(int(LineClass.SPLIT))
#: Some nonzero entry lies below the split's range: a fix-up line with ``fixup=True``.
LOSES_BITS = tl.constexpr(int(LineClass.LOSES_BITS))
#: NaN, an infinity or an entry the split would overflow on: always a fix-up line.
SPECIAL = tl.constexpr(int(LineClass.SPECIAL))

# The BF16 lines' binades (guard.bf16_summary, guard.bf16_rule), as exponents of 2.
#: What a line with no nonzero finite entry has for its lowest binade (above every real one).
NO_BOTTOM = tl.constexpr(guard.NO_BOTTOM)
#: A narrow BF16 line's entries all lie at or above 2**BF16_NARROW_LOW once scaled (the range's lower limit).
BF16_NARROW_LOW = tl.constexpr(guard._BF16_NARROW_LOW)
#: No emulated BF16 line reaches below 2**BF16_FLOOR (three normal BF16 slices hold it exactly).
BF16_FLOOR = tl.constexpr(guard._BF16_FLOOR)
#: No product of an emulated row's entry and an emulated column's entry lies below 2**BF16_PAIR_FLOOR.
BF16_PAIR_FLOOR = tl.constexpr(guard._BF16_PAIR_FLOOR)
#: The lowest binade of an operand that emulates every line (``2**-1022``: below every scaled FP32 value).
BF16_EVERY_LINE = tl.constexpr(guard._EVERY_LINE)
#: A partner line of the FP16 rule (guard.fp16_rule) is tight where its nonzero entries' floor(log2) lie at
#: most this far apart (and it holds no zero).
FP16_TIGHT_SPAN = tl.constexpr(guard._FP16_TIGHT_SPAN)

_CLS_BITS = 2
_T_BIAS = 1024
_T_BITS = 11
#: Bits of the class, at the bottom of the packed meta.
META_CLS_BITS = tl.constexpr(_CLS_BITS)
META_CLS_MASK = tl.constexpr((1 << _CLS_BITS) - 1)
#: ``t + META_T_BIAS`` is stored, in ``_T_BITS`` bits above the class.
META_T_BIAS = tl.constexpr(_T_BIAS)
META_T_MASK = tl.constexpr((1 << _T_BITS) - 1)
#: The packed meta of a pad line (class SPLIT, ``t`` 0; 4096): what a masked load of the meta reads
#: past the last line, so that pad rows and columns are neither scaled nor fixed up.
PAD_META = tl.constexpr((_T_BIAS << _CLS_BITS) | int(LineClass.SPLIT))


@triton.jit
def encode_meta(cls, t):
    """The packed int32 of a line of class ``cls`` and exponent ``t`` (guard's ``pack_meta``)."""
    return cls | ((t + META_T_BIAS) << META_CLS_BITS)


@triton.jit
def decode_meta(meta):
    """``(cls, t)`` of packed line meta (guard's ``unpack_meta``)."""
    return meta & META_CLS_MASK, ((meta >> META_CLS_BITS) & META_T_MASK) - META_T_BIAS
