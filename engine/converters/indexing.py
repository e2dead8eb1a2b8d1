"""Indexing and masking: roll, flip, masked_fill / where / tril / triu with constant masks,
slice_scatter / select_scatter.

Masks, conditions and comparisons of constants are folded before lowering (``fold_constants``:
Swin's shifted-window attention mask built from ``new_zeros``, slice fills, ``eq``/``ne`` and
``masked_fill`` is one constant). What reaches these rules reads an activation:

ATen → pnnx:

* ``aten.roll.default`` → ``torch.roll`` (``shifts``, ``dims``); ``aten.flip.default`` →
  ``torch.flip`` (``dims``);
* ``aten.masked_fill.Scalar|Tensor`` with a constant mask, ``aten.where.self|ScalarSelf|
  ScalarOther|Scalar`` with a constant condition, ``aten.tril/triu.default`` →
  ``pnnx.Expression`` over constant tensors: ``x * keep + fill`` with ``keep = ~mask`` and
  ``fill = where(mask, value, 0)`` (computed exactly in numpy, so a ``-inf`` fill stays ``-inf``),
  ``a * c + b * ~c``, ``x * tril(ones)``;
* ``aten.slice_scatter.default`` / ``aten.select_scatter.default`` → ``torch.cat`` of the kept
  slices of ``self`` and ``src``; with a step (``y[:, 0::3] = ...``), the written positions are a
  column of a ``(n, step)`` view, replaced by a ``cat`` (no scatter layer);
* ``aten.gather.default`` with a constant index that picks the same positions along ``dim``
  everywhere (an index_select, possibly of a smaller block) → ``Tensor.slice`` per smaller dim +
  ``torch.index_select``; along the last dim with an index that depends only on ``q - k`` (a
  relative-position table, DeBERTa) → ``torch.index_select`` + the reshape/slice "relative
  shift";
* a run-time mask or condition is :mod:`engine.converters.logical`'s (the validators here refuse it);
  casts are :mod:`engine.converters.cast`'s, comparisons :mod:`engine.converters.compare`'s.

pnnx → ncnn: ``torch.roll`` is a two-way ``Slice`` and a ``Concat`` in swapped order per rolled
dim (nothing for a shift of 0 or the batch axis); ``torch.flip`` is ``Flip`` over the
batch-less axes.
"""
from __future__ import annotations

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import batch_dim, ncnn_axes, ncnn_axis, ncnn_shape, normalize_dim
from ._expression import ExpressionBuilder
from .shape import INT64_MAX, intermediate, is_static, reshape_to


# ----------------------------------------------------------------------------- ATen → pnnx
@aten_converter("aten.roll.default")
def roll(ctx, op):
    shifts = [int(s) for s in op.params["shifts"]]
    dims = list(op.params.get("dims") or [])
    if len(dims) != len(shifts) and dims:
        ctx.unsupported(f"roll with {len(shifts)} shifts over {len(dims)} dims")
    return ctx.emit("torch.roll", [op.inputs[0]], params={"shifts": shifts, "dims": dims})


@aten_converter("aten.flip.default")
def flip(ctx, op):
    return ctx.emit("torch.flip", [op.inputs[0]], params={"dims": [int(d) for d in op.params["dims"]]})


def _float(v) -> float:
    return float(np.asarray(v).reshape(-1)[0]) if np.size(v) == 1 else None


def _value(ctx, op, name: str):
    """A scalar argument (a number, or a one-element constant tensor), else None."""
    opd = op.named_input(name)
    if opd is None:
        v = op.params.get(name)
        return float(v) if isinstance(v, (int, float)) else None
    c = ctx.const_value(opd)
    return None if c is None or np.size(c) != 1 else _float(c)


