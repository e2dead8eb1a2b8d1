"""Pooling: max/avg pool 1-D, 2-D and 3-D, adaptive avg/max pool 1-D, 2-D and 3-D.

ATen → pnnx (``N`` = 1, 2, 3):

* ``aten.max_poolNd.default``, ``aten.max_poolNd_with_indices.default`` (indices unused) →
  ``F.max_poolNd`` (``kernel_size, stride, padding, dilation, ceil_mode, return_indices``);
* ``aten.avg_poolNd.default`` → ``F.avg_poolNd`` (``kernel_size, stride, padding, ceil_mode,
  count_include_pad, divisor_override``);
* ``aten.adaptive_avg_poolNd.default``, ``aten._adaptive_avg_pool2d|3d.default`` →
  ``F.adaptive_avg_poolNd``; ``aten.adaptive_max_poolNd.default`` (indices unused) →
  ``F.adaptive_max_poolNd`` (``output_size``).

pnnx → ncnn: ``Pooling1D`` / ``Pooling`` (2-D) / ``Pooling3D`` (on a 4-D (C, D, H, W) blob). Where PyTorch's output size differs from what
ncnn's "full padding" (ceil) mode computes — the last window may not start in the right
padding in PyTorch — the rule uses valid padding with the right/bottom pad that gives exactly
PyTorch's windows; an average that counts padding and has windows past the padded input gets
an explicit zero ``Padding`` first. ``divisor_override`` becomes a count-including average
times ``kernel area / divisor``. ncnn pooling has no dilation: dilated max pooling is refused.
Adaptive pooling to 1×1 is a ``Pooling`` with ``adaptive_pooling`` 1×1 (3-D result, the shape
PyTorch has); the ``eliminate_noop_reshape`` pass turns it into global pooling when a flatten
follows.
"""
from __future__ import annotations

import logging
import math

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_shape
from ..ncnn.enums import BinaryOpType, PaddingType, PoolingType, PoolPadMode
from ..records import record
from ._args import int_tuple
from .shape import intermediate

log = logging.getLogger(__name__)


def _unused_indices(op, ctx):
    if len(op.outputs) > 1 and op.outputs[1].consumers:
        return "unsupported: the pooling indices are used (ncnn pooling does not return indices)"
    return None


