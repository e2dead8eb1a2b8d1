"""Shape operators: view/reshape/flatten/unflatten/squeeze/unsqueeze, permute/transpose/t, cat,
chunk/split, slice/select, channel shuffle and no-op expands.

ATen → pnnx (pnnx's own spellings):

* ``aten.view.default``, ``aten.reshape.default``, ``aten._unsafe_view.default``,
  ``aten.view_copy.default``, ``aten.unflatten.int``, ``aten.reshape_as.default``,
  ``aten.view_as.default`` → ``Tensor.reshape`` (``shape``);
* ``aten.flatten.using_ints`` → ``torch.flatten`` (``start_dim``, ``end_dim``);
* ``aten.squeeze.dim|dims|default`` → ``torch.squeeze`` (``dim``); ``aten.unsqueeze.default`` →
  ``torch.unsqueeze`` (``dim``);
* ``aten.permute.default`` / ``aten.numpy_T.default`` (``x.T``: dims reversed) →
  ``Tensor.permute`` (``dims``); ``aten.transpose.int`` / ``aten.t.default`` → ``torch.transpose``
  (``dim0``, ``dim1``);
* ``aten.repeat_interleave.self_int`` (an int count along one dim) → ``torch.unsqueeze`` after the
  dim, ``Tensor.expand`` of the new axis, ``Tensor.reshape`` merging it;
* ``aten.cat.default`` / ``aten.concat.default`` → ``torch.cat`` (``dim``);
* ``aten.chunk.default`` → ``torch.chunk``; ``aten.split.Tensor``,
  ``aten.split_with_sizes.default``, ``aten.split.sizes`` → ``torch.split``
  (``split_size_or_sections``, ``dim``); ``aten.tensor_split.sections|indices`` →
  ``torch.split`` into the outputs' sizes; ``aten.unbind.int`` → ``torch.unbind``;
* ``aten.slice.Tensor`` → ``Tensor.slice`` (``dim``, ``start``, ``end``, ``step``);
  ``aten.select.int`` → ``Tensor.select`` (``dim``, ``index``);
* ``aten.channel_shuffle.default`` / ``aten.native_channel_shuffle.default`` →
  ``nn.ChannelShuffle`` (``groups``);
* ``aten.as_strided.default`` that only re-strides in row-major order (a view) → ``Tensor.reshape``;
* ``aten.expand.default`` / ``aten.expand_as.default`` that do not change the shape → removed.

pnnx → ncnn: every reshape-like op becomes nothing (same ncnn shape), ``Flatten`` (to 1-D) or
``Reshape`` (w/h/d/c with 0 = copy, -1 = infer for symbolic dims); ``Permute`` with the
order_type of the batch-less permutation (plus a ``Reshape`` when the batch axis moves —
ncnn's batch is always 1); ``Concat``/``Slice`` with the axis remapped; ``Crop`` for slices
with step 1, ``Crop`` + a 1×1 max ``Pooling`` with stride = step for strided slices;
``ShuffleChannel``.

The helpers :func:`reshape_to` and :func:`intermediate` are shared by the other families.
"""
from __future__ import annotations

import itertools
import math
import logging
from typing import Sequence

import numpy as np

from ..convert.context import Unsupported
from ..convert.layout import reshape_axis
from ..convert.registry import Priority, aten_converter, ncnn_rule
from ..convert.shapes import batch_dim, ncnn_axis, ncnn_shape, normalize_dim, set_batch_dim
from ..ir import Dim, Operand
from ..ncnn.enums import PoolingType, PoolPadMode, ReshapeDim
from ..reader.schema import is_contiguous
from ._broadcast import memorydata_params
from ._expression import Arg, Call, ExpressionError, format_literal
from ._expression import parse as parse_expression

log = logging.getLogger(__name__)

#: int64 max: what ``x[a:]`` exports as ``end``
INT64_MAX = 2**63 - 1

# ----------------------------------------------------------------------------- shared helpers

#: ncnn's Mat dims for a shape of rank 1..4 (outermost first)
_DIM_NAMES = {1: ("w",), 2: ("h", "w"), 3: ("c", "h", "w"), 4: ("c", "d", "h", "w")}


def intermediate(opd: Operand, shape: Sequence[Dim]) -> Operand:
    """Mark an operand made inside a rule (not the rule's result) with its batch-less ncnn
    shape, so later passes can read it with :func:`ncnn_shape`."""
    opd.shape = list(shape)
    set_batch_dim(opd, None)
    return opd


def is_static(shape: Sequence[Dim] | None) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def reshape_params(out: Sequence[Dim], src: Sequence[Dim] | None = None) -> dict[str, int]:
    """Reshape's ``w/h/d/c`` for ncnn shape ``out``. A symbolic dim becomes 0 (copy) when the
    input has the same dim under the same Mat name, else -1 (inferred, at most one)."""
    if not 1 <= len(out) <= 4:
        raise Unsupported(f"unsupported: ncnn has no {len(out)}-D blobs (shape {list(out)})")
    names = _DIM_NAMES[len(out)]
    src_by_name = dict(zip(_DIM_NAMES[len(src)], src)) if src and len(src) <= 4 else {}
    params: dict[str, int] = {}
    inferred = False
    for name, d in zip(names, out):
        if isinstance(d, int):
            params[name] = d
        elif src_by_name.get(name) == d:
            params[name] = int(ReshapeDim.KEEP)
        elif not inferred:
            params[name] = int(ReshapeDim.INFER)
            inferred = True
        else:
            raise Unsupported(f"unsupported: reshape to {list(out)} has more than one dynamic dim")
    return params


def reshape_to(ctx, x: Operand, out: Sequence[Dim], *, final: bool = False, name: str | None = None) -> Operand:
    """``x`` reshaped to ncnn shape ``out``: ``x`` itself when the shape already matches, else a
    ``Flatten`` (1-D) or ``Reshape`` layer. With ``final`` the result is the rule's output and
    keeps the current op's shape; otherwise it is marked :func:`intermediate`."""
    src = ncnn_shape(x)
    out = list(out) or [1]
    if src is not None and list(src) == out:
        here = ctx.current.outputs[0]
        if not final or (x.shape == here.shape and batch_dim(x) == batch_dim(here)):
            return x
        # same ncnn blob, another torch view (shape or batch axis): consumers' params refer to
        # the new view, so keep a distinct value (a Reshape eliminate_noop_reshape drops later)
    if len(out) == 1 and (not isinstance(out[0], int) or (is_static(src) and _numel(src) == out[0])):
        y = ctx.layer("Flatten", [x], name=name)
    else:
        try:
            params = reshape_params(out, src)
        except Unsupported:
            own = _own_dims_expression(out, src)
            if own is None:
                raise
            params = {"shape_expr": own}
        y = ctx.layer("Reshape", [x], name=name, **params)
    return y if final else intermediate(y, out)


def _own_dims_expression(out: Sequence[Dim], src: Sequence[Dim] | None) -> str | None:
    """An ncnn ``Reshape`` shape expression for ncnn shape ``out`` when each of its dynamic dims
    is a dim of the input (ncnn shape ``src``) — ``0w``, ``0h``... — however many there are
    (``torch.stack`` unsqueezes a ``(h, w)`` blob of two dynamic dims to ``(h, w, 1)``, where
    the plain 0 = keep / -1 = infer parameters cannot say which dim goes where)."""
    if not src or len(src) > 4 or not 1 <= len(out) <= 4:
        return None
    names = _DIM_NAMES[len(src)]
    terms = []
    for d in reversed(list(out)):
        if isinstance(d, int):
            terms.append(str(d))
        elif d in src:
            terms.append(f"0{names[list(src).index(d)]}")
        else:
            return None
    return ",".join(terms)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _same_shape(a: Operand, b: Operand) -> bool:
    return a.shape is not None and b.shape is not None and list(a.shape) == list(b.shape)