def _expression(ctx, terms: list[tuple]) -> object:
    """``sum(tensor * constant)`` + constant, as one ``pnnx.Expression``; ``terms`` are
    ``(operand, array | None)`` products and ``(None, array)`` constant addends."""
    e = ExpressionBuilder()
    parts = []
    for opd, arr in terms:
        if opd is None:
            parts.append(e.input(ctx.constant(np.asarray(arr, np.float32))))
        elif arr is None:
            parts.append(e.input(opd))
        else:
            parts.append(e.call("mul", e.input(opd), e.input(ctx.constant(np.asarray(arr, np.float32)))))
    text = parts[0]
    for p in parts[1:]:
        text = e.call("add", text, p)
    return ctx.emit("pnnx.Expression", e.inputs, params={"expr": text})


def _select_terms(ctx, cond: np.ndarray, a, b) -> list[tuple]:
    """``where(cond, a, b)`` as terms of :func:`_expression` (``a``/``b``: an operand, a float or
    a constant array)."""
    cond = np.asarray(cond, bool)
    terms = []
    const = np.zeros(cond.shape, np.float64)
    for side, chosen in ((a, cond), (b, ~cond)):
        if isinstance(side, (float, np.ndarray)):
            const = const + np.where(chosen, side, 0.0)
        elif chosen.all():
            terms.append((side, None))
        elif chosen.any():
            terms.append((side, chosen.astype(np.float32)))
    if not terms:
        ctx.unsupported("where() of constants only (left for constant folding)")
    if const.any() or not np.isfinite(const).all():
        terms.append((None, const))
    return terms


def _constant_mask(ctx, op, name: str) -> np.ndarray:
    opd = op.named_input(name)
    value = None if opd is None else ctx.const_value(opd)
    if value is None:
        ctx.unsupported(f"the {name} is computed at run time (ncnn has no selection layer; constant masks only)")
    return np.asarray(value, bool)


def constant_condition(name: str):
    """A validator accepting the op when its ``name`` argument (mask, condition) is a constant."""
    def check(op, ctx):
        opd = op.named_input(name)
        if opd is None or ctx.const_value(opd) is None:
            return f"unsupported: the {name} is computed at run time (the constant-{name} rule)"
        return None
    check.__name__ = f"constant_{name}"
    return check


@aten_converter("aten.masked_fill.Scalar", "aten.masked_fill.Tensor", validator=constant_condition("mask"))
def masked_fill(ctx, op):
    mask = _constant_mask(ctx, op, "mask")
    value = _value(ctx, op, "value")
    if value is None:
        ctx.unsupported("masked_fill with a value that is not a constant number")
    if not mask.any():
        return op.inputs[0]
    return _expression(ctx, _select_terms(ctx, mask, value, op.inputs[0]))


def _operand_or_value(ctx, op, name: str):
    opd = op.named_input(name)
    if opd is not None and ctx.const_value(opd) is None:
        return opd
    v = _value(ctx, op, name)
    if v is None:  # a constant tensor: its selected part is precomputed
        return np.asarray(ctx.const_value(opd), np.float64)
    return v


@aten_converter("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar",
                validator=constant_condition("condition"))
def where(ctx, op):
    cond = _constant_mask(ctx, op, "condition")
    a, b = _operand_or_value(ctx, op, "self"), _operand_or_value(ctx, op, "other")
    return _expression(ctx, _select_terms(ctx, cond, a, b))


@aten_converter("aten.tril.default", "aten.triu.default")
def triangle(ctx, op):
    x = op.inputs[0]
    if x.shape is None or len(x.shape) < 2 or not all(isinstance(d, int) for d in x.shape[-2:]):
        ctx.unsupported(f"{op.type} of {x.name} {x.shape} (the last two dims must be static)")
    fn = np.tril if op.type == "aten.tril.default" else np.triu
    keep = fn(np.ones(x.shape[-2:], bool), int(op.params.get("diagonal", 0)))
    return _expression(ctx, _select_terms(ctx, keep, x, 0.0))