def _pool_params(op, n: int) -> dict:
    k = list(int_tuple(op.params["kernel_size"], n, "kernel_size", at_least=1))
    s = list(int_tuple(op.params.get("stride") or k, n, "stride", at_least=1))
    p = list(int_tuple(op.params.get("padding", 0), n, "padding", at_least=0))
    return {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": bool(op.params.get("ceil_mode", False))}


def _max_pool(n: int):
    def convert(ctx, op):
        params = _pool_params(op, n)
        d = list(int_tuple(op.params.get("dilation", 1), n, "dilation", at_least=1))
        params.update(dilation=d, return_indices=False)
        y = ctx.emit(f"F.max_pool{n}d", [op.inputs[0]], params=params)
        return [y] + [None] * (len(op.outputs) - 1)

    return convert


def _avg_pool(n: int):
    def convert(ctx, op):
        params = _pool_params(op, n)
        params.update(count_include_pad=bool(op.params.get("count_include_pad", True)),
                      divisor_override=op.params.get("divisor_override"))
        return ctx.emit(f"F.avg_pool{n}d", [op.inputs[0]], params=params)

    return convert


def _adaptive(kind: str, n: int):
    def convert(ctx, op):
        size = list(op.params["output_size"])
        out = op.outputs[0].shape or []
        size = [s if isinstance(s, int) else (out[len(out) - n + i] if out else None) for i, s in enumerate(size)]
        y = ctx.emit(f"F.adaptive_{kind}_pool{n}d", [op.inputs[0]], params={"output_size": size})
        return [y] + [None] * (len(op.outputs) - 1)

    return convert


for _n in (1, 2, 3):
    aten_converter(f"aten.max_pool{_n}d.default", f"aten.max_pool{_n}d_with_indices.default",
                   validator=_unused_indices)(_max_pool(_n))
    aten_converter(f"aten.avg_pool{_n}d.default")(_avg_pool(_n))
    aten_converter(f"aten.adaptive_max_pool{_n}d.default", validator=_unused_indices)(_adaptive("max", _n))
aten_converter("aten.adaptive_avg_pool1d.default")(_adaptive("avg", 1))
aten_converter("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")(_adaptive("avg", 2))
aten_converter("aten.adaptive_avg_pool3d.default", "aten._adaptive_avg_pool3d.default")(_adaptive("avg", 3))


# ----------------------------------------------------------------------------- pnnx → ncnn

@record
class _Axis:
    """One spatial axis of a pooling: what ncnn needs to reproduce PyTorch's windows."""

    kernel: int
    stride: int
    pad: int  #: left/top pad
    pad_end: int  #: right/bottom pad given to ncnn (valid mode)
    beyond: int  #: windows reach this far past the padded input (ceil mode)


def _axis(size, kernel: int, stride: int, pad: int, ceil_mode: bool) -> _Axis | None:
    """PyTorch's output size for this axis and the ncnn end pad giving exactly those windows
    (None when the size is dynamic)."""
    if not isinstance(size, int):
        return None
    span = size + 2 * pad - kernel
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1  # PyTorch: the last window must start inside the input or the left padding
    lo = (out - 1) * stride + kernel - size - pad  # smallest end pad giving `out` windows
    pad_end = min(max(pad, lo, 0), lo + stride - 1)
    return _Axis(kernel, stride, pad, pad_end, max(0, lo - pad))


def _spatial(op) -> int:
    return int(op.type[-2])  # F.max_pool1d ... F.adaptive_avg_pool3d


#: per spatial rank: the ncnn layer and the blob it expects
_LAYER = {1: ("Pooling1D", "(C, L)"), 2: ("Pooling", "(C, H, W)"), 3: ("Pooling3D", "(C, D, H, W)")}


def _check_rank(op, ctx):
    n = _spatial(op)
    rank = len(ncnn_shape(op.inputs[0]) or [])
    if rank != n + 1:
        return f"unsupported: {op.type} of a {rank}-D ncnn blob (expects {_LAYER[n][1]})"
    return None


def _check_pool(op, ctx):
    why = _check_rank(op, ctx)
    if why:
        return why
    d = op.params.get("dilation")
    if d is not None and any(v != 1 for v in d):
        return f"unsupported: max pooling with dilation {list(d)} (ncnn Pooling has no dilation)"
    return None


#: ncnn param names of the axes, outermost first (d, h, w): kernel, stride, pads before/after
_AXIS_NAMES = (("kernel_d", "stride_d", "pad_front", "pad_behind"), ("kernel_h", "stride_h", "pad_top", "pad_bottom"),
               ("kernel_w", "stride_w", "pad_left", "pad_right"))


def _names(n: int):
    """ncnn param names of the last ``n`` axes, outermost first (2-D: h then w)."""
    return _AXIS_NAMES[-n:]


@ncnn_rule(*(f"F.{kind}_pool{n}d" for kind in ("max", "avg") for n in (1, 2, 3)), validator=_check_pool)
def pool_ncnn(ctx, op):
    x = op.inputs[0]
    n = _spatial(op)
    layer = _LAYER[n][0]
    is_avg = "avg" in op.type
    src = ncnn_shape(x)
    p = op.params
    axes = [_axis(size, k, s, pad, p["ceil_mode"])
            for size, k, s, pad in zip(src[-n:], p["kernel_size"], p["stride"], p["padding"])]
    params = {"pooling_type": int(PoolingType.AVG if is_avg else PoolingType.MAX)}
    include_pad = is_avg and (p.get("count_include_pad") or p.get("divisor_override"))
    if any(a is None for a in axes):  # dynamic spatial size: ncnn's own ceil/floor rule
        if p["ceil_mode"]:
            ctx.warn("ceil_mode pooling on a dynamic size: ncnn may add a last window PyTorch drops")
        for names, k, s, pad in zip(_names(n), p["kernel_size"], p["stride"], p["padding"]):
            params.update({names[0]: k, names[1]: s, names[2]: pad, names[3]: pad})
        params["pad_mode"] = int(PoolPadMode.FULL if p["ceil_mode"] else PoolPadMode.VALID)
        params["avgpool_count_include_pad"] = int(bool(include_pad))
        return _divide(ctx, op, ctx.layer(layer, [x], **params))
    if p.get("divisor_override") and any(a.beyond for a in axes):
        ctx.unsupported("divisor_override with ceil_mode windows past the padded input")
    if include_pad and any(a.beyond for a in axes):
        # count padding but not the ceil-mode overhang: pad explicitly, then exclude the rest
        x = _zero_pad(ctx, x, axes, src)
        axes = [_Axis(a.kernel, a.stride, 0, a.pad_end - a.pad, 0) for a in axes]
        include_pad = False
    for names, a in zip(_names(n), axes):
        params.update({names[0]: a.kernel, names[1]: a.stride, names[2]: a.pad, names[3]: a.pad_end})
    params["pad_mode"] = int(PoolPadMode.VALID)
    if is_avg:
        params["avgpool_count_include_pad"] = int(bool(include_pad))
    return _divide(ctx, op, ctx.layer(layer, [x], **params))


def _divide(ctx, op, y):
    """Apply ``divisor_override``: ncnn averaged over the whole window; rescale to the divisor."""
    div = op.params.get("divisor_override")
    if not div:
        return y
    area = math.prod(op.params["kernel_size"])
    intermediate(y, ncnn_shape(op.outputs[0]))
    return ctx.layer("BinaryOp", [y], op_type=int(BinaryOpType.MUL), with_scalar=1, b=float(area) / float(div))


#: ncnn Padding's sides of the axes, outermost first (d, h, w)
_PAD_SIDES = (("front", "behind"), ("top", "bottom"), ("left", "right"))


def _zero_pad(ctx, x, axes: list[_Axis], src: list):
    sides = {}
    padded = list(src)
    for (before, after), a in zip(_PAD_SIDES[-len(axes):], axes):
        sides.update({before: a.pad, after: a.pad})
    for i, a in enumerate(axes):
        padded[len(src) - len(axes) + i] += 2 * a.pad
    y = ctx.layer("Padding", [x], type=int(PaddingType.CONSTANT), value=0.0, **sides)
    return intermediate(y, padded)


@ncnn_rule(*(f"F.adaptive_{kind}_pool{n}d" for kind in ("max", "avg") for n in (1, 2, 3)), validator=_check_rank)
def adaptive_pool_ncnn(ctx, op):
    n = _spatial(op)
    size = [(-233 if s is None else s) for s in op.params["output_size"]]
    kind = PoolingType.AVG if "avg" in op.type else PoolingType.MAX
    params = {"pooling_type": int(kind), "adaptive_pooling": 1}
    params.update(zip(("out_d", "out_h", "out_w")[-n:], size))
    return ctx.layer(_LAYER[n][0], [op.inputs[0]], **params)