def _rank(opd: Operand) -> int:
    if opd.shape is None:
        raise Unsupported(f"unsupported: shape of {opd.name} unknown")
    return len(opd.shape)


def _out_like(ctx, op, k: int):
    """A new operand shaped like ``op.outputs[k]`` (for multi-output emits)."""
    o = op.outputs[k]
    return ctx.graph.new_operand(f"{op.name}_out{k}", dtype=o.dtype, shape=o.shape)


# ----------------------------------------------------------------------------- ATen → pnnx

def _size_param(op, key: str) -> list:
    """A size list param; symbolic entries (``"%sym"`` placeholders) come from the output."""
    size = list(op.params[key])
    if all(isinstance(s, int) for s in size):
        return size
    out = op.outputs[0].shape or []
    return [s if isinstance(s, int) else (out[i] if i < len(out) else -1) for i, s in enumerate(size)]


def size_term(ctx, opd: Operand, refs: list[Operand]) -> str | None:
    """A run-time size value as a pnnx shape expression over ``refs`` (``size(@k,dim)``, with
    arithmetic), adding the tensors it measures to ``refs``; None when not expressible."""
    c = opd.meta.get("const")
    if isinstance(c, (int, float)) and not isinstance(c, bool):
        return format_literal(c)
    p = opd.producer
    if p is None:
        return None
    if p.type == "Tensor.size":
        t = p.inputs[0]
        k = next((i for i, r in enumerate(refs) if r is t), None)
        if k is None:
            refs.append(t)
            k = len(refs) - 1
        return f"size(@{k},{normalize_dim(p.params['dim'], _rank(t))})"
    if p.type == "pnnx.Expression":
        try:
            tree = parse_expression(str(p.params["expr"]))
        except ExpressionError:
            return None
        return _format_tree(tree, lambda i: size_term(ctx, p.inputs[i], refs) if i < len(p.inputs) else None)
    return None


def _format_tree(node, arg) -> str | None:
    if isinstance(node, Arg):
        return arg(node.index)
    if isinstance(node, Call):
        parts = [_format_tree(a, arg) for a in node.args]
        return None if any(x is None for x in parts) else f"{node.name}({','.join(parts)})"
    return format_literal(node)


def _emit_reshape(ctx, op, key: str):
    """``Tensor.reshape``; when two or more dims are computed at run time, also the pnnx shape
    expression ``shape_expr`` (``[1,16,size(@1,2),size(@1,3)]``) and the tensors it measures as
    extra inputs (ncnn's Reshape evaluates it: one Reshape keeps any number of dynamic dims)."""
    x, shape = op.inputs[0], _size_param(op, key)
    if sum(1 for d in (op.outputs[0].shape or []) if not isinstance(d, int)) >= 2:
        refs = [x]
        terms = [str(s) if isinstance(s, int) else (None if op.named_input(f"{key}.{i}") is None
                                                    else size_term(ctx, op.named_input(f"{key}.{i}"), refs))
                 for i, s in enumerate(op.params[key])]
        if all(t is not None for t in terms) and len(refs) <= 10:
            return ctx.emit("Tensor.reshape", refs, params={"shape": shape, "shape_expr": f"[{','.join(terms)}]"})
    return ctx.emit("Tensor.reshape", [x], params={"shape": shape})


@aten_converter("aten.view.default", "aten._unsafe_view.default", "aten.view_copy.default")
def view(ctx, op):
    return _emit_reshape(ctx, op, "size")


@aten_converter("aten.reshape_as.default", "aten.view_as.default")
def reshape_as(ctx, op):
    out = op.outputs[0]
    if out.shape is None:
        ctx.unsupported("reshape_as to an unknown shape")
    return ctx.emit("Tensor.reshape", [op.inputs[0]], params={"shape": [d if isinstance(d, int) else -1 for d in
                                                                      out.shape]})


@aten_converter("aten.reshape.default")
def reshape(ctx, op):
    return _emit_reshape(ctx, op, "shape")


def _check_as_strided(op, ctx):
    x = op.inputs[0]
    size, stride = op.params.get("size"), op.params.get("stride")
    offset = op.params.get("storage_offset") or 0
    if not is_static(x.shape) or not all(isinstance(v, int) for v in (*(size or []), *(stride or []))):
        return "unsupported: as_strided with dynamic sizes or strides"
    if offset or "strides" in x.meta or math.prod(size) != math.prod(x.shape) \
            or not is_contiguous(size, stride):
        return (f"unsupported: as_strided(size={list(size)}, stride={list(stride)}, storage_offset={offset}) of "
                f"{x.name} {x.shape} reorders, skips or repeats elements (only a re-striding that is a plain "
                "view converts)")
    return None


@aten_converter("aten.as_strided.default", "aten.as_strided_copy.default", validator=_check_as_strided)
def as_strided(ctx, op):
    """A re-striding that is a view in row-major order (core ATen's ``(1, C, 1, 1)`` mean restrided
    channels-last by ConvNeXt's pooling) → ``Tensor.reshape``."""
    return ctx.emit("Tensor.reshape", [op.inputs[0]], params={"shape": list(op.params["size"])})


@aten_converter("aten.unflatten.int", "aten.reshape_as.default", "aten.view_as.default")
def reshape_to_output(ctx, op):
    """A reshape to the shape the output has (``unflatten``; ``reshape_as`` reads only the other
    tensor's shape)."""
    return ctx.emit("Tensor.reshape", [op.inputs[0]], params={"shape": list(op.outputs[0].shape or [])})


@aten_converter("aten.flatten.using_ints")
def flatten(ctx, op):
    return ctx.emit("torch.flatten", [op.inputs[0]],
                    params={"start_dim": op.params["start_dim"], "end_dim": op.params["end_dim"]})


@aten_converter("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.squeeze_copy.dims")
def squeeze(ctx, op):
    x = op.inputs[0]
    rank = _rank(x)
    if "dim" in op.params:
        dims = op.params["dim"] if isinstance(op.params["dim"], list) else [op.params["dim"]]
    else:
        dims = list(range(rank))
    dims = [d for d in dims if x.shape[normalize_dim(d, max(rank, 1))] == 1] if rank else []
    if not dims:
        return x
    return ctx.emit("torch.squeeze", [x], params={"dim": dims if len(dims) > 1 else dims[0]})


@aten_converter("aten.unsqueeze.default", "aten.unsqueeze_copy.default")
def unsqueeze(ctx, op):
    return ctx.emit("torch.unsqueeze", [op.inputs[0]], params={"dim": op.params["dim"]})


@aten_converter("aten.permute.default", "aten.permute_copy.default")
def permute(ctx, op):
    x = op.inputs[0]
    rank = _rank(x)
    dims = [normalize_dim(d, rank) for d in op.params["dims"]]
    if dims == list(range(rank)):
        return x
    return ctx.emit("Tensor.permute", [x], params={"dims": dims})


def _transpose(ctx, x, dim0: int, dim1: int):
    rank = _rank(x)
    if rank < 2:
        return x
    d0, d1 = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
    if d0 == d1:
        return x
    return ctx.emit("torch.transpose", [x], params={"dim0": d0, "dim1": d1})


@aten_converter("aten.transpose.int")
def transpose(ctx, op):
    return _transpose(ctx, op.inputs[0], op.params["dim0"], op.params["dim1"])


@aten_converter("aten.t.default")
def t(ctx, op):
    return _transpose(ctx, op.inputs[0], 0, 1)


