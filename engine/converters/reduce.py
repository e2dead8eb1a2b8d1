"""Reductions: mean, sum, amax/amin, max/min (over dims or all), prod, logsumexp; var/std (and
var_mean/std_mean); vector norms (L1, L2).

ATen → pnnx: ``aten.mean.dim`` / ``aten.mean.default`` → ``torch.mean``;
``aten.sum.dim_IntList`` / ``aten.sum.default`` → ``torch.sum``; ``aten.amax.default`` /
``aten.amin.default`` and the full ``aten.max.default`` / ``aten.min.default`` → ``torch.amax``
/ ``torch.amin``; ``aten.max.dim`` / ``aten.min.dim`` (indices unused) → ``torch.max`` /
``torch.min``; ``aten.prod.dim_int`` / ``aten.prod.default`` → ``torch.prod`` (params ``dim`` —
a list, None for all — and ``keepdim``); ``aten.logsumexp.default`` → ``m = torch.amax``
(keepdim) → ``pnnx.Expression`` ``sub(x, m)`` → ``torch.logsumexp`` → ``add(·, m)``, PyTorch's
own stable form (ncnn's LogSumExp sums ``exp(x)`` directly, which overflows above 88; an
infinite maximum gives NaN here where PyTorch guards it) — a logsumexp of ``x - amax(x)`` (that
form written out) is one ``torch.logsumexp``; ``aten.var``/``aten.std``
(``.correction``, ``.dim``, ``.default``) and ``aten.var_mean``/``aten.std_mean`` (``.correction``,
``.dim``) decompose into ``torch.mean`` (keepdim) → ``pnnx.Expression`` ``square(sub(x, m))`` →
``torch.mean`` → ``mul(v, n/(n-correction))`` (→ ``sqrt`` for std); the count of reduced elements
must be static when the correction is not 0. ``aten.linalg_vector_norm.default`` and
``aten.norm.ScalarOpt_dim`` / ``aten.norm.Scalar`` of order 1 or 2 (``F.normalize``, Swin V2's
cosine attention) → ``torch.norm`` (params ``dim``, ``keepdim``, ``p``) → ncnn ``Reduction`` L1 / L2.

pnnx → ncnn: a mean (or max) over both spatial axes of a (C, H, W) blob is a ``Pooling``: global
(1-D result) without keepdim, adaptive 1×1 (3-D result) with it — faster than ``Reduction``.
Anything else is a ``Reduction`` with the axes remapped to ncnn's batch-less axes
(``fixbug0=1``: axes without the batch). Reducing the batch axis (always 1 in ncnn) is a no-op.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_axes, ncnn_shape, normalize_dim
from ..ncnn.enums import PoolingType, ReductionOp, UnaryOpType
from .shape import intermediate, reshape_to

_PNNX = {"mean": "torch.mean", "sum": "torch.sum", "amax": "torch.amax", "amin": "torch.amin",
         "max": "torch.max", "min": "torch.min", "prod": "torch.prod"}
_OPERATION = {"torch.mean": ReductionOp.MEAN, "torch.sum": ReductionOp.SUM, "torch.amax": ReductionOp.MAX,
              "torch.amin": ReductionOp.MIN, "torch.max": ReductionOp.MAX, "torch.min": ReductionOp.MIN,
              "torch.prod": ReductionOp.PROD, "torch.logsumexp": ReductionOp.LOGSUMEXP}
_NORMS = {1.0: ReductionOp.L1, 2.0: ReductionOp.L2}


def _float_result(op, ctx):
    o = op.outputs[0]
    # integer and bool tensors are blobs of their values (exact up to 2^24)
    if o.dtype not in (None, "f32", "f16", "bf16", "f64", "i64", "i32", "i16", "i8", "u8", "bool"):
        return f"unsupported: reduction producing {o.dtype} (ncnn reduces real-valued blobs)"
    if len(op.outputs) > 1 and op.outputs[1].consumers:
        return "unsupported: the indices of max/min over a dim are used (ncnn Reduction returns values only)"
    return None


def _reduction(kind: str):
    def convert(ctx, op):
        dim = op.params.get("dim")
        if dim is not None and not isinstance(dim, list):
            dim = [dim]
        if dim == []:  # sum/mean over dim=[] (core ATen's full reduction), amax/amin(): every dim
            dim = None
        y = ctx.emit(_PNNX[kind], [op.inputs[0]], params={"dim": dim, "keepdim": bool(op.params.get("keepdim", False))})
        return [y] + [None] * (len(op.outputs) - 1)

    return convert


aten_converter("aten.mean.dim", "aten.mean.default", validator=_float_result)(_reduction("mean"))
aten_converter("aten.sum.dim_IntList", "aten.sum.default", validator=_float_result)(_reduction("sum"))
aten_converter("aten.amax.default", validator=_float_result)(_reduction("amax"))
aten_converter("aten.amin.default", validator=_float_result)(_reduction("amin"))
aten_converter("aten.max.default", validator=_float_result)(_reduction("amax"))
aten_converter("aten.min.default", validator=_float_result)(_reduction("amin"))
aten_converter("aten.max.dim", validator=_float_result)(_reduction("max"))
aten_converter("aten.min.dim", validator=_float_result)(_reduction("min"))
aten_converter("aten.prod.dim_int", "aten.prod.default", validator=_float_result)(_reduction("prod"))


def _reduced(ctx, op, what: str):
    """``(x, dims, keepdim, kept, reduced)`` of a reduction: the input, the dims it reduces, and
    the shapes with those dims kept as 1 / as requested (``keepdim``)."""
    x = op.inputs[0]
    if x.shape is None:
        ctx.unsupported(f"{what} of a tensor of unknown shape")
    rank = len(x.shape)
    dim = op.params.get("dim")
    dims = list(range(rank)) if dim is None or dim == [] else \
        [normalize_dim(d, max(rank, 1)) for d in (dim if isinstance(dim, list) else [dim])]
    keepdim = bool(op.params.get("keepdim", False))
    kept = [1 if i in dims else s for i, s in enumerate(x.shape)]
    return x, dims, keepdim, kept, kept if keepdim else [s for i, s in enumerate(x.shape) if i not in dims]


@aten_converter("aten.logsumexp.default", validator=_float_result)
def logsumexp(ctx, op):
    x, dims, keepdim, kept, reduced = _reduced(ctx, op, "logsumexp")
    if _shifted_by_its_max(x, dims):  # already x - amax(x): exp cannot overflow (the stable form, written out)
        return ctx.emit("torch.logsumexp", [x], params={"dim": dims, "keepdim": keepdim}, shape=reduced)
    m = ctx.emit("torch.amax", [x], params={"dim": dims, "keepdim": True}, shape=kept)
    shifted = ctx.emit("pnnx.Expression", [x, m], params={"expr": "sub(@0,@1)"}, shape=list(x.shape))
    s = ctx.emit("torch.logsumexp", [shifted], params={"dim": dims, "keepdim": keepdim}, shape=reduced)
    if not keepdim:
        m = ctx.emit("Tensor.reshape", [m], params={"shape": reduced}, shape=reduced)
    return ctx.emit("pnnx.Expression", [s, m], params={"expr": "add(@0,@1)"}, shape=reduced)


def _shifted_by_its_max(x, dims: list[int]) -> bool:
    """Whether ``x`` is ``y - amax(y, dims, keepdim=True)`` (every value ≤ 0 along ``dims``): the
    stable logsumexp written out (``m = y.amax(d, keepdim=True); (y - m).logsumexp(d) + m``, as
    the ``_pnnx.py`` of a converted logsumexp reads), whose inner logsumexp needs no shift."""
    sub = x.producer
    if sub is None or sub.type != "pnnx.Expression" or sub.params.get("expr") != "sub(@0,@1)" or len(sub.inputs) != 2:
        return False
    y, m = sub.inputs
    amax = m.producer
    if amax is None or amax.type != "torch.amax" or amax.inputs[0] is not y or not amax.params.get("keepdim"):
        return False
    rank = len(y.shape or [])
    reduced = amax.params.get("dim")
    reduced = list(range(rank)) if reduced is None else [normalize_dim(d, max(rank, 1)) for d in reduced]
    return sorted(reduced) == sorted(dims)


def _norm_order(op):
    p = op.params.get("ord", op.params.get("p"))
    return 2.0 if p is None else p


def _check_norm(op, ctx):
    p = _norm_order(op)
    if not isinstance(p, (int, float)) or float(p) not in _NORMS:
        return f"unsupported: vector norm of order {p!r} (ncnn's Reduction has L1 and L2)"
    return _float_result(op, ctx)


@aten_converter("aten.linalg_vector_norm.default", "aten.norm.ScalarOpt_dim", "aten.norm.Scalar",
                validator=_check_norm)
def vector_norm(ctx, op):
    dim = op.params.get("dim")
    if dim is not None and not isinstance(dim, list):
        dim = [dim]
    return ctx.emit("torch.norm", [op.inputs[0]], params={"dim": dim or None, "keepdim": bool(op.params.get("keepdim")),
                                                         "p": float(_norm_order(op))})


def _correction(op) -> float:
    if "correction" in op.params:
        c = op.params.get("correction")
        return 1.0 if c is None else float(c)
    return 1.0 if op.params.get("unbiased", True) else 0.0


def _moments(ctx, op, std: bool):
    x, dims, keepdim, kept, reduced = _reduced(ctx, op, "variance")
    n = 1
    for d in dims:
        n = n * x.shape[d] if isinstance(x.shape[d], int) and isinstance(n, int) else None
    correction = _correction(op)
    if correction and (n is None or n <= correction):
        ctx.unsupported(f"variance with correction {correction} over {n} elements")
    mean = ctx.emit("torch.mean", [x], params={"dim": dims, "keepdim": True}, shape=kept)
    sq = ctx.emit("pnnx.Expression", [x, mean], params={"expr": "square(sub(@0,@1))"}, shape=list(x.shape))
    v = ctx.emit("torch.mean", [sq], params={"dim": dims, "keepdim": keepdim}, shape=reduced)
    if correction:
        v = ctx.emit("pnnx.Expression", [v], params={"expr": f"mul(@0,{float(n) / (n - correction)!r})"},
                     shape=reduced)
    if std:
        v = ctx.emit("pnnx.Expression", [v], params={"expr": "sqrt(@0)"}, shape=reduced)
    if len(op.outputs) == 1:
        return v
    m = mean if keepdim else ctx.emit("Tensor.reshape", [mean], params={"shape": reduced}, shape=reduced)
    return [v, m]


def _check_moments(op, ctx):
    if _correction(op) and any(op.outputs[0].dtype == t for t in ("i64", "i32")):
        return "unsupported: variance of an integer tensor"
    return _float_result(op, ctx) if len(op.outputs) == 1 else None


@aten_converter("aten.var.correction", "aten.var.dim", "aten.var.default", "aten.var_mean.correction",
                "aten.var_mean.dim", validator=_check_moments)
def var(ctx, op):
    return _moments(ctx, op, std=False)


@aten_converter("aten.std.correction", "aten.std.dim", "aten.std.default", "aten.std_mean.correction",
                "aten.std_mean.dim", validator=_check_moments)
def std(ctx, op):
    return _moments(ctx, op, std=True)


@ncnn_rule(*_OPERATION, "torch.norm")
def reduce_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    src = ncnn_shape(x)
    if src is None or x.shape is None:
        ctx.unsupported("reduction of a tensor of unknown shape")
    rank = len(x.shape)
    dims = range(rank) if op.params.get("dim") is None else [normalize_dim(d, max(rank, 1)) for d in op.params["dim"]]
    axes = ncnn_axes(x, dims)  # the batch dim (size 1) needs no reducing
    keepdim = bool(op.params.get("keepdim"))
    want = ncnn_shape(out)
    operation = _NORMS[float(op.params["p"])] if op.type == "torch.norm" else _OPERATION[op.type]
    if not axes:  # only the batch axis (size 1): the element itself (its magnitude for a norm)
        if op.type == "torch.norm":
            x = intermediate(ctx.layer("UnaryOp", [x], op_type=int(UnaryOpType.ABS)), src)
        return reshape_to(ctx, x, want, final=True)
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
