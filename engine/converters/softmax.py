"""Softmax and log-softmax.

ATen → pnnx: ``aten.softmax.int`` / ``aten._softmax.default`` → ``F.softmax(dim)``;
``aten.log_softmax.int`` / ``aten._log_softmax.default`` → ``F.log_softmax(dim)``.

pnnx → ncnn (as pnnx's ``F_softmax``/``F_log_softmax``): ``Softmax`` with ``axis`` = the dim
remapped to ncnn's batch-less axes and ``fixbug0=1``; log-softmax is ``Softmax`` followed by
``UnaryOp`` log. Softmax over the batch axis is refused.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_axis
from ..ncnn.enums import UnaryOpType

_PNNX = {"aten.softmax.int": "F.softmax", "aten._softmax.default": "F.softmax",
         "aten.log_softmax.int": "F.log_softmax", "aten._log_softmax.default": "F.log_softmax"}


def _check(op, ctx):
    if not isinstance(op.params.get("dim"), int) or isinstance(op.params.get("dim"), bool):
        return f"unsupported: dim={op.params.get('dim')!r} is not a constant int"
    if op.params.get("half_to_float"):
        return "unsupported: half_to_float=True"
    return None


@aten_converter(*_PNNX, validator=_check)
def softmax(ctx, op):
    return ctx.emit(_PNNX[op.type], [op.inputs[0]], params={"dim": op.params["dim"]})


def _softmax_layer(ctx, op):
    x = op.inputs[0]
    return ctx.layer("Softmax", [x], axis=ncnn_axis(x, int(op.params["dim"])), fixbug0=1)


@ncnn_rule("F.softmax")
def softmax_layer(ctx, op):
    return _softmax_layer(ctx, op)


@ncnn_rule("F.log_softmax")
def log_softmax_layer(ctx, op):
    return ctx.layer("UnaryOp", [_softmax_layer(ctx, op)], op_type=UnaryOpType.LOG)
