"""Shrinkage activations: hardshrink and softshrink.

ATen → pnnx: ``aten.hardshrink.default`` → ``F.hardshrink(lambd)``; ``aten.softshrink.default``
→ ``F.softshrink(lambd)``. Core ATen spells them as ``where`` chains, which the
``recompose_activations`` pass turns back into these ops.

pnnx → ncnn: ``Shrink`` (``y = x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else
0): ``bias = 0`` for hardshrink, ``bias = lambd`` for softshrink.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule

_PNNX = {"aten.hardshrink.default": "F.hardshrink", "aten.softshrink.default": "F.softshrink"}


@aten_converter(*_PNNX)
def shrink(ctx, op):
    lambd = op.params.get("lambd", 0.5)
    if isinstance(lambd, bool) or not isinstance(lambd, (int, float)):
        ctx.unsupported(f"{op.type.split('.')[1]} lambd={lambd!r} is not a constant number")
    return ctx.emit(_PNNX[op.type], [op.inputs[0]], params={"lambd": float(lambd)})


@ncnn_rule("F.hardshrink", "F.softshrink")
def shrink_layer(ctx, op):
    lambd = float(op.params["lambd"])
    return ctx.layer("Shrink", [op.inputs[0]], lambd=lambd, bias=lambd if op.type == "F.softshrink" else 0.0)
