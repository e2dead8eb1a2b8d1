"""Sliding-window (un)folding: ``F.unfold`` (im2col) and ``F.fold`` (col2im).

ATen → pnnx: ``aten.im2col.default`` → ``F.unfold``; ``aten.col2im.default`` → ``F.fold``
(``output_size`` for fold; ``kernel_size, dilation, padding, stride``). Core ATen spells them
with gathers, recognised here:

* im2col: ``index(x, [None, None, I, J])`` of an (N, C, H, W) tensor with constant windows
  ``I[u, i] = u·dh + i·sh`` (shape (kh, oh, 1, 1)) and ``J[v, j] = v·dw + j·sw`` (kw, ow) →
  ``F.unfold`` (no padding: core pads first) reshaped and permuted to the gather's
  (N, C, kh, oh, kw, ow) — the permute and view core ATen puts after it cancel against these;
* col2im: ``index_put(zeros, [None, None, I, J], values, accumulate=True)`` with the same
  windows → ``values`` permuted and reshaped back to (N, C·kh·kw, oh·ow), then ``F.fold``;
* a 1-D overlap-add (core ATen's ``istft``): ``index_put(zeros (..., L, T...), [..., idx],
  values (..., B·K, T...), accumulate=True)`` along one dim with ``idx`` the flattened windows
  ``unfold(arange(L), K, step)`` → ``values`` as (N, T·K, B) columns (the trailing dims ``T``,
  e.g. a complex value's real and imaginary parts, as channels), ``F.fold`` to (N, T, 1, L')
  with a 1×K kernel and stride 1×step, padded with zeros to ``L`` when the windows stop short.

pnnx → ncnn: ``Unfold`` on a (C, H, W) blob → (C·kh·kw, L); ``Fold`` on a (C·kh·kw, L) blob →
(C, H, W) — PyTorch's layouts, pads and sums of overlaps alike.
"""
from __future__ import annotations


import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_axis, ncnn_rank
from ..records import record
from ._args import int_tuple

_GEOMETRY = (("kernel_size", 1), ("dilation", 1), ("padding", 0), ("stride", 1))


def _geometry(op) -> dict:
    return {k: list(int_tuple(op.params[k], 2, k, at_least=low)) for k, low in _GEOMETRY}


@aten_converter("aten.im2col.default")
def im2col(ctx, op):
    return ctx.emit("F.unfold", [op.inputs[0]], params=_geometry(op))


@aten_converter("aten.col2im.default")
def col2im(ctx, op):
    params = {"output_size": list(int_tuple(op.params["output_size"], 2, "output_size", at_least=1))}
    params.update(_geometry(op))
    return ctx.emit("F.fold", [op.inputs[0]], params=params)


# ----------------------------------------------------------------------------- core ATen gathers
@record
class _Windows:
    """The sliding windows of an im2col gather, per spatial axis (h, w)."""

    kernel: tuple[int, int]
    dilation: tuple[int, int]
    stride: tuple[int, int]
    out: tuple[int, int]

    def params(self) -> dict:
        return {"kernel_size": list(self.kernel), "dilation": list(self.dilation), "padding": [0, 0],
                "stride": list(self.stride)}


def _axis_windows(idx: np.ndarray, size) -> tuple[int, int, int, int] | None:
    """(kernel, dilation, stride, out) when ``idx[u, i] = u * dilation + i * stride`` covers the
    windows im2col takes along an axis of ``size``."""
    k, n = idx.shape
    d = int(idx[1, 0] - idx[0, 0]) if k > 1 else 1
    s = int(idx[0, 1] - idx[0, 0]) if n > 1 else 1
    if d < 1 or s < 1 or not isinstance(size, int) or n != (size - d * (k - 1) - 1) // s + 1:
        return None
    want = np.arange(k)[:, None] * d + np.arange(n)[None, :] * s
    return (k, d, s, n) if np.array_equal(idx, want) else None