@aten_converter("aten.numpy_T.default")
def numpy_t(ctx, op):
    """``x.T``: every dim reversed."""
    x = op.inputs[0]
    rank = _rank(x)
    if rank < 2:
        return x
    return ctx.emit("Tensor.permute", [x], params={"dims": list(range(rank - 1, -1, -1))})


@aten_converter("aten.swapaxes.default")
def swapaxes(ctx, op):
    return _transpose(ctx, op.inputs[0], op.params["axis0"], op.params["axis1"])


@aten_converter("aten.swapdims.default")
def swapdims(ctx, op):
    return _transpose(ctx, op.inputs[0], op.params["dim0"], op.params["dim1"])


@aten_converter("aten.movedim.int", "aten.movedim.intlist", "aten.moveaxis.int", "aten.moveaxis.intlist")
def movedim(ctx, op):
    x = op.inputs[0]
    rank = _rank(x)
    source, dest = op.params["source"], op.params["destination"]
    source = [normalize_dim(d, rank) for d in (source if isinstance(source, list) else [source])]
    dest = [normalize_dim(d, rank) for d in (dest if isinstance(dest, list) else [dest])]
    if len(source) != len(dest):
        ctx.unsupported(f"movedim of {len(source)} dims to {len(dest)} places")
    rest = iter(d for d in range(rank) if d not in source)
    placed = dict(zip(dest, source))
    dims = [placed[i] if i in placed else next(rest) for i in range(rank)]
    if dims == list(range(rank)):
        return x
    return ctx.emit("Tensor.permute", [x], params={"dims": dims})


def _empty(opd: Operand) -> bool:
    return opd.shape is not None and any(d == 0 for d in opd.shape)


@aten_converter("aten.cat.default", "aten.concat.default")
def cat(ctx, op):
    parts = [x for x in op.inputs if not _empty(x)] or op.inputs[:1]  # an empty piece adds nothing
    if len(parts) == 1:
        return parts[0]
    return ctx.emit("torch.cat", parts, params={"dim": op.params.get("dim", 0)})


def _multi(ctx, op, type_: str, params: dict):
    outs = [_out_like(ctx, op, k) for k in range(len(op.outputs))]
    return ctx.emit(type_, [op.inputs[0]], params=params, outputs=outs)


@aten_converter("aten.chunk.default")
def chunk(ctx, op):
    return _multi(ctx, op, "torch.chunk", {"chunks": op.params["chunks"], "dim": op.params["dim"]})


@aten_converter("aten.split.Tensor")
def split(ctx, op):
    return _multi(ctx, op, "torch.split", {"split_size_or_sections": op.params["split_size"], "dim": op.params["dim"]})


@aten_converter("aten.split_with_sizes.default", "aten.split.sizes")
def split_with_sizes(ctx, op):
    key = "split_sizes" if "split_sizes" in op.params else "split_size"
    return _multi(ctx, op, "torch.split", {"split_size_or_sections": list(op.params[key]), "dim": op.params["dim"]})


@aten_converter("aten.tensor_split.sections", "aten.tensor_split.indices")
def tensor_split(ctx, op):
    """``torch.split`` into the sizes the outputs have along ``dim`` (static, none empty)."""
    x = op.inputs[0]
    dim = normalize_dim(op.params.get("dim", 0), _rank(x))
    sizes = [None if o.shape is None else o.shape[dim] for o in op.outputs]
    if not all(isinstance(s, int) and s > 0 for s in sizes):
        ctx.unsupported(f"tensor_split into sections of sizes {sizes} (static, non-empty sections convert)")
    return _multi(ctx, op, "torch.split", {"split_size_or_sections": sizes, "dim": dim})


@aten_converter("aten.unbind.int")
def unbind(ctx, op):
    return _multi(ctx, op, "torch.unbind", {"dim": op.params["dim"]})


def _const_int(ctx, op, key: str):
    """An int param that may be a graph value: only a constant one (folded) is usable."""
    v = op.params.get(key)
    if isinstance(v, str) and v.startswith("%"):
        opd = op.named_input(key)
        value = None if opd is None else opd.meta.get("const")
        if not isinstance(value, int):
            ctx.unsupported(f"{key} is computed at run time ({v[1:]}); ncnn needs a constant here")
        return value
    return v


def _runtime_bound(op, key: str) -> bool:
    v = op.params.get(key)
    opd = op.named_input(key) if isinstance(v, str) and v.startswith("%") else None
    return opd is not None and not isinstance(opd.meta.get("const"), int)


def _slice_to_size(ctx, op):
    """A slice whose start/end is a run-time size (``x[:, :n]`` with ``n`` a dynamic dim of
    another tensor): ``Tensor.slice`` with ``start_expr``/``end_expr`` over the tensors measured,
    which are extra inputs (ncnn's Crop evaluates them)."""
    x = op.inputs[0]
    if _const_int(ctx, op, "step") not in (1, None):
        ctx.unsupported("a strided slice with a run-time bound")
    refs, params = [x], {"dim": op.params["dim"], "start": 0, "end": INT64_MAX, "step": 1}
    for key in ("start", "end"):
        if _runtime_bound(op, key):
            params[f"{key}_expr"] = _measured_term(ctx, op, key, refs)
        else:
            v = _const_int(ctx, op, key)
            if v is not None:
                params[key] = v
    return ctx.emit("Tensor.slice", refs, params=params)


def _measured_term(ctx, op, key: str, refs: list[Operand]) -> str:
    """The run-time int param ``key`` of ``op`` as a size expression over ``refs`` (extended with
    the tensors it measures; ncnn expressions reach at most 10 blobs)."""
    term = size_term(ctx, op.named_input(key), refs)
    if term is None:
        ctx.unsupported(f"{key} is computed at run time ({op.params[key][1:]}) from something other than sizes")
    if len(refs) > 10:
        ctx.unsupported(f"a {key} measuring more than 9 tensors")
    return term