def _cut(ctx, x, dim: int, start: int, end: int):
    """``x[start:end]`` along ``dim`` (static bounds within the dim)."""
    return ctx.emit("Tensor.slice", [x], params={"dim": dim, "start": start, "end": end, "step": 1},
                    shape=x.shape[:dim] + [end - start] + x.shape[dim + 1:])


def _scatter(ctx, op, src, dim: int, start: int, end: int):
    x, out = op.inputs[0], op.outputs[0]
    size = x.shape[dim]
    if not isinstance(size, int):
        ctx.unsupported(f"scatter along the dynamic dim {dim} of {x.name} {x.shape}")
    start, end = (v + size if v < 0 else v for v in (start, min(end, size)))
    parts = []
    if start > 0:
        parts.append(_cut(ctx, x, dim, 0, start))
    parts.append(src)
    if end < size:
        parts.append(ctx.emit("Tensor.slice", [x], params={"dim": dim, "start": end, "end": INT64_MAX, "step": 1},
                              shape=x.shape[:dim] + [size - end] + x.shape[dim + 1:]))
    if len(parts) == 1:
        return ctx.emit("Tensor.reshape", [src], params={"shape": list(out.shape)})
    return ctx.emit("torch.cat", parts, params={"dim": dim})


def _view(ctx, x, shape):
    return ctx.emit("Tensor.reshape", [x], params={"shape": list(shape)}, shape=list(shape))


def _strided_scatter(ctx, op, src, dim: int, start: int, end: int, step: int):
    """``x[start:end:step] = src`` along ``dim``, without a scatter: the written positions but the
    last, ``start + i·step`` for ``i < n - 1``, are the first column of a ``(n - 1, step)`` view of
    ``x[start : start + (n-1)·step]``; that column is replaced by ``src[:n-1]`` (a ``cat`` beside
    the other ``step - 1`` columns), the last position is ``src[n-1]``, and the untouched head
    and tail of ``x`` are cut around them (pose heads decode keypoints as ``y[:, 0::3] = ...``)."""
    x = op.inputs[0]
    size = x.shape[dim]
    n = len(range(start, end, step))
    if n == 0:
        return ctx.emit("Tensor.reshape", [x], params={"shape": list(op.outputs[0].shape)})
    lead, after = x.shape[:dim], x.shape[dim + 1:]
    post = [int(np.prod(after))] if len(after) > 1 and is_static(after) else list(after)
    parts = [_cut(ctx, x, dim, 0, start)] if start > 0 else []
    if n > 1:
        span = (n - 1) * step
        grid = _view(ctx, _cut(ctx, x, dim, start, start + span), lead + [n - 1, step] + post)
        others = _cut(ctx, grid, dim + 1, 1, step)
        head = _view(ctx, _cut(ctx, src, dim, 0, n - 1), lead + [n - 1, 1] + post)
        merged = ctx.emit("torch.cat", [head, others], params={"dim": dim + 1}, shape=lead + [n - 1, step] + post)
        parts.append(_view(ctx, merged, lead + [span] + after))
        parts.append(_cut(ctx, src, dim, n - 1, n))
    else:
        parts.append(src)
    if start + (n - 1) * step + 1 < size:
        parts.append(_cut(ctx, x, dim, start + (n - 1) * step + 1, size))
    return ctx.emit("torch.cat", parts, params={"dim": dim})


@aten_converter("aten.slice_scatter.default")
def slice_scatter(ctx, op):
    x, src = op.inputs[0], op.named_input("src")
    if x.shape is None:
        ctx.unsupported("slice_scatter of unknown shape")
    dim = normalize_dim(op.params.get("dim", 0), len(x.shape))
    start = op.params.get("start") or 0
    end = op.params.get("end")
    step = op.params.get("step", 1)
    if isinstance(start, str) or isinstance(end, str) or isinstance(step, str):
        ctx.unsupported("slice_scatter bounds computed at run time")
    if step == 1:
        return _scatter(ctx, op, src, dim, start, INT64_MAX if end is None else end)
    size = x.shape[dim]
    if not isinstance(size, int) or src.shape is None or not is_static(src.shape[dim:dim + 1]):
        ctx.unsupported(f"slice_scatter with a step along the dynamic dim {dim} of {x.name} {x.shape}")
    start, end, _ = slice(start, INT64_MAX if end is None else end, step).indices(size)
    return _strided_scatter(ctx, op, src, dim, start, end, step)


