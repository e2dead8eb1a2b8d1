"""Diagonals: ``torch.diag`` (a vector to a diagonal matrix, a matrix to its diagonal, with an
offset) and ``Tensor.diagonal`` of a matrix.

ATen → pnnx: ``aten.diag.default`` → ``torch.diag`` (``diagonal``); ``aten.diagonal.default`` /
``aten.diagonal_copy.default`` → ``torch.diagonal`` (``offset, dim1, dim2``).

pnnx → ncnn: ``Diag`` (``diagonal``) on a 1-D blob (→ 2-D) or a 2-D blob (→ 1-D). A
``diagonal`` must take the two axes of a 2-D ncnn blob (a batched ``(1, H, W)`` tensor's last
two dims, say); ``dim1 > dim2`` is the diagonal of the transpose, i.e. the opposite offset.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_axis, ncnn_rank


def _int(ctx, op, key: str, default: int) -> int:
    v = op.params.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        ctx.unsupported(f"{key}={v!r} is not a constant integer")
    return v


@aten_converter("aten.diag.default")
def diag(ctx, op):
    return ctx.emit("torch.diag", [op.inputs[0]], params={"diagonal": _int(ctx, op, "diagonal", 0)})


@aten_converter("aten.diagonal.default", "aten.diagonal_copy.default")
def diagonal(ctx, op):
    params = {"offset": _int(ctx, op, "offset", 0), "dim1": _int(ctx, op, "dim1", 0), "dim2": _int(ctx, op, "dim2", 1)}
    return ctx.emit("torch.diagonal", [op.inputs[0]], params=params)


def _check_diag(op, ctx):
    x = op.inputs[0]
    rank = ncnn_rank(x)
    if op.type == "torch.diag" and rank not in (1, 2):
        return f"unsupported: diag of {x.name} {x.shape}: ncnn's Diag takes a 1-D or 2-D blob"
    if op.type == "torch.diagonal":
        axes = sorted(ncnn_axis(x, op.params[k]) for k in ("dim1", "dim2"))
        if rank != 2 or axes != [0, 1]:
            return f"unsupported: diagonal of {x.name} {x.shape} over dims other than the two axes of a 2-D ncnn blob"
    return None


@ncnn_rule("torch.diag", "torch.diagonal", validator=_check_diag)
def diag_layer(ctx, op):
    x = op.inputs[0]
    if op.type == "torch.diag":
        return ctx.layer("Diag", [x], diagonal=op.params["diagonal"])
    flipped = ncnn_axis(x, op.params["dim1"]) > ncnn_axis(x, op.params["dim2"])
    return ctx.layer("Diag", [x], diagonal=-op.params["offset"] if flipped else op.params["offset"])
