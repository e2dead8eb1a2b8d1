"""Comparisons, boolean logic and selection as ncnn layers (for ``pnnx.Expression``).

ncnn computes in float only, so a bool tensor is a blob of 0.0 / 1.0 and an integer tensor a
blob of its values (exact up to 2^24). The expression functions below (``eq ne lt le gt ge``,
``logical_and/or/xor/not``, ``where``) expand into ``Threshold`` (``x > t ? 1 : 0``),
``BinaryOp`` and ``UnaryOp`` layers whose 0/1 results are exact:

* ``gt(a, s)`` = ``Threshold(a, s)``; ``gt(a, b)`` = ``Threshold(a - b, 0)`` (IEEE ``a - b > 0``
  exactly when ``a > b``, infinities included; only values below ~1e-31 in magnitude, whose
  difference ncnn flushes to zero, compare equal); ``lt(a, b)`` = ``gt(b, a)``; ``le`` / ``ge`` are
  ``1 - gt`` / ``1 - lt``;
* ``ne(a, b)`` = ``Threshold(|a - b|, 0)``, ``eq`` = ``1 - ne`` (``1 - |a - b|`` for two bools);
* ``logical_and`` = product, ``logical_or`` = maximum, ``logical_xor`` = ``|a - b|``, ``logical_not``
  = ``1 - a`` of operands made bool first (``ne(x, 0)`` unless they already are);
* ``where(c, a, b)`` = ``a * c + b * (1 - c)``, exact for finite ``a``/``b``; an infinite literal
  branch adds (or subtracts) ``(off * 1e30)^2`` to the other branch, where ``off`` is 1 where the
  infinite branch is taken (``1e60`` overflows to exactly inf, ``0`` stays 0; ncnn's ``log(0)``
  and ``1 / 0`` are NaN on x86, and a product of two scalars would be folded into one infinite
  coefficient).

A comparison involving NaN gives what ``Threshold`` gives (false for ``gt``/``lt``/``ne``/``eq``,
true for ``le``/``ge``), not PyTorch's (false except ``ne``).
"""
from __future__ import annotations

import math
from typing import Any, Callable

from ._broadcast import Value

#: expression functions whose result is a bool tensor
BOOL_RESULTS = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not")


def _flag(v: Value) -> Value:
    """Mark an intermediate value as a bool (0/1) tensor."""
    v.operand.dtype = "bool"
    return v


def is_bool(v: Any) -> bool:
    return isinstance(v, Value) and v.operand.dtype == "bool"


def _threshold(ex, x: Value, t: float) -> Value:
    return _flag(ex._out(ex.ctx.layer("Threshold", [x.operand], threshold=float(t)), x.shape, x.bdim))


def _not(ex, x: Value) -> Value:
    """``1 - x`` of a bool."""
    return _flag(ex.binary("sub", 1.0, x))


def as_bool(ex, x: Any) -> Any:
    """``x != 0`` (nothing for a bool tensor; a literal becomes 1.0 / 0.0)."""
    if not isinstance(x, Value):
        return float(bool(x))
    return x if is_bool(x) else _ne(ex, x, 0.0)


def _gt(ex, a: Any, b: Any) -> Value:
    if not isinstance(b, Value):
        return _threshold(ex, a, b)
    if not isinstance(a, Value):  # s > b  <=>  -b > -s
        return _threshold(ex, ex.unary("neg", b), -float(a))
    return _threshold(ex, ex.binary("sub", a, b), 0.0)


def _ne(ex, a: Any, b: Any) -> Value:
    if isinstance(b, Value) and not isinstance(a, Value):
        a, b = b, a
    if is_bool(a) and not isinstance(b, Value) and b in (0, 1):
        return a if b == 0 else _not(ex, a)
    if is_bool(a) and is_bool(b):
        return _flag(ex.unary("abs", ex.binary("sub", a, b)))
    diff = a if (not isinstance(b, Value) and b == 0) else ex.binary("sub", a, b)
    return _threshold(ex, ex.unary("abs", diff), 0.0)


def _eq(ex, a: Any, b: Any) -> Value:
    return _not(ex, _ne(ex, a, b))


def _logical(op: str) -> Callable:
    def fn(ex, a: Any, b: Any) -> Value:
        a, b = as_bool(ex, a), as_bool(ex, b)
        if op == "and":
            return _flag(ex.binary("mul", a, b))
        if op == "or":
            return _flag(ex.binary("maximum", a, b))
        return _ne(ex, a, b)
    return fn


def _mask(ex, c: Value, keep: Any) -> Any:
    """``x * c`` for a branch ``x`` (literal or tensor); a zero literal stays 0."""
    if not isinstance(keep, Value):
        return 0.0 if keep == 0 else ex.binary("mul", c, float(keep))
    return ex.binary("mul", keep, c)


def _where(ex, c: Any, a: Any, b: Any) -> Any:
    if not isinstance(c, Value):
        return a if c else b
    c = as_bool(ex, c)
    for inf_branch, other, taken in ((b, a, None), (a, b, c)):
        if not isinstance(inf_branch, Value) and math.isinf(inf_branch):
            off = taken if taken is not None else _not(ex, c)  # 1 where the infinite branch is taken
            # (off * 1e30)^2 overflows to exactly +inf where off, stays 0 elsewhere
            penalty = ex.unary("square", ex.binary("mul", off, 1e30))
            how = "add" if inf_branch > 0 else "sub"
            if isinstance(other, Value):
                return ex.binary(how, other, penalty)
            if other == 0:
                return penalty if inf_branch > 0 else ex.unary("neg", penalty)
            return ex.binary(how, ex.binary("mul", _not(ex, off), float(other)), penalty)
    terms = [t for t in (_mask(ex, c, a), _mask(ex, _not(ex, c), b)) if isinstance(t, Value) or t != 0]
    if not terms:
        return 0.0
    return terms[0] if len(terms) == 1 else ex.binary("add", terms[0], terms[1])


#: expression function → expansion ``fn(expander, *args)``
EXPANSIONS: dict[str, Callable] = {
    "gt": _gt, "lt": lambda ex, a, b: _gt(ex, b, a),
    "le": lambda ex, a, b: _not(ex, _gt(ex, a, b)), "ge": lambda ex, a, b: _not(ex, _gt(ex, b, a)),
    "ne": _ne, "eq": _eq,
    "logical_and": _logical("and"), "logical_or": _logical("or"), "logical_xor": _logical("xor"),
    "logical_not": lambda ex, a: _not(ex, as_bool(ex, a)),
    "where": _where,
}