@aten_converter("aten.select_scatter.default")
def select_scatter(ctx, op):
    x, src = op.inputs[0], op.named_input("src")
    if x.shape is None or src.shape is None or isinstance(op.params.get("index"), str):
        ctx.unsupported("select_scatter of unknown shape or with a run-time index")
    dim = normalize_dim(op.params["dim"], len(x.shape))
    index = op.params["index"]
    piece = ctx.emit("torch.unsqueeze", [src], params={"dim": dim}, shape=src.shape[:dim] + [1] + src.shape[dim:])
    return _scatter(ctx, op, piece, dim, index, index + 1 if index != -1 else INT64_MAX)


def _gather_plan(op, ctx):
    """(dim, index vector, sizes) when gather's constant index reads the same positions along
    ``dim`` at every other position (sizes: the index's extent per dim), else None."""
    x, index = op.inputs[0], op.named_input("index")
    idx = None if index is None else ctx.const_value(index)
    if idx is None or x.shape is None or np.ndim(idx) != len(x.shape):
        return None
    idx = np.asarray(idx, np.int64)
    dim = normalize_dim(op.params["dim"], idx.ndim)
    line = idx[tuple(0 if d != dim else slice(None) for d in range(idx.ndim))]
    expect = line.reshape([-1 if d == dim else 1 for d in range(idx.ndim)])
    if not np.array_equal(np.broadcast_to(expect, idx.shape), idx):
        return None
    return dim, line, list(idx.shape)


def _relative_plan(op, ctx):
    """``(g, Q, K)`` when gather's constant index along the last dim depends only on ``q - k``
    (its row ``q`` and column ``k``), the same for every leading position: a relative-position
    table, as DeBERTa's disentangled attention gathers its scores (``index[q, k] = g[q - k + K - 1]``);
    else None."""
    x, index, out = op.inputs[0], op.named_input("index"), op.outputs[0]
    idx = None if index is None else ctx.const_value(index)
    if idx is None or x.shape is None or out.shape is None or np.ndim(idx) < 2 or np.ndim(idx) != len(x.shape):
        return None
    if not is_static(x.shape) or not is_static(out.shape):
        return None
    idx = np.asarray(idx, np.int64)
    if normalize_dim(op.params["dim"], idx.ndim) != idx.ndim - 1 or list(x.shape[:-1]) != list(idx.shape[:-1]):
        return None
    table = idx.reshape(-1, *idx.shape[-2:])
    if not (table == table[:1]).all():
        return None
    table = table[0]
    q, k = table.shape
    if (table[1:, 1:] != table[:-1, :-1]).any():  # not constant along the diagonals
        return None
    g = np.concatenate([table[0, ::-1], table[1:, 0]])  # g[d + K - 1] = index at q - k = d
    size = x.shape[-1]
    g = np.where(g < 0, g + size, g)
    if g.min() < 0 or g.max() >= size:
        return None
    return g, q, k


def _check_gather(op, ctx):
    if _gather_plan(op, ctx) is None and _relative_plan(op, ctx) is None:
        return "unsupported: gather with a run-time index or one that differs along other dims"
    return None


