"""Text forms of param values in ``.ncnn.param`` and ``.pnnx.param`` files.

Floats are written as pnnx writes them (``float_to_string`` in pnnx's ``utils.cpp``): ``%g``
between 1e-4 and 1e6, ``%e`` outside, more digits when needed to get the same float32 back, a
compact exponent (``1.000000e-5``) and always a ``.`` or ``e`` (ncnn reads a value without them
as an int). The result never exceeds the 15 characters ncnn's ``ParamDict`` scans per value,
and never has more than 9 digits around the point (ncnn accumulates them in an unsigned int).
:func:`parse_ncnn_float` is ncnn's own decimal reader, so tests can check the round trip.
"""
from __future__ import annotations

import functools
import math
import re

import numpy as np

FLT_MAX = float(np.finfo(np.float32).max)
_EXP = re.compile(r"([eE])([+-]?)0*(\d)")


def _normalize_exponent(s: str) -> str:
    """``1.0e+06`` → ``1.0e6``, ``1.0e-05`` → ``1.0e-5`` (pnnx's normalize_exponent)."""
    return _EXP.sub(lambda m: m.group(1) + ("-" if m.group(2) == "-" else "") + m.group(3), s, count=1)


def _fractional_digits(s: str) -> int:
    if "." not in s:
        return 0
    frac = s.split(".", 1)[1]
    return len(re.split(r"[eE]", frac, maxsplit=1)[0])


def _strtof(s: str) -> np.float32:
    try:
        return np.float32(float(s))
    except ValueError:
        return np.float32("nan")


#: how many float texts each spelling remembers: a model repeats a few values (eps, scales) on
#: thousands of layers
_TEXTS_MAX = 1 << 14


def float_to_string(value: float) -> str:
    """pnnx's text form of a float32 value (see the module docstring)."""
    if type(value) is float:
        return _remembered_float_text(value)
    return _float_to_string(value)


def _float_to_string(value: float) -> str:
    f = np.float32(value)
    if f == 0:
        return "0.0"
    x = float(f)
    a = abs(f)
    if a < np.float32(0.0001) or a >= np.float32(1000000.0):  # compared in float32, as pnnx does
        s = "%e" % x
        if _strtof(s) != f:
            s = "%.8e" % x
        return _normalize_exponent(s)
    s = "%g" % x
    if _strtof(s) != f:
        s = "%.9g" % x
        if _fractional_digits(s) > 9:
            return _normalize_exponent("%.8e" % x)
    if not any(c in s for c in ".eE"):
        s += ".0"
    return s


#: :func:`_float_to_string` of a Python float, remembered
_remembered_float_text = functools.lru_cache(maxsize=_TEXTS_MAX)(_float_to_string)


def ncnn_float(value: float) -> str:
    """A float for ``.ncnn.param``: as pnnx writes it, with ±inf clamped to ±FLT_MAX (ncnn
    would read ``inf`` as a string). NaN is refused (ValueError)."""
    x = float(value)
    if math.isnan(x):
        raise ValueError("NaN cannot be written to an ncnn .param file")
    return _ncnn_float(x)


@functools.lru_cache(maxsize=_TEXTS_MAX)
def _ncnn_float(x: float) -> str:
    if math.isinf(x):
        x = math.copysign(FLT_MAX, x)
    first = float_to_string(x)
    f = np.float32(x)
    # ncnn's reader rounds through a double: for the rare value where pnnx's short form reads
    # back as a neighbouring float32, try the other exact forms.
    for s in (first, *(_normalize_exponent("%.*e" % (p, float(f))) for p in (6, 7, 8))):
        if len(s) <= 15 and parse_ncnn_float(s) == f:
            return s
    return first


def parse_ncnn_float(s: str) -> np.float32:
    """Read a decimal exactly as ncnn's ``vstr_to_float`` does (double accumulation, unsigned
    32-bit digit accumulators, result rounded to float32)."""
    p = 0
    neg = s[:1] == "-"
    if s[:1] in "+-" and s:
        p = 1
    v1 = 0
    while p < len(s) and s[p].isdigit():
        v1 = (v1 * 10 + int(s[p])) & 0xFFFFFFFF
        p += 1
    v = float(v1)
    if p < len(s) and s[p] == ".":
        p += 1
        pow10, v2 = 1, 0
        while p < len(s) and s[p].isdigit():
            v2 = (v2 * 10 + int(s[p])) & 0xFFFFFFFF
            pow10 = (pow10 * 10) & 0xFFFFFFFF
            p += 1
        v += v2 / float(pow10)
    if p < len(s) and s[p] in "eE":
        p += 1
        fact = s[p:p + 1] != "-"
        if s[p:p + 1] in ("+", "-"):
            p += 1
        expon = 0
        while p < len(s) and s[p].isdigit():
            expon = (expon * 10 + int(s[p])) & 0xFFFFFFFF
            p += 1
        scale = 1.0
        while expon >= 8:
            scale *= 1e8
            expon -= 8
        while expon > 0:
            scale *= 10.0
            expon -= 1
        v = v * scale if fact else v / scale
    with np.errstate(over="ignore"):
        return np.float32(-v if neg else v)


def is_ncnn_float_literal(s: str) -> bool:
    """ncnn's rule: a value is a float when it contains ``.`` or ``e``/``E``."""
    return any(c in s for c in ".eE")
