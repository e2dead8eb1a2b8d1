"""Comparisons of run-time tensors.

ATen → pnnx: ``aten.{eq,ne,lt,le,gt,ge}.{Tensor,Scalar}`` → ``pnnx.Expression`` ``eq(@0,@1)``,
``gt(@0,0.5)``... (comparisons of constants are folded before lowering).

pnnx → ncnn: the expression's layers (:mod:`engine.converters._logic_layers`): a bool result is a
blob of exact 0.0 / 1.0 values, made by ``Threshold`` (``x > t``) on a difference.
"""
from __future__ import annotations

from ..convert.registry import aten_converter
from .binary import expression_of

#: overload → expression function
COMPARISONS = {f"aten.{n}.{o}": n for n in ("eq", "ne", "lt", "le", "gt", "ge") for o in ("Tensor", "Scalar")}


@aten_converter(*COMPARISONS)
def comparison(ctx, op):
    return expression_of(ctx, op, COMPARISONS[op.type], "self", "other")