def _windows(op, ctx, x) -> _Windows | None:
    """The windows when ``op`` gathers (or scatters into) dims 2 and 3 of (N, C, H, W) ``x`` as
    im2col does."""
    listed = op.params.get("indices") or [n for n in op.input_names if n.startswith("indices.")]
    used = [d for d, v in enumerate(listed) if v is not None]
    if x.shape is None or len(x.shape) != 4 or used != [2, 3]:
        return None
    rows, cols = (ctx.const_value(op.named_input(f"indices.{d}")) if op.named_input(f"indices.{d}") else None
                  for d in (2, 3))
    if rows is None or cols is None or np.ndim(rows) != 4 or np.ndim(cols) != 2 or np.shape(rows)[2:] != (1, 1):
        return None
    h = _axis_windows(np.asarray(rows, np.int64)[:, :, 0, 0], x.shape[2])
    w = _axis_windows(np.asarray(cols, np.int64), x.shape[3])
    if h is None or w is None:
        return None
    return _Windows(*zip(h, w))


def _check_im2col(op, ctx):
    if _windows(op, ctx, op.inputs[0]) is None:
        return "unsupported: not an im2col gather"
    return None


@aten_converter("aten.index.Tensor", validator=_check_im2col)
def im2col_gather(ctx, op):
    x = op.inputs[0]
    win = _windows(op, ctx, x)
    n, c = x.shape[:2]
    (kh, kw), (oh, ow) = win.kernel, win.out
    cols = ctx.emit("F.unfold", [x], params=win.params(), shape=[n, c * kh * kw, oh * ow])
    y = ctx.emit("Tensor.reshape", [cols], params={"shape": [n, c, kh, kw, oh, ow]}, shape=[n, c, kh, kw, oh, ow])
    return ctx.emit("Tensor.permute", [y], params={"dims": [0, 1, 2, 4, 3, 5]})


def _check_col2im(op, ctx):
    base, values = op.inputs[0], op.named_input("values")
    zeros = ctx.const_value(base)
    if not op.params.get("accumulate") or zeros is None or np.any(zeros) or values is None:
        return "unsupported: index_put (converted here: core ATen's col2im, an accumulation into zeros)"
    win = _windows(op, ctx, base)
    if win is None or values.shape is None or list(values.shape) != [*base.shape[:2], win.kernel[0], win.out[0],
                                                                      win.kernel[1], win.out[1]]:
        return "unsupported: index_put (converted here: core ATen's col2im, an accumulation into zeros)"
    return None


def col2im_scatter(ctx, op):
    base, values = op.inputs[0], op.named_input("values")
    win = _windows(op, ctx, base)
    n, c, h, w = base.shape
    (kh, kw), (oh, ow) = win.kernel, win.out
    y = ctx.emit("Tensor.permute", [values], params={"dims": [0, 1, 2, 4, 3, 5]}, shape=[n, c, kh, kw, oh, ow])
    cols = ctx.emit("Tensor.reshape", [y], params={"shape": [n, c * kh * kw, oh * ow]}, shape=[n, c * kh * kw, oh * ow])
    return ctx.emit("F.fold", [cols], params={"output_size": [h, w], **win.params()})


def _overlap_windows(op, ctx) -> tuple[int, int, int, int] | None:
    """``(dim, K, step, B)`` when ``op`` accumulates into zeros along one dim at the flattened
    windows ``unfold(arange(L), K, step)`` (B windows from 0), else None."""
    base, values = op.inputs[0], op.named_input("values")
    listed = op.params.get("indices") or [n for n in op.input_names if n.startswith("indices.")]
    used = [d for d, v in enumerate(listed) if v is not None]
    zeros = ctx.const_value(base)
    if not op.params.get("accumulate") or zeros is None or np.any(zeros) or values is None or base.shape is None \
            or values.shape is None or len(used) != 1 or not all(isinstance(d, int) for d in base.shape):
        return None
    dim = used[0]
    idx = ctx.const_value(op.named_input(f"indices.{dim}"))
    shape = list(base.shape)
    if idx is None or np.ndim(idx) != 1 or len(idx) < 1 \
            or list(values.shape) != shape[:dim] + [len(idx)] + shape[dim + 1:]:
        return None
    idx = np.asarray(idx, np.int64)
    jumps = np.flatnonzero(np.diff(idx) != 1)
    k = int(jumps[0]) + 1 if len(jumps) else len(idx)
    blocks = len(idx) // k
    step = int(idx[k] - idx[0]) if blocks > 1 else 1
    want = (np.arange(blocks)[:, None] * step + np.arange(k)[None, :]).reshape(-1)
    if len(idx) % k or step < 1 or not np.array_equal(idx, want) or want[-1] >= shape[dim]:
        return None
    return dim, k, step, blocks


