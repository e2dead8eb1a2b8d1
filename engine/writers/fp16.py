"""float32 → float16 by integer arithmetic on the bit patterns, bit for bit what numpy's cast
gives (round to nearest, ties to even; subnormal halves), about twice as fast as that cast on
x86 numpy builds, whose float16 conversion is a scalar loop while integer shifts and adds run
vectorized. Only for values numpy would not turn into an infinity or a NaN (``|x| <= 65504``,
no NaN): the encoder checks the range on the way (one integer maximum) and converts nothing
otherwise; the caller clamps or casts those (:func:`engine.writers.ncnn_bin.write_weight`).

For ``a = |bits|``:

* a half-normal value (``a >= 2**-14``): rebias the exponent by ``15 - 127`` and drop 13
  mantissa bits, rounding to nearest even: ``(a - (112 << 23) + 0xFFF + ((a >> 13) & 1)) >> 13``
  (a carry out of the mantissa correctly bumps the exponent);
* a smaller value: ``float(a) + 0.5`` leaves the half's subnormal mantissa in the low bits of
  the sum (the float adder does the rounding), and subtracting the bits of 0.5 extracts it;

then the sign goes on top.
"""
from __future__ import annotations

import numpy as np

#: ``2**-14``, the smallest normal half, as float32 bits
_MIN_NORMAL = np.uint32(0x38800000)
_REBIAS_ROUND = np.uint32((0xFFF - (112 << 23)) & 0xFFFFFFFF)
_HALF_BITS = np.uint32(0x3F000000)
_HALF = np.float32(0.5)
#: 65504, the largest half, as float32 bits: a larger ``|bits|`` is beyond it, infinite or NaN
_MAX_BITS = np.uint32(0x477FE000)


class Fp16Encoder:
    """Converts chunks of at most ``size`` float32 values, reusing its scratch buffers."""

    def __init__(self, size: int) -> None:
        self._t = [np.empty(size, np.uint32) for _ in range(3)]
        self._small = np.empty(size, np.bool_)

    def into(self, c: np.ndarray, out: np.ndarray) -> bool:
        """Write the float16 values of the contiguous float32 ``c`` into ``out`` (float16 or
        uint16, ``c.size`` long) and return True; or return False, writing nothing, when ``c``
        holds a value beyond ±65504 or a NaN."""
        n = c.size
        a, hi, lo = (t[:n] for t in self._t)
        small = self._small[:n]
        u = c.view(np.uint32)
        np.bitwise_and(u, np.uint32(0x7FFFFFFF), out=a)
        if n and a.max() > _MAX_BITS:  # while the chunk is in the cache: no second pass over it
            return False
        np.right_shift(a, np.uint32(13), out=hi)  # half-normal: rebias, round to nearest even
        np.bitwise_and(hi, np.uint32(1), out=hi)
        np.add(hi, a, out=hi)
        np.add(hi, _REBIAS_ROUND, out=hi)
        np.right_shift(hi, np.uint32(13), out=hi)
        np.less(a, _MIN_NORMAL, out=small)  # subnormal or zero: the float adder rounds
        np.add(a.view(np.float32), _HALF, out=lo.view(np.float32))
        np.subtract(lo, _HALF_BITS, out=lo)
        np.copyto(hi, lo, where=small)
        np.right_shift(u, np.uint32(16), out=lo)  # the sign
        np.bitwise_and(lo, np.uint32(0x8000), out=lo)
        np.bitwise_or(hi, lo, out=hi)
        np.copyto(out.view(np.uint16), hi, casting="unsafe")
        return True
