"""float32 → float16 by integer arithmetic on the bit patterns, bit for bit what numpy's cast
gives (round to nearest, ties to even; subnormal halves), faster than that cast on x86 numpy
builds, whose float16 conversion is a scalar loop while integer shifts and adds run vectorized.
Only for values numpy would not turn into an infinity or a NaN (``|x| <= 65504``, no NaN): the
encoder checks the range on the way (one integer maximum) and converts nothing otherwise; the
caller clamps or casts those (:func:`engine.writers.ncnn_bin.write_weight`).

For ``a = |bits|``:

* a half-normal value (``a >= 2**-14``): rebias the exponent by ``15 - 127`` and drop 13
  mantissa bits, rounding to nearest even: ``(a - (112 << 23) + 0xFFF + ((a >> 13) & 1)) >> 13``
  (a carry out of the mantissa correctly bumps the exponent);
* a smaller value (a subnormal half, or zero): ``float(a) + 0.5`` leaves the half's subnormal
  mantissa in the low bits of the sum (the float adder does the rounding), and subtracting the
  bits of 0.5 extracts it;

then the sign goes on top.

Every value goes the first way, and the smaller ones, usually a few in a thousand, are then
redone the second way where they are: found by one comparison and a search over the chunk,
gathered, written back, which costs less than redoing the whole chunk (two more passes and a
masked copy). A chunk with many of them (zeros: biases, pruned weights) is redone whole without
looking for them, by a maximum: the first way's result taken as a signed number (the shift is
arithmetic) is not above the second way's for any smaller value (negative below ``2**-15``, but
for the few that round up to it; from there to ``2**-14`` the mantissa bits alone, never more
than the subnormal half), and the second way applied to ``min(|x|, 2**-14)`` gives ``0x400``,
the least half-normal result, for every other value.
"""
from __future__ import annotations

import numpy as np


def _const(value, dtype) -> np.ndarray:
    """A read-only 0-d array: numpy's ufuncs take one for a scalar operand at about half the
    per-call cost of a numpy scalar (16 calls a chunk)."""
    c = np.array(value, dtype)
    c.flags.writeable = False
    return c


_ABS = _const(0x7FFFFFFF, np.uint32)
_LSB_SHIFT = _const(13, np.uint32)
_ONE = _const(1, np.uint32)
#: the half-normal rounding's exponent rebias and round-to-nearest bias, as an int32 addend
_REBIAS_ROUND = _const(0xFFF - (112 << 23), np.int32)
_DROP = _const(13, np.int32)
#: ``2**-14``, the smallest normal half, as float32 bits and as a float32
_MIN_NORMAL = _const(0x38800000, np.uint32)
_MIN_NORMAL_F = _const(2.0 ** -14, np.float32)
_HALF = _const(0.5, np.float32)
_HALF_BITS = _const(0x3F000000, np.uint32)
_SIGN_SHIFT = _const(16, np.uint32)
_SIGN = _const(0x8000, np.uint32)
#: 65504, the largest half, as float32 bits: a larger ``|bits|`` is beyond it, infinite or NaN
_MAX_BITS = 0x477FE000
#: a chunk with more than one in this many smaller values is redone whole (gathering and
#: writing back scattered values costs more per value than the whole-chunk passes beyond it)
_DENSE = 32


class Fp16Encoder:
    """Converts chunks of at most ``size`` float32 values, reusing its scratch buffers."""

    def __init__(self, size: int) -> None:
        self._t = [np.empty(size, np.uint32) for _ in range(2)]
        self._small = np.empty(size, np.bool_)

    def into(self, c: np.ndarray, out: np.ndarray) -> bool:
        """Write the float16 values of the contiguous float32 ``c`` into ``out`` (float16 or
        uint16, ``c.size`` long) and return True; or return False, writing nothing, when ``c``
        holds a value beyond ±65504 or a NaN."""
        n = c.size
        a, hi = self._t[0][:n], self._t[1][:n]
        small = self._small[:n]
        u = c.view(np.uint32)
        np.bitwise_and(u, _ABS, out=a)
        if n and a.max() > _MAX_BITS:  # while the chunk is in the cache: no second pass over it
            return False
        np.less(a, _MIN_NORMAL, out=small)
        k = np.count_nonzero(small)
        np.right_shift(a, _LSB_SHIFT, out=hi)  # half-normal: rebias, round to nearest even
        np.bitwise_and(hi, _ONE, out=hi)
        np.add(hi, a, out=hi)
        h = hi.view(np.int32)
        np.add(h, _REBIAS_ROUND, out=h)
        np.right_shift(h, _DROP, out=h)
        if k > n // _DENSE:  # subnormal or zero, many: the maximum over the whole chunk
            f = a.view(np.float32)
            np.minimum(f, _MIN_NORMAL_F, out=f)
            np.add(f, _HALF, out=f)
            np.subtract(a, _HALF_BITS, out=a)
            np.maximum(h, a.view(np.int32), out=h)
        elif k:  # subnormal or zero, a few: redone where they are
            at = small.nonzero()[0]
            lo = a[at]
            np.add(lo.view(np.float32), _HALF, out=lo.view(np.float32))
            np.subtract(lo, _HALF_BITS, out=lo)
            hi[at] = lo
        np.right_shift(u, _SIGN_SHIFT, out=a)  # the sign
        np.bitwise_and(a, _SIGN, out=a)
        np.bitwise_or(hi, a, out=hi)
        np.copyto(out.view(np.uint16), hi, casting="unsafe")
        return True