def _check_scatter(op, ctx):
    if _overlap_windows(op, ctx) is not None or _check_col2im(op, ctx) is None:
        return None
    return ("unsupported: index_put (converted here: core ATen's col2im and 1-D overlap-add, accumulations into "
            "zeros at sliding windows)")


@aten_converter("aten.index_put.default", validator=_check_scatter)
def scatter_windows(ctx, op):
    """col2im, or a 1-D overlap-add as a fold of one row (see the module docstring)."""
    found = _overlap_windows(op, ctx)
    if found is None:
        return col2im_scatter(ctx, op)
    dim, k, step, blocks = found
    base, values = op.inputs[0], op.named_input("values")
    shape = list(base.shape)
    n, rest = int(np.prod(shape[:dim], dtype=np.int64)), int(np.prod(shape[dim + 1:], dtype=np.int64))
    length, total = (blocks - 1) * step + k, shape[dim]
    y = ctx.emit("Tensor.reshape", [values], params={"shape": [n, blocks, k, rest]}, shape=[n, blocks, k, rest])
    y = ctx.emit("Tensor.permute", [y], params={"dims": [0, 3, 2, 1]}, shape=[n, rest, k, blocks])
    cols = ctx.emit("Tensor.reshape", [y], params={"shape": [n, rest * k, blocks]}, shape=[n, rest * k, blocks])
    y = ctx.emit("F.fold", [cols], params={"output_size": [1, length], "kernel_size": [1, k], "dilation": [1, 1],
                                           "padding": [0, 0], "stride": [1, step]}, shape=[n, rest, 1, length])
    if length < total:
        y = ctx.emit("F.pad", [y], params={"pad": [0, total - length], "mode": "constant", "value": 0.0},
                     shape=[n, rest, 1, total])
    if rest > 1:  # the trailing dims were the fold's channels: put them back after the windowed dim
        y = ctx.emit("Tensor.reshape", [y], params={"shape": [n, rest, total]}, shape=[n, rest, total])
        y = ctx.emit("Tensor.permute", [y], params={"dims": [0, 2, 1]}, shape=[n, total, rest])
    return ctx.emit("Tensor.reshape", [y], params={"shape": shape})


# ----------------------------------------------------------------------------- pnnx → ncnn
def _check_rank(op, ctx):
    x = op.inputs[0]
    want = 3 if op.type == "F.unfold" else 2
    if ncnn_rank(x) != want or ncnn_axis(x, -want) != 0:
        layout = "(N, C, H, W)" if want == 3 else "(N, C·kh·kw, L)"
        return f"unsupported: {op.type} of {x.name} {x.shape} (expects {layout} with the batch axis first)"
    return None


def _layer_params(op) -> dict:
    p = op.params
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (p[k] for k, _ in _GEOMETRY)
    return {"kernel_w": kw, "kernel_h": kh, "dilation_w": dw, "dilation_h": dh, "stride_w": sw, "stride_h": sh,
            "pad_left": pw, "pad_right": pw, "pad_top": ph, "pad_bottom": ph}


@ncnn_rule("F.unfold", "F.fold", validator=_check_rank)
def fold_layer(ctx, op):
    params = _layer_params(op)
    if op.type == "F.unfold":
        return ctx.layer("Unfold", [op.inputs[0]], **params)
    h, w = op.params["output_size"]
    return ctx.layer("Fold", [op.inputs[0]], output_w=w, output_h=h, **params)