@aten_converter("aten.gather.default", validator=_check_gather)
def gather(ctx, op):
    plan = _gather_plan(op, ctx)
    if plan is None:
        return _relative_gather(ctx, op)
    x = op.inputs[0]
    dim, line, sizes = plan
    shape = list(x.shape)
    for d, n in enumerate(sizes):
        if d != dim and n != shape[d]:
            shape[d] = n
            x = ctx.emit("Tensor.slice", [x], params={"dim": d, "start": 0, "end": n, "step": 1}, shape=list(shape))
    size = shape[dim]
    index = [int(i) + (size if i < 0 and isinstance(size, int) else 0) for i in line]
    return ctx.emit("torch.index_select", [x], params={"dim": dim, "index": index})


def _relative_gather(ctx, op):
    """``out[..., q, k] = x[..., q, g(q - k)]`` without a gather: one ``index_select`` makes every
    row hold ``x[q, g(d)]`` for ``d`` from ``Q - 1`` down to ``1 - K`` (``L = Q + K - 1``
    columns); flattened, row ``q``'s window starts ``L - 1`` elements after row ``q - 1``'s, so a
    slice of the flat rows reshaped to ``L - 1`` columns puts every window at column 0 (the
    Transformer-XL "relative shift"), and a last slice keeps ``K`` columns."""
    x = op.inputs[0]
    g, q, k = _relative_plan(op, ctx)
    lead = list(x.shape[:-2])
    width = q + k - 1
    picks = [int(g[q - 1 - j + k - 1]) for j in range(width)]
    y = ctx.emit("torch.index_select", [x], params={"dim": len(x.shape) - 1, "index": picks},
                 shape=lead + [q, width])
    flat = ctx.emit("Tensor.reshape", [y], params={"shape": lead + [q * width]}, shape=lead + [q * width])
    cut = ctx.emit("Tensor.slice", [flat], params={"dim": len(lead), "start": q - 1,
                                                    "end": q - 1 + q * (width - 1), "step": 1},
                   shape=lead + [q * (width - 1)])
    rows = lead + [q, width - 1]
    if width - 1 == k:  # two rows: the windows are the whole rows
        return ctx.emit("Tensor.reshape", [cut], params={"shape": rows})
    rows = ctx.emit("Tensor.reshape", [cut], params={"shape": rows}, shape=rows)
    return ctx.emit("Tensor.slice", [rows], params={"dim": len(lead) + 1, "start": 0, "end": k, "step": 1})


# ----------------------------------------------------------------------------- pnnx → ncnn
@ncnn_rule("torch.roll")
def roll_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    dims, shifts = list(op.params["dims"]), list(op.params["shifts"])
    y, shape = x, ncnn_shape(x)
    if not dims:  # roll of the flattened tensor
        if not all(isinstance(d, int) for d in shape):
            ctx.unsupported("roll of a flattened tensor of dynamic shape")
        y, shape, dims = reshape_to(ctx, x, [int(np.prod(shape))]), [int(np.prod(shape))], [None]
    for dim, shift in zip(dims, shifts):
        if dim is None:
            axis = 0
        else:
            if normalize_dim(dim, len(x.shape)) == batch_dim(x):
                continue  # a batch of one
            axis = ncnn_axis(x, dim)
        n = shape[axis]
        if not isinstance(n, int):
            ctx.unsupported(f"roll along the dynamic dim {dim} of {x.name} {x.shape}")
        s = shift % n
        if s == 0:
            continue
        head, tail = list(shape), list(shape)
        head[axis], tail[axis] = n - s, s
        a, b = ctx.layer("Slice", [y], outputs=2, slices=[n - s, -233], axis=axis)
        a.dtype = b.dtype = x.dtype
        y = intermediate(ctx.layer("Concat", [intermediate(b, tail), intermediate(a, head)], axis=axis), shape)
    return reshape_to(ctx, y, ncnn_shape(out), final=True)


@ncnn_rule("torch.flip")
def flip_ncnn(ctx, op):
    x = op.inputs[0]
    axes = ncnn_axes(x, op.params["dims"])
    if not axes:
        return reshape_to(ctx, x, ncnn_shape(op.outputs[0]), final=True)
    return ctx.layer("Flip", [x], axes=axes)
