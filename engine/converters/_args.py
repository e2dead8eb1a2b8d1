"""Checking converter arguments that come straight from the file.

A ``.pt2`` may be hand-edited or corrupt: a stride can be ``0``, a kernel size list can have
five entries for a 2-D pooling, a group count can be a string. ncnn would divide by such a
stride at run time, and ``zip`` over a too-long list silently drops entries, so converters
check the arguments they turn into layer params and refuse bad ones (:class:`Unsupported`,
reported as a diagnostic naming the node).
"""
from __future__ import annotations

from numbers import Integral

from ..convert.context import Unsupported


def _is_int(v) -> bool:
    """An integer that is not a bool (a plain ``int`` without the ABC's slower check)."""
    return type(v) is int or (isinstance(v, Integral) and not isinstance(v, bool))


def int_tuple(value, n: int, what: str, *, at_least: int | None = None) -> tuple[int, ...]:
    """``value`` (an int or a list of 1 or ``n`` ints, each ``>= at_least``) as ``n`` ints."""
    out: tuple[int, ...] | None = None
    if isinstance(value, (list, tuple)):  # first: the usual form, and no ABC check of a list
        if all(map(_is_int, value)):
            if len(value) == 1:
                out = (int(value[0]),) * n
            elif len(value) == n:
                out = tuple(map(int, value))
    elif _is_int(value):
        out = (int(value),) * n
    if out is None or (at_least is not None and out and min(out) < at_least):
        bound = "" if at_least is None else f" >= {at_least}"
        raise Unsupported(f"unsupported: {what}={value!r} (expected {n} constant integers{bound})")
    return out
