"""Reductions used by CNNs: mean, sum, amax/amin, max/min over dims, prod.

ATen → pnnx: ``aten.mean.dim`` / ``aten.mean.default`` → ``torch.mean``;
``aten.sum.dim_IntList`` / ``aten.sum.default`` → ``torch.sum``; ``aten.amax.default`` /
``aten.amin.default`` → ``torch.amax`` / ``torch.amin``; ``aten.max.dim`` / ``aten.min.dim``
(indices unused) → ``torch.max`` / ``torch.min``; ``aten.prod.dim_int`` → ``torch.prod``
(params ``dim`` — a list, None for all — and ``keepdim``).

pnnx → ncnn: a mean (or max) over both spatial axes of a (C, H, W) blob is a ``Pooling``: global
(1-D result) without keepdim, adaptive 1×1 (3-D result) with it — faster than ``Reduction``.
Anything else is a ``Reduction`` with the axes remapped to ncnn's batch-less axes
(``fixbug0=1``: axes without the batch). Reducing the batch axis (always 1 in ncnn) is a no-op.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import is_batched, ncnn_shape, normalize_dim
from ..ncnn.enums import PoolingType, ReductionOp
from .shape import intermediate, reshape_to

_PNNX = {"mean": "torch.mean", "sum": "torch.sum", "amax": "torch.amax", "amin": "torch.amin",
         "max": "torch.max", "min": "torch.min", "prod": "torch.prod"}
_OPERATION = {"torch.mean": ReductionOp.MEAN, "torch.sum": ReductionOp.SUM, "torch.amax": ReductionOp.MAX,
              "torch.amin": ReductionOp.MIN, "torch.max": ReductionOp.MAX, "torch.min": ReductionOp.MIN,
              "torch.prod": ReductionOp.PROD}


def _float_result(op, ctx):
    o = op.outputs[0]
    if o.dtype not in (None, "f32", "f16", "bf16", "f64"):
        return f"unsupported: reduction producing {o.dtype} (ncnn reduces float blobs)"
    if len(op.outputs) > 1 and op.outputs[1].consumers:
        return "unsupported: the indices of max/min over a dim are used (ncnn Reduction returns values only)"
    return None


def _reduction(kind: str):
    def convert(ctx, op):
        dim = op.params.get("dim")
        if dim is not None and not isinstance(dim, list):
            dim = [dim]
        if dim == [] and kind in ("amax", "amin"):
            dim = None
        y = ctx.emit(_PNNX[kind], [op.inputs[0]], params={"dim": dim, "keepdim": bool(op.params.get("keepdim", False))})
        return [y] + [None] * (len(op.outputs) - 1)

    return convert


aten_converter("aten.mean.dim", "aten.mean.default", validator=_float_result)(_reduction("mean"))
aten_converter("aten.sum.dim_IntList", "aten.sum.default", validator=_float_result)(_reduction("sum"))
aten_converter("aten.amax.default", validator=_float_result)(_reduction("amax"))
aten_converter("aten.amin.default", validator=_float_result)(_reduction("amin"))
aten_converter("aten.max.dim", validator=_float_result)(_reduction("max"))
aten_converter("aten.min.dim", validator=_float_result)(_reduction("min"))
aten_converter("aten.prod.dim_int", validator=_float_result)(_reduction("prod"))


@ncnn_rule(*_OPERATION)
def reduce_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    src = ncnn_shape(x)
    if src is None or x.shape is None:
        ctx.unsupported("reduction of a tensor of unknown shape")
    rank = len(x.shape)
    dims = range(rank) if op.params.get("dim") is None else [normalize_dim(d, max(rank, 1)) for d in op.params["dim"]]
    offset = 1 if is_batched(x) else 0
    axes = sorted({d - offset for d in dims if d >= offset})
    keepdim = bool(op.params.get("keepdim"))
    want = ncnn_shape(out)
    if not axes:  # only the batch axis (size 1)
        return reshape_to(ctx, x, want, final=True)
    operation = _OPERATION[op.type]
    if len(src) == 3 and axes == [1, 2] and operation in (ReductionOp.MEAN, ReductionOp.MAX):
        kind = int(PoolingType.AVG if operation == ReductionOp.MEAN else PoolingType.MAX)
        if keepdim:
            y = ctx.layer("Pooling", [x], pooling_type=kind, adaptive_pooling=1, out_w=1, out_h=1)
            got = [src[0], 1, 1]
        else:
            y = ctx.layer("Pooling", [x], pooling_type=kind, global_pooling=1)
            got = [src[0]]
    else:
        y = ctx.layer("Reduction", [x], operation=int(operation), reduce_all=0, axes=axes,
                      keepdims=int(keepdim), coeff=1.0, fixbug0=1)
        got = [1 if i in axes else s for i, s in enumerate(src) if keepdim or i not in axes] or [1]
    if got == (want or [1]):
        return y
    return reshape_to(ctx, intermediate(y, got), want, final=True)
