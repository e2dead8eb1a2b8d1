"""Elementwise composites ``torch.export`` keeps whole in the training dialect (core ATen spells
most of them out): each is one ``pnnx.Expression`` of the operations that define it, lowered to
ncnn like any other expression (:mod:`engine.converters.binary`).

ATen → pnnx:

* ``addcmul(self, t1, t2, value)`` → ``self + t1 * t2 * value``; ``addcdiv`` → ``self + t1 / t2 * value``;
* ``logaddexp(a, b)`` → ncnn's ``LOGADDEXP``;
* ``deg2rad``/``rad2deg`` → a product with π/180 or 180/π; ``exp2`` → ``exp(x · ln 2)``;
  ``erfc`` → ``1 - erf(x)``;
* ``threshold(self, threshold, value)`` → ``where(x > threshold, x, value)``.

Not here: ``sinc`` and ``xlogy``, whose exact forms divide by, or take the log of, zero on the
branch ``where`` discards; ncnn evaluates both branches, and the NaN would survive. ``logit``,
``lerp``, ``frac`` and ``hypot`` are the worked examples of the converter scaffold (``pt2ncnn
scaffold``) and of Studio's plug-in loop, whose tests need them unconverted; a plug-in converts
them.
"""
from __future__ import annotations

import math

from ..convert.registry import aten_converter
from ._expression import ExpressionBuilder
from .binary import _emit_expression, _scalar_param, _term


@aten_converter("aten.addcmul.default", "aten.addcdiv.default")
def add_product(ctx, op):
    e = ExpressionBuilder()
    s, a, b = (_term(ctx, op, e, n, [m for m in ("self", "tensor1", "tensor2") if m != n])
               for n in ("self", "tensor1", "tensor2"))
    part = e.call("mul" if op.type == "aten.addcmul.default" else "div", a, b)
    value = _scalar_param(ctx, op, "value")
    if value != 1:
        part = e.call("mul", part, e.literal(value))
    return _emit_expression(ctx, op, e, e.call("add", s, part))


@aten_converter("aten.logaddexp.default")
def logaddexp(ctx, op):
    e = ExpressionBuilder()
    a, b = _term(ctx, op, e, "self", "other"), _term(ctx, op, e, "other", "self")
    return _emit_expression(ctx, op, e, e.call("logaddexp", a, b))


_UNARY = {
    "aten.deg2rad.default": lambda e, x: e.call("mul", x, e.literal(math.pi / 180)),
    "aten.rad2deg.default": lambda e, x: e.call("mul", x, e.literal(180 / math.pi)),
    "aten.exp2.default": lambda e, x: e.call("exp", e.call("mul", x, e.literal(math.log(2.0)))),
    "aten.erfc.default": lambda e, x: e.call("sub", e.literal(1.0), e.call("erf", x)),
}


@aten_converter(*_UNARY)
def unary_composite(ctx, op):
    e = ExpressionBuilder()
    return _emit_expression(ctx, op, e, _UNARY[op.type](e, _term(ctx, op, e, "self", None)))


@aten_converter("aten.threshold.default")
def threshold(ctx, op):
    e = ExpressionBuilder()
    x = _term(ctx, op, e, "self", None)
    th, value = _term(ctx, op, e, "threshold", None), _term(ctx, op, e, "value", None)
    return _emit_expression(ctx, op, e, e.call("where", e.call("gt", x, th), x, value))
