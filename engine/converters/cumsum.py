"""Cumulative sums.

ATen → pnnx: ``aten.cumsum.default`` (any dtype: a bool or integer tensor is summed as its 0/1 or
integer values, exact up to 2^24) → ``torch.cumsum`` (``dim``).

pnnx → ncnn: ``CumulativeSum`` (``axis``: the dim as an ncnn axis of the batch-less blob); along
the batch axis (one sample) the sum is the tensor itself.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import batch_dim, ncnn_axis, normalize_dim


@aten_converter("aten.cumsum.default")
def cumsum(ctx, op):
    x = op.inputs[0]
    if x.shape is None:
        ctx.unsupported(f"cumsum of {x.name} of unknown rank")
    return ctx.emit("torch.cumsum", [x], params={"dim": normalize_dim(op.params["dim"], max(len(x.shape), 1))})


@ncnn_rule("torch.cumsum")
def cumulative_sum(ctx, op):
    x = op.inputs[0]
    if not x.shape or op.params["dim"] == batch_dim(x):
        return x
    return ctx.layer("CumulativeSum", [x], axis=ncnn_axis(x, op.params["dim"]))