@aten_converter("aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    if _runtime_bound(op, "start") or _runtime_bound(op, "end"):
        return _slice_to_size(ctx, op)
    start, end, step = (_const_int(ctx, op, k) for k in ("start", "end", "step"))
    if _same_shape(x, out) and step == 1:
        return x  # x[:, :] style full slices
    return ctx.emit("Tensor.slice", [x], params={"dim": op.params["dim"], "start": 0 if start is None else start,
                                                   "end": INT64_MAX if end is None else end, "step": step})


@aten_converter("aten.select.int", "aten.select_copy.int")
def select(ctx, op):
    if _runtime_bound(op, "index"):
        return _select_at_run_time(ctx, op)
    return ctx.emit("Tensor.select", [op.inputs[0]],
                    params={"dim": op.params["dim"], "index": _const_int(ctx, op, "index")})


def _select_at_run_time(ctx, op):
    """``x.select(dim, i)`` with ``i`` computed from run-time sizes: the slice ``[i, i + 1]``
    (ncnn's Crop evaluates both bounds; a negative ``i`` counts from the end, and its end 0 is
    the end) and a squeeze of ``dim``."""
    x = op.inputs[0]
    refs = [x]
    term = _measured_term(ctx, op, "index", refs)
    dim = normalize_dim(op.params["dim"], _rank(x))
    piece = list(x.shape)
    piece[dim] = 1
    y = ctx.emit("Tensor.slice", refs, params={"dim": dim, "start": 0, "end": INT64_MAX, "step": 1,
                                               "start_expr": term, "end_expr": f"add({term},1)"}, shape=piece)
    return ctx.emit("torch.squeeze", [y], params={"dim": dim})


@aten_converter("aten.narrow.default")
def narrow(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    if _runtime_bound(op, "start") and not _runtime_bound(op, "length"):
        return _narrow_at_run_time(ctx, op)
    start, length = _const_int(ctx, op, "start"), _const_int(ctx, op, "length")
    if _same_shape(x, out):
        return x
    dim = normalize_dim(op.params["dim"], _rank(x))
    if start < 0:
        if not isinstance(x.shape[dim], int):
            ctx.unsupported("narrow from a negative start along a dynamic dim")
        start += x.shape[dim]
    return ctx.emit("Tensor.slice", [x], params={"dim": dim, "start": start, "end": start + length, "step": 1})


def _narrow_at_run_time(ctx, op):
    """``x.narrow(dim, i, n)`` with ``i`` computed from run-time sizes: the slice ``[i, i + n]``
    (as a run-time select's, ncnn's Crop counting a negative ``i`` from the end)."""
    x, refs = op.inputs[0], [op.inputs[0]]
    term = _measured_term(ctx, op, "start", refs)
    return ctx.emit("Tensor.slice", refs, params={"dim": normalize_dim(op.params["dim"], _rank(x)), "start": 0,
                                                  "end": INT64_MAX, "step": 1, "start_expr": term,
                                                  "end_expr": f"add({term},{_const_int(ctx, op, 'length')})"})


@aten_converter("aten.stack.default")
def stack(ctx, op):
    """``torch.stack`` = cat then one reshape (stacking before the last dim), or the inputs
    unsqueezed then cat (stacking after it)."""
    xs, out = list(op.inputs), op.outputs[0]
    rank = _rank(xs[0])
    dim = normalize_dim(op.params.get("dim", 0), rank + 1)
    if len(xs) == 1:
        return ctx.emit("torch.unsqueeze", xs, params={"dim": dim})
    if dim < rank and out.shape is not None:
        joined = list(xs[0].shape)
        joined[dim] = out.shape[dim] * xs[0].shape[dim] if isinstance(xs[0].shape[dim], int) else -1
        cat_ = ctx.emit("torch.cat", xs, params={"dim": dim}, shape=joined)
        return ctx.emit("Tensor.reshape", [cat_], params={"shape": list(out.shape)})
    parts = [ctx.emit("torch.unsqueeze", [x], params={"dim": dim}, shape=list(x.shape[:dim]) + [1] + list(x.shape[dim:]))
             for x in xs]
    return ctx.emit("torch.cat", parts, params={"dim": dim})


@aten_converter("aten.channel_shuffle.default", "aten.native_channel_shuffle.default")
def channel_shuffle(ctx, op):
    return ctx.emit("nn.ChannelShuffle", [op.inputs[0]], params={"groups": _const_int(ctx, op, "groups")})


def _noop_expand(op, ctx):
    if not _same_shape(op.inputs[0], op.outputs[0]):
        return "unsupported: expand that changes the shape (only no-op expands are removed here)"
    return None


@aten_converter("aten.expand.default", "aten.expand_as.default", validator=_noop_expand)
def expand_noop(ctx, op):
    return op.inputs[0]


def _static_sizes(op, ctx, key: str) -> list:
    sizes = op.params.get(key)
    if not isinstance(sizes, list):
        ctx.unsupported(f"{key}={sizes!r}")
    return [_const_int(ctx, op, f"{key}.{i}") if isinstance(v, str) else v for i, v in enumerate(sizes)]


@aten_converter("aten.expand.default", "aten.expand_copy.default", "aten.broadcast_to.default",
                priority=Priority.LOW)
def expand(ctx, op):
    """An expand that changes the shape: ``Tensor.expand`` to the output's shape (ncnn Tile)."""
    return ctx.emit("Tensor.expand", [op.inputs[0]], params={"sizes": list(op.outputs[0].shape or [])})


@aten_converter("aten.expand_as.default", priority=Priority.LOW)
def expand_as(ctx, op):
    return ctx.emit("Tensor.expand", [op.inputs[0]], params={"sizes": list(op.outputs[0].shape or [])})


@aten_converter("aten.repeat.default", "aten.tile.default")
def repeat(ctx, op):
    x = op.inputs[0]
    repeats = [int(r) for r in op.params["repeats" if "repeats" in op.params else "dims"]]
    rank = _rank(x)
    repeats = [1] * (rank - len(repeats)) + repeats  # tile pads its dims on the left
    if all(r == 1 for r in repeats) and len(repeats) == rank:
        return x
    return ctx.emit("Tensor.repeat", [x], params={"sizes": repeats})


@aten_converter("aten.repeat_interleave.self_int")
def repeat_interleave(ctx, op):
    """``repeat_interleave(x, r, dim)`` with an int ``r``: each element ``r`` times in a row along
    ``dim`` — a new axis of ``r`` after ``dim`` (``unsqueeze`` + ``expand``) merged into it."""
    x, out = op.inputs[0], op.outputs[0]
    r, dim = op.params.get("repeats"), op.params.get("dim")
    if not isinstance(r, int) or isinstance(r, bool) or dim is None:
        ctx.unsupported(f"repeat_interleave with repeats={r!r}, dim={dim!r} (an int count along one dim is converted)")
    if x.shape is None or out.shape is None:
        ctx.unsupported(f"repeat_interleave of {x.name}: shape unknown")
    shape = list(x.shape)
    d = normalize_dim(dim, len(shape))
    if sum(not isinstance(s, int) for s in out.shape) > 1:
        ctx.unsupported(f"repeat_interleave of {x.name} {shape} into {list(out.shape)}: more than one run-time "
                        "size in the result (its reshape takes one)")
    if r == 1:
        return x
    wide = shape[:d + 1] + [1] + shape[d + 1:]
    u = ctx.emit("torch.unsqueeze", [x], params={"dim": d + 1}, shape=wide)
    wide = shape[:d + 1] + [r] + shape[d + 1:]
    sizes = [s if isinstance(s, int) else -1 for s in wide]  # a run-time size is kept as it is
    e = ctx.emit("Tensor.expand", [u], params={"sizes": sizes}, shape=wide)
    target = [s if isinstance(s, int) else -1 for s in out.shape]  # the one run-time size is the rest
    return ctx.emit("Tensor.reshape", [e], params={"shape": target}, shape=list(out.shape))


def index_tensor(op, ctx):
    """(dim, index array, index operand) of an ``aten.index.Tensor`` with exactly one index, a
    constant integer tensor (of any rank); else None."""
    # (a list of tensors only is not a param: then every entry is an input ``indices.<k>``)
    listed = op.params.get("indices") or [n for n in op.input_names if n.startswith("indices.")]
    used = [(d, v) for d, v in enumerate(listed) if v is not None]
    if len(used) != 1:
        return None
    opd = op.named_input(f"indices.{used[0][0]}")
    value = None if opd is None else ctx.const_value(opd)
    if value is None or np.ndim(value) < 1 or not np.issubdtype(np.asarray(value).dtype, np.integer):
        return None
    return used[0][0], np.asarray(value, dtype=np.int64), opd


def index_vector(op, ctx):
    """:func:`index_tensor` when the index is a 1-D vector, else None."""
    found = index_tensor(op, ctx)
    return found if found is not None and found[1].ndim == 1 else None


_RUNS_LIMIT = 32


def gather_runs(idx: np.ndarray, size) -> list[tuple[int, int]] | None:
    """The index vector as (start, stop) runs of consecutive elements (None: too many or a
    negative index on a dynamic size)."""
    if isinstance(size, int):
        idx = np.where(idx < 0, idx + size, idx)
    elif (idx < 0).any():
        return None
    runs: list[tuple[int, int]] = []
    for i in idx.tolist():
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs if len(runs) <= _RUNS_LIMIT else None


def outer_index_vectors(op, ctx) -> list[tuple[int, np.ndarray]] | None:
    """``[(dim, vector), ...]`` when an ``aten.index.Tensor`` indexes consecutive dims with
    constant integer tensors broadcast as an outer product (index ``j`` of ``m`` varies only along
    axis ``j`` of the ``m``-D block they broadcast to): the
    result is then one gather per dim, in place. Core ATen's resizes index this way."""
    listed = op.params.get("indices") or [n for n in op.input_names if n.startswith("indices.")]
    used = [d for d, v in enumerate(listed) if v is not None]
    if len(used) < 2 or used != list(range(used[0], used[0] + len(used))):
        return None
    m, found = len(used), []
    for j, d in enumerate(used):
        opd = op.named_input(f"indices.{d}")
        value = None if opd is None else ctx.const_value(opd)
        if value is None or not np.issubdtype(np.asarray(value).dtype, np.integer):
            return None
        arr = np.asarray(value, dtype=np.int64)
        block = (1,) * (m - arr.ndim) + arr.shape  # right-aligned, as it broadcasts
        if arr.ndim > m or any(n != 1 for k, n in enumerate(block) if k != j):
            return None
        found.append((d, arr.reshape(-1)))
    return found


def _gathers(op, ctx) -> list[tuple[int, np.ndarray]] | None:
    """The (dim, index) gathers an index op is made of: one constant index tensor (any rank, on
    one dim), constant vectors as an outer product, or ``index_select``'s constant vector."""
    if op.type == "aten.index_select.default":
        value = ctx.const_value(op.inputs[1])
        return None if value is None or np.ndim(value) != 1 else [(op.params["dim"], np.asarray(value))]
    found = index_tensor(op, ctx)
    return [found[:2]] if found is not None else outer_index_vectors(op, ctx)


def _check_gather(op, ctx):
    found = _gathers(op, ctx)
    if found is None:
        return ("unsupported: indexing with run-time indices or several index tensors that are not an outer "
                "product (ncnn gathers constant indices one dim at a time)")
    x = op.inputs[0]
    for dim, idx in found:
        size = (x.shape or [None] * (dim + 1))[dim]
        if not _one_hot_size(size, idx.size) and gather_runs(idx.reshape(-1), size) is None:
            return f"unsupported: gather of {idx.size} indices in more than {_RUNS_LIMIT} runs"
    return None


@aten_converter("aten.index.Tensor", "aten.index_select.default", validator=_check_gather, priority=Priority.LOW)
def gather(ctx, op):
    """Constant indices: one ``torch.index_select`` per gathered dim with the (flattened) indices
    as a param (crops of its runs + concat in ncnn), then a reshape when one index has several
    dims."""
    x, out = op.inputs[0], op.outputs[0]
    found = _gathers(op, ctx)
    y = x
    for k, (dim, idx) in enumerate(found):
        index = [int(i) for i in np.asarray(idx).reshape(-1)]
        last = k == len(found) - 1
        if last and np.ndim(idx) <= 1:
            return ctx.emit("torch.index_select", [y], params={"dim": dim, "index": index})
        dim = normalize_dim(dim, _rank(y))
        shape = list(y.shape[:dim]) + [len(index)] + list(y.shape[dim + 1:])
        y = ctx.emit("torch.index_select", [y], params={"dim": dim, "index": index}, shape=shape)
    return ctx.emit("Tensor.reshape", [y], params={"shape": list(out.shape)})


# ----------------------------------------------------------------------------- pnnx → ncnn

def moves_batch(x: Operand, out: Operand) -> bool:
    """Whether reshaping ``x`` to ``out`` moves data between the batch and the blob's dims (the
    batch axis is merged, split off or changes whole): then a per-sample reshape is wrong unless
    both batches are a static 1."""
    bi, bo = batch_dim(x), batch_dim(out)
    if bi is None and bo is None:
        return False
    si = x.shape[bi] if bi is not None else 1
    so = out.shape[bo] if bo is not None else 1
    if si == 1 and so == 1:
        return False
    return bi is None or bo is None or reshape_axis(x.shape, bi, out.shape) != bo


def _outer_batch(shape: Sequence[Dim], b: int | None) -> tuple[Dim, int] | None:
    """``(n, s)`` when batch axis ``b`` of ``shape`` holds more than one sample and is outermost
    in row-major order (only static 1s before it): each sample is then one contiguous run of
    ``s`` (static) elements of the whole tensor."""
    if b is None or shape[b] == 1 or any(d != 1 for d in shape[:b]) or not is_static(shape[b + 1:]):
        return None
    return shape[b], _numel(shape[b + 1:])


def _unit_batch(shape: Sequence[Dim], b: int | None) -> bool:
    """No batch axis, or one that is a static 1 (the same Mat as none)."""
    return b is None or shape[b] == 1


def _run_reshape(ctx, x: Operand, n: Dim, s: int, *, split: bool) -> Operand:
    """The batch move between ``n`` samples of ``s`` elements and the blob ``(1, n, s)`` that
    holds them in a row, as ncnn's Reshape copies it with one ``memcpy`` per sample (its fast
    path for a batch axis next to the blob's outermost unit dim: the samples ``(1, s)``, with
    the blob ``(c=1, h=n, w=s)``, are never packed, so no element is copied on its own).
    ``x`` is that blob (``split``) or those samples (else)."""
    y = ctx.layer("Reshape", [x], w=s, h=n if isinstance(n, int) else int(ReshapeDim.INFER), c=1,
                  input_batch_axis=233 if split else 1, output_batch_axis=1 if split else 233)
    y.shape = [1, n, s]
    return set_batch_dim(y, 1 if split else None)


def contiguous_batch_move(ctx, x: Operand, out: Operand) -> Operand | None:
    """A batch move whose samples are contiguous runs of the whole tensor — split off the
    outermost dims of an unbatched blob, or merged back into one — as three cheap layers:
    a per-sample reshape to ``(1, s)`` (or of the blob to ``(1, n, s)``), the batch Reshape in
    ncnn's memcpy form (:func:`_run_reshape`) and a reshape to the output's ncnn shape. ncnn's
    general batch Reshape computes two offsets per element (~50x slower: Swin's windows).
    None when the move is not of that kind (the batch changes axis within the data)."""
    bi, bo = batch_dim(x), batch_dim(out)
    src, dst = list(x.shape), list(out.shape)
    if _unit_batch(src, bi) and (run := _outer_batch(dst, bo)) is not None:
        n, s = run
        y = _run_reshape(ctx, reshape_to(ctx, x, [1, n, s]), n, s, split=True)
    elif _unit_batch(dst, bo) and (run := _outer_batch(src, bi)) is not None:
        n, s = run
        rows = x
        if ncnn_shape(x) != [1, s]:
            rows = ctx.layer("Reshape", [x], h=1, w=s)
            rows.shape = [1, n, s]
            set_batch_dim(rows, 1)
        y = _run_reshape(ctx, rows, n, s, split=False)
    else:
        return None
    return reshape_to(ctx, y, ncnn_shape(out), final=True)


def batch_reshape(ctx, x: Operand, out: Operand, op=None) -> Operand:
    """One ncnn ``Reshape`` over the whole logical tensors (the batch as a dim): ``12=`` where
    the batch axis is in ``x``'s torch shape, ``13=`` where it goes in ``out``'s (233: none).
    Dynamic dims keep their input extent or are inferred; more than one that is neither needs
    the shape expression of ``op`` (the reshape), evaluated over the batch count too. A move
    of contiguous samples takes :func:`contiguous_batch_move`'s memcpy form instead."""
    if x.shape is not None and out.shape is not None:
        fast = contiguous_batch_move(ctx, x, out)
        if fast is not None:
            return fast
    bi, bo = batch_dim(x), batch_dim(out)
    src, dst = list(x.shape), list(out.shape)
    if not 1 <= len(dst) <= 5:
        ctx.unsupported(f"reshape to {dst}: ncnn holds at most 4 dims and a batch")
    axes = {"input_batch_axis": 233 if bi is None else bi, "output_batch_axis": 233 if bo is None else bo}
    dims: list[int] = []
    inferred = False
    for j, d in enumerate(dst):
        if isinstance(d, int):
            dims.append(d)
        elif j < len(src) and src[j] == d:
            dims.append(int(ReshapeDim.KEEP))
        elif not inferred:
            dims.append(int(ReshapeDim.INFER))
            inferred = True
        elif op is not None and "shape_expr" in op.params:
            expr = ncnn_list_expression(str(op.params["shape_expr"]), op.inputs, batch=True)
            return ctx.layer("Reshape", list(op.inputs), shape_expr=expr, **axes)
        else:
            ctx.unsupported(f"reshape of {x.name} {src} to {dst} moving the batch axis with more than one dynamic dim "
                            "that is not computed from sizes")
    if len(dims) == 5:
        return ctx.layer("Reshape", [x], shape_expr=",".join(str(d) for d in reversed(dims)), **axes)
    return ctx.layer("Reshape", [x], **dict(zip(_DIM_NAMES[len(dims)], dims)), **axes)


@ncnn_rule("Tensor.reshape", "Tensor.view", "torch.flatten", "torch.squeeze", "torch.unsqueeze")
def reshape_ncnn(ctx, op):
    """Every reshape-like op: nothing, Flatten or Reshape to the output's ncnn shape (with a
    shape expression when more than one dim is dynamic); a ``Reshape`` with batch axes when the
    batch moves (:func:`moves_batch`)."""
    out = ncnn_shape(op.outputs[0])
    if out is None or ncnn_shape(op.inputs[0]) is None:
        ctx.unsupported("reshape of a tensor of unknown shape")
    if moves_batch(op.inputs[0], op.outputs[0]):
        return batch_reshape(ctx, op.inputs[0], op.outputs[0], op)
    try:
        return reshape_to(ctx, op.inputs[0], out, final=True)
    except Unsupported:
        if "shape_expr" not in op.params:
            raise
    return ctx.layer("Reshape", list(op.inputs), shape_expr=ncnn_shape_expression(op))


#: ncnn expression operators for the pnnx expression functions (others keep their names; ncnn
#: refuses ``maximum``/``minimum`` at run time: "malformed literal token")
_NCNN_EXPR_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_divide": "//", "maximum": "max",
                  "minimum": "min"}


def ncnn_shape_expression(op) -> str:
    """The ncnn ``Reshape`` ``shape_expr`` of a ``Tensor.reshape`` with a pnnx ``shape_expr``:
    the batch dim left out, ``size(@k,d)`` as blob ``k``'s ncnn dim (``1h``), in w-first order."""
    return ncnn_list_expression(str(op.params["shape_expr"]), op.inputs, drop=batch_dim(op.outputs[0]))


def ncnn_list_expression(text: str, inputs, *, drop: int | None = None, batch: bool = False) -> str:
    """A pnnx list expression (``[size(@0,2),mul(size(@1,3),2)]``) as an ncnn one over the
    blobs ``inputs``, innermost first (``*(1w,2),0h``); item ``drop`` (a batch dim) left out.
    With ``batch`` the list is a whole logical shape (a batch-aware ``Reshape``): up to 5 items,
    and a measured batch dim is the blob's batch count (``0n``) instead of 1."""
    text = text.strip()
    try:
        items = [parse_expression(t) for t in _split_top(text[1:-1])]
    except ExpressionError as e:
        raise Unsupported(f"unsupported: shape expression {text}: {e}") from None
    items = [t for i, t in enumerate(items) if i != drop]
    if not 1 <= len(items) <= 4 + batch:
        raise Unsupported(f"unsupported: ncnn has no {len(items)}-D blobs (shape {text})")
    return ",".join(_ncnn_term(t, inputs, batch=batch) for t in reversed(items))


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    return parts + [cur]


def _ncnn_term(node, inputs, *, batch: bool = False) -> str:
    if isinstance(node, Call) and node.name == "size" and len(node.args) == 2 and isinstance(node.args[0], Arg):
        t = inputs[node.args[0].index]
        d = normalize_dim(int(node.args[1]), _rank(t))
        if d == batch_dim(t):
            return f"{node.args[0].index}n" if batch else "1"
        return f"{node.args[0].index}{_DIM_NAMES[ncnn_rank_of(t)][ncnn_axis(t, d)]}"
    if isinstance(node, Call) and node.name == "floor_divide" and _may_be_negative(node.args[0]):
        # ncnn's integer // truncates; on floats it floors, as Python does (halves are exact)
        a, b = (_ncnn_term(x, inputs, batch=batch) for x in node.args)
        return f"//(*({a},0.5),*({b},0.5))"
    if isinstance(node, Call):
        args = ",".join(_ncnn_term(a, inputs, batch=batch) for a in node.args)
        return f"{_NCNN_EXPR_OPS.get(node.name, node.name)}({args})"
    if isinstance(node, Arg):
        raise Unsupported(f"unsupported: shape expression reads the value of input {node.index}")
    return str(int(node)) if float(node).is_integer() else repr(float(node))


def _may_be_negative(node) -> bool:
    """Whether a size expression can be negative: a negative literal, a negation or a
    difference somewhere in it (sizes, sums, products and quotients of them are not)."""
    if isinstance(node, Call):
        if node.name in ("neg", "sub"):
            return True
        return node.name != "size" and any(_may_be_negative(a) for a in node.args)
    return not isinstance(node, Arg) and float(node) < 0


def ncnn_rank_of(t: Operand) -> int:
    shape = ncnn_shape(t)
    if not shape or len(shape) > 4:
        raise Unsupported(f"unsupported: {t.name} {t.shape} has no ncnn dims to measure")
    return len(shape)


#: Permute order_type for a batch-less permutation (outermost first): ncnn numbers the
#: permutations of each rank in lexicographic order (permute.cpp, pnnx Tensor_permute.cpp)
PERMUTE_ORDER = {r: {p: i for i, p in enumerate(itertools.permutations(range(r)))} for r in (1, 2, 3, 4)}


def permute_dims(op) -> list[int]:
    """The permutation a ``Tensor.permute``/``torch.permute``/``torch.transpose`` applies."""
    rank = _rank(op.inputs[0])
    if op.type == "torch.transpose":
        dims = list(range(rank))
        d0, d1 = normalize_dim(op.params["dim0"], rank), normalize_dim(op.params["dim1"], rank)
        dims[d0], dims[d1] = dims[d1], dims[d0]
        return dims
    return [normalize_dim(d, rank) for d in op.params["dims"]]


@ncnn_rule("Tensor.permute", "torch.permute", "torch.transpose")
def permute_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    dims = permute_dims(op)
    src = ncnn_shape(x)
    b = batch_dim(x)  # the batch dim (size 1 in ncnn) is not in the blob: permute the others
    perm = [d - (1 if b is not None and d > b else 0) for d in dims if d != b]
    if len(perm) > 4:
        ctx.unsupported(f"permute of a {len(perm)}-D tensor (ncnn blobs have at most 4 dims)")
    permuted = [src[p] for p in perm]
    want = ncnn_shape(out)
    y = x
    if perm != sorted(perm):
        if permuted == want:
            return ctx.layer("Permute", [x], order_type=PERMUTE_ORDER[len(perm)][tuple(perm)])
        y = intermediate(ctx.layer("Permute", [x], order_type=PERMUTE_ORDER[len(perm)][tuple(perm)]), permuted)
    # ones moved in or out of the blob with the batch axis (ncnn's batch is 1): a reshape
    return reshape_to(ctx, y, want, final=True)


def _same_rank(inputs: Sequence[Operand]) -> int:
    ranks = {len(ncnn_shape(i) or []) for i in inputs}
    if len(ranks) != 1:
        raise Unsupported("unsupported: inputs mix batched and batch-less tensors "
                          f"({', '.join(f'{i.name}{list(i.shape or [])}' for i in inputs)})")
    return ranks.pop()


@ncnn_rule("torch.cat")
def cat_ncnn(ctx, op):
    _same_rank(op.inputs)
    ref = max(op.inputs, key=lambda i: batch_dim(i) is not None)
    return ctx.layer("Concat", list(op.inputs), axis=ncnn_axis(ref, op.params["dim"]))


def _split_sizes(op, dim: int) -> list[int]:
    sizes = []
    for o in op.outputs:
        s = (o.shape or [None] * (dim + 1))[dim] if o.shape is not None and dim < len(o.shape) else None
        sizes.append(s if isinstance(s, int) else -233)
    if op.type == "torch.split" and -233 in sizes:
        sec = op.params["split_size_or_sections"]
        sizes = list(sec) if isinstance(sec, list) else [sec] * len(op.outputs)
        sizes[-1] = -233
    return sizes


@ncnn_rule("torch.chunk", "torch.split")
def split_ncnn(ctx, op):
    x = op.inputs[0]
    dim = normalize_dim(op.params["dim"], _rank(x))
    axis = ncnn_axis(x, dim)
    return ctx.layer("Slice", [x], outputs=len(op.outputs), slices=_split_sizes(op, dim), axis=axis)


@ncnn_rule("torch.unbind")
def unbind_ncnn(ctx, op):
    x = op.inputs[0]
    dim = normalize_dim(op.params["dim"], _rank(x))
    axis = ncnn_axis(x, dim)
    n = len(op.outputs)
    parts = ctx.layer("Slice", [x], outputs=n, slices=[1] * n, axis=axis)
    src = ncnn_shape(x)
    piece = src[:axis] + [1] + src[axis + 1:]
    return [reshape_to(ctx, intermediate(p, piece), ncnn_shape(o), final=True) for p, o in zip(parts, op.outputs)]


def _slice_bounds(size: Dim, start: int, end: int, step: int) -> tuple[int, int]:
    """Crop starts/ends for ``[start:end]`` on an axis of ``size`` (-233 = to the end)."""
    if isinstance(size, int):
        s = min(max(start + size if start < 0 else start, 0), size)
        e = min(max(end + size if end < 0 else end, 0), size)
        if e <= s:
            raise Unsupported(f"unsupported: empty slice [{start}:{end}] of size {size}")
        if step > 1:  # the strided pooling reads from s on: keep the end only if it drops a sample
            count = (e - s - 1) // step + 1
            e = size if (size - s - 1) // step + 1 == count else s + (count - 1) * step + 1
        return s, (-233 if e == size else e)
    if step != 1:
        raise Unsupported("unsupported: strided slice along a dynamic dim")
    if end >= INT64_MAX // 2:
        return start, -233
    if end == 0:
        raise Unsupported(f"unsupported: empty slice [{start}:{end}]")
    return start, end


def _crop(ctx, x, axis: int, start: int, end: int, shape: list, final: bool):
    y = ctx.layer("Crop", [x], starts=[start], ends=[end], axes=[axis])
    return y if final else intermediate(y, shape)


def _strided(ctx, x, axis: int, step: int, shape: list) -> Operand:
    """Every ``step``-th element along ``axis`` (starting with the first) of ``x`` (static ncnn
    shape ``shape``): a 1×1 max Pooling with stride ``step``, on ``x`` itself when ``axis`` is
    its h or w, else on an (outer, axis, inner) view."""
    n = shape[axis]
    k = (n - 1) // step + 1
    if len(shape) == 3 and axis > 0:
        y, view = x, list(shape)
        strides = {"stride_h": step} if axis == 1 else {"stride_w": step}
    else:
        view = [_numel(shape[:axis]), n, _numel(shape[axis + 1:])]
        y, axis = reshape_to(ctx, x, view), 1
        strides = {"stride_h": step}
    pooled = list(view)
    pooled[axis] = k
    z = ctx.layer("Pooling", [y], pooling_type=int(PoolingType.MAX), kernel_w=1, kernel_h=1,
                  stride_w=strides.get("stride_w", 1), stride_h=strides.get("stride_h", 1),
                  pad_mode=int(PoolPadMode.VALID))
    return intermediate(z, pooled)


def _whole_batch(x, dim: int, first: bool) -> bool:
    """Whether a slice/select along dim ``dim`` keeps the whole (size-1) batch axis."""
    return dim == batch_dim(x) and x.shape[dim] == 1 and first


def _crop_expression(ctx, op):
    """``Tensor.slice`` with run-time bounds → a ``Crop`` evaluating them over its extra inputs."""
    x = op.inputs[0]
    axis = ncnn_axis(x, op.params["dim"])

    def term(key: str, default: str) -> str:
        if f"{key}_expr" not in op.params:
            v = op.params[key]
            return default if v >= INT64_MAX // 2 else str(int(v))
        try:
            return _ncnn_term(parse_expression(str(op.params[f"{key}_expr"])), op.inputs)
        except ExpressionError as e:
            raise Unsupported(f"unsupported: slice bound {op.params[f'{key}_expr']}: {e}") from None

    return ctx.layer("Crop", list(op.inputs), starts_expr=term("start", "0"), ends_expr=term("end", "-233"),
                     axes_expr=str(axis))


@ncnn_rule("Tensor.slice")
def slice_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    if "start_expr" in op.params or "end_expr" in op.params:
        return _crop_expression(ctx, op)
    dim = normalize_dim(op.params["dim"], _rank(x))
    if _whole_batch(x, dim, op.params["start"] in (0, -1)):
        return reshape_to(ctx, x, ncnn_shape(out), final=True)
    axis = ncnn_axis(x, dim)
    src = ncnn_shape(x)
    step = op.params.get("step", 1)
    if step < 1:
        ctx.unsupported(f"slice step {step}")
    start, end = _slice_bounds(src[axis], op.params["start"], op.params["end"], step)
    if step == 1:
        return _crop(ctx, x, axis, start, end, ncnn_shape(out), final=True)
    if not is_static(src) and len(src) == 2 and isinstance(src[axis], int):
        # a 2-D blob (a pose head's keypoints by anchor, the anchors' count dynamic) as a 3-D
        # (1, h, w) view, which keeps its dynamic dim in place
        x, src, axis = reshape_to(ctx, x, [1, *src]), [1, *src], axis + 1
    if not is_static(src) and not (isinstance(src[axis], int) and len(src) == 3 and axis > 0):
        # a strided h or w of a 3-D blob pools that blob directly, whatever its other dims
        ctx.unsupported("strided slice of a tensor with dynamic shape")
    stop = src[axis] if end == -233 else end
    cropped = list(src)
    cropped[axis] = stop - start
    y = x if (start == 0 and stop == src[axis]) else _crop(ctx, x, axis, start, end, cropped, final=False)
    z = _strided(ctx, y, axis, step, cropped)
    return reshape_to(ctx, z, ncnn_shape(out), final=True)


@ncnn_rule("Tensor.select")
def select_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    if _whole_batch(x, normalize_dim(op.params["dim"], _rank(x)), op.params["index"] in (0, -1)):
        return reshape_to(ctx, x, ncnn_shape(out), final=True)  # x[0]: the only sample
    axis = ncnn_axis(x, op.params["dim"])
    src = ncnn_shape(x)
    index = op.params["index"]
    if isinstance(src[axis], int) and index < 0:
        index += src[axis]
    piece = list(src)
    piece[axis] = 1
    # ncnn's Crop reads end 0 as "to the end", which is what index -1 needs
    y = _crop(ctx, x, axis, index, -233 if index + 1 == 0 else index + 1, piece, final=False)
    return reshape_to(ctx, y, ncnn_shape(out), final=True)


#: gathers in more runs than this are a one-hot ``MatMul`` where it applies (one layer, not a
#: Crop per run and a Concat)
_CROP_RUNS = 4
#: the largest one-hot gather matrix (elements)
_ONE_HOT_LIMIT = 1 << 22


def _one_hot_size(n, m: int) -> bool:
    """Whether gathering ``m`` of ``n`` (static) elements fits a one-hot matrix."""
    return isinstance(n, int) and n * m <= _ONE_HOT_LIMIT


def _one_hot_fits(src: list, axis: int, m: int) -> bool:
    """A one-hot gather applies along the w or h axis of a blob of two or more dims."""
    return len(src) >= 2 and axis >= len(src) - 2 and _one_hot_size(src[axis], m)


def _one_hot_gather(ctx, x: Operand, axis: int, index: np.ndarray, src: list) -> Operand:
    """Gather along the w (h) axis as one ``MatMul`` with a constant one-hot matrix: ``x @ P``
    with ``P[index[j], j] = 1`` (``Pᵀ @ x``). Exact for finite values: each output is one input
    times 1 plus zeros."""
    n = src[axis]
    onehot = np.zeros((n, len(index)), np.float32)
    onehot[np.where(index < 0, index + n, index), np.arange(len(index))] = 1.0
    if axis == len(src) - 2:
        onehot = np.ascontiguousarray(onehot.T)
    shape = list(onehot.shape)
    p = ctx.layer("MemoryData", [], weights={"data": onehot}, name=f"{ctx.name}_onehot", shape=shape,
                  **memorydata_params(shape))
    return ctx.layer("MatMul", [x, p] if axis == len(src) - 1 else [p, x])


@ncnn_rule("torch.index_select")
def index_select_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    dim = normalize_dim(op.params["dim"], _rank(x))
    if _whole_batch(x, dim, list(op.params["index"]) in ([0], [-1])):
        return reshape_to(ctx, x, ncnn_shape(out), final=True)  # the only sample
    axis = ncnn_axis(x, dim)
    src = ncnn_shape(x)
    index = np.asarray(op.params["index"], dtype=np.int64)
    runs = gather_runs(index, src[axis])
    if (runs is None or len(runs) > _CROP_RUNS) and _one_hot_fits(src, axis, len(index)):
        return _one_hot_gather(ctx, x, axis, index, src)
    if runs is None:
        ctx.unsupported(f"index_select of {len(index)} indices in more than {_RUNS_LIMIT} runs "
                        "along an outer axis")
    if len(runs) == 1:
        (start, stop), = runs
        return _crop(ctx, x, axis, start, stop, ncnn_shape(out), final=True)
    parts = []
    for start, stop in runs:
        piece = list(src)
        piece[axis] = stop - start
        parts.append(_crop(ctx, x, axis, start, stop, piece, final=False))
    return ctx.layer("Concat", parts, axis=axis)


def _tile(ctx, x: Operand, out: Operand, repeats: Sequence) -> Operand:
    """``x`` (right-aligned to ``out``'s rank) tiled ``repeats[i]`` times along each dim of ``out``:
    an ncnn ``Tile`` with numpy-style ``repeats`` over the batch-less axes. The output's batch
    axis is never tiled: it is ``x``'s own batch (or a 1 ncnn broadcasts over the batch)."""
    rank = len(out.shape)
    padded = [1] * (rank - len(x.shape)) + list(x.shape)
    bo, bx = batch_dim(out), batch_dim(x)
    at = None if bx is None else bx + rank - len(x.shape)
    if bo is not None:
        if repeats[bo] != 1 or (at != bo and padded[bo] != 1):
            ctx.unsupported(f"repeating along the batch axis of {x.name} {x.shape}")
        padded, repeats = padded[:bo] + padded[bo + 1:], list(repeats[:bo]) + list(repeats[bo + 1:])
    elif at is not None:
        ctx.unsupported(f"tiling {x.name} {x.shape} whose batch axis the result does not keep")
    if len(padded) > 4:
        ctx.unsupported(f"tiling a {len(padded)}-D tensor (ncnn blobs have at most 4 dims)")
    if not all(isinstance(r, int) and r >= 1 for r in repeats):
        ctx.unsupported(f"repeats {list(repeats)} are not constant positive integers")
    y = reshape_to(ctx, x, padded)
    if all(r == 1 for r in repeats):
        return reshape_to(ctx, y, ncnn_shape(out), final=True)
    return ctx.layer("Tile", [y], repeats=list(repeats))


def _expand_into_batch(ctx, x: Operand, out: Operand, padded: list) -> Operand:
    """A 1 expanded to a static batch of N: the copies made for real — ``x`` as one unbatched
    tensor (it is one sample), tiled to ``out``'s whole shape, then that dim moved into the
    batch by one ``Reshape`` (13=): a one-sample blob standing for N would break every reader
    that is not a broadcasting BinaryOp (a batch moved into the dims, a reduction)."""
    if len(out.shape) > 4:
        ctx.unsupported(f"expand of {x.name} {x.shape} to a batch of {out.shape} (more than 4 other dims)")
    one = x if batch_dim(x) is None else reshape_to(ctx, x, list(x.shape), name=f"{ctx.name}_one")
    y = reshape_to(ctx, one, padded, name=f"{ctx.name}_padded")
    repeats = [b if a != b else 1 for a, b in zip(padded, out.shape)]
    tiled = intermediate(ctx.layer("Tile", [y], name=f"{ctx.name}_tile", repeats=repeats), list(out.shape))
    return batch_reshape(ctx, tiled, out)


@ncnn_rule("Tensor.expand")
def expand_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    if x.shape is None or out.shape is None or len(out.shape) < len(x.shape):
        ctx.unsupported(f"expand of {x.name} {x.shape} to {out.shape}")
    padded = [1] * (len(out.shape) - len(x.shape)) + list(x.shape)
    bo = batch_dim(out)
    if bo is not None and padded[bo] == 1 and is_static(out.shape) and out.shape[bo] > 1:
        return _expand_into_batch(ctx, x, out, padded)
    repeats = []
    for i, (a, b) in enumerate(zip(padded, out.shape)):
        if a == b or i == batch_dim(out):
            repeats.append(1)  # the batch axis: x's own batch, or a 1 ncnn broadcasts over it
        elif a == 1 and isinstance(b, int):
            repeats.append(b)
        else:
            ctx.unsupported(f"expand of {x.name} {x.shape} to {out.shape} (dim {i}: {a} -> {b})")
    return _tile(ctx, x, out, repeats)


@ncnn_rule("Tensor.repeat")
def repeat_ncnn(ctx, op):
    return _tile(ctx, op.inputs[0], op.outputs[0], op.params["sizes"])


@ncnn_rule("nn.ChannelShuffle")
def channel_shuffle_ncnn(ctx, op):
    x = op.inputs[0]
    if len(ncnn_shape(x) or []) not in (3, 4) or ncnn_axis(x, 1) != 0:
        ctx.unsupported(f"channel shuffle of shape {x.shape} (ncnn shuffles the channels of a (N, C, H, W) or "
                        "(N, C, D, H, W) tensor)")
    return ctx.layer("ShuffleChannel", [x], group=op.params["groups"])



