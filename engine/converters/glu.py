"""Gated linear unit: ``glu(x, dim) = a * sigmoid(b)`` with ``a, b`` the two halves of ``x``
along ``dim``.

ATen → pnnx: ``aten.glu.default`` → ``F.glu(dim)``. Core ATen spells it as two slices, a
sigmoid and a mul, which the ``recompose_activations`` pass turns back into this op.

pnnx → ncnn: ``GLU`` with ``axis`` the ncnn axis of ``dim`` (outermost first); ``dim`` must not
be the batch axis and must have an even, static size.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_axis


@aten_converter("aten.glu.default")
def glu(ctx, op):
    return ctx.emit("F.glu", [op.inputs[0]], params={"dim": int(op.params.get("dim", -1))})


def _check_dim(op, ctx):
    x = op.inputs[0]
    if x.shape is None or not x.shape:
        return f"unsupported: glu of {x.name} of unknown or scalar shape"
    size = x.shape[op.params["dim"] % len(x.shape)]
    if not isinstance(size, int) or size % 2:
        return f"unsupported: glu along a dim of size {size} (needs an even, static size)"
    return None


@ncnn_rule("F.glu", validator=_check_dim)
def glu_layer(ctx, op):
    x = op.inputs[0]
    return ctx.layer("GLU", [x], axis=ncnn_axis(x, op.params["dim"]))
