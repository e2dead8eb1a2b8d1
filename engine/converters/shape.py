"""Shape operators: view/reshape/flatten/unflatten/squeeze/unsqueeze, permute/transpose/t, cat,
chunk/split, slice/select, channel shuffle and no-op expands.

ATen → pnnx (pnnx's own spellings):

* ``aten.view.default``, ``aten.reshape.default``, ``aten._unsafe_view.default``,
  ``aten.view_copy.default``, ``aten.unflatten.int`` → ``Tensor.reshape`` (``shape``);
* ``aten.flatten.using_ints`` → ``torch.flatten`` (``start_dim``, ``end_dim``);
* ``aten.squeeze.dim|dims|default`` → ``torch.squeeze`` (``dim``); ``aten.unsqueeze.default`` →
  ``torch.unsqueeze`` (``dim``);
* ``aten.permute.default`` → ``Tensor.permute`` (``dims``); ``aten.transpose.int`` /
  ``aten.t.default`` → ``torch.transpose`` (``dim0``, ``dim1``);
* ``aten.cat.default`` / ``aten.concat.default`` → ``torch.cat`` (``dim``);
* ``aten.chunk.default`` → ``torch.chunk``; ``aten.split.Tensor``,
  ``aten.split_with_sizes.default``, ``aten.split.sizes`` → ``torch.split``
  (``split_size_or_sections``, ``dim``); ``aten.unbind.int`` → ``torch.unbind``;
* ``aten.slice.Tensor`` → ``Tensor.slice`` (``dim``, ``start``, ``end``, ``step``);
  ``aten.select.int`` → ``Tensor.select`` (``dim``, ``index``);
* ``aten.channel_shuffle.default`` / ``aten.native_channel_shuffle.default`` →
  ``nn.ChannelShuffle`` (``groups``);
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
import logging
from typing import Sequence

import numpy as np

from ..convert.context import Unsupported
from ..convert.registry import Priority, aten_converter, ncnn_rule
from ..convert.shapes import is_batched, ncnn_axis, ncnn_shape, normalize_dim
from ..ir import Dim, Operand
from ..ncnn.enums import PoolingType, PoolPadMode, ReshapeDim

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
    opd.meta["batch"] = False
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
        if not final or x.shape == ctx.current.outputs[0].shape:
            return x
        # same ncnn blob, other torch shape: consumers' params refer to the new shape, so keep
        # a distinct value (a Reshape the eliminate_noop_reshape pass drops after lowering)
    if len(out) == 1 and (not isinstance(out[0], int) or (is_static(src) and _numel(src) == out[0])):
        y = ctx.layer("Flatten", [x], name=name)
    else:
        y = ctx.layer("Reshape", [x], name=name, **reshape_params(out, src))
    return y if final else intermediate(y, out)


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


@aten_converter("aten.view.default", "aten._unsafe_view.default", "aten.view_copy.default")
def view(ctx, op):
    return ctx.emit("Tensor.reshape", [op.inputs[0]], params={"shape": _size_param(op, "size")})


@aten_converter("aten.reshape.default")
def reshape(ctx, op):
    return ctx.emit("Tensor.reshape", [op.inputs[0]], params={"shape": _size_param(op, "shape")})


@aten_converter("aten.unflatten.int")
def unflatten(ctx, op):
    return ctx.emit("Tensor.reshape", [op.inputs[0]], params={"shape": list(op.outputs[0].shape or [])})


@aten_converter("aten.flatten.using_ints")
def flatten(ctx, op):
    return ctx.emit("torch.flatten", [op.inputs[0]],
                    params={"start_dim": op.params["start_dim"], "end_dim": op.params["end_dim"]})


def _drops_dim0(dims: Sequence[int], rank: int) -> bool:
    return any(normalize_dim(d, max(rank, 1)) == 0 for d in dims)


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
    y = ctx.emit("torch.squeeze", [x], params={"dim": dims if len(dims) > 1 else dims[0]})
    if _drops_dim0(dims, rank):
        y.producer.meta["batch_out"] = [False]
    return y


@aten_converter("aten.unsqueeze.default", "aten.unsqueeze_copy.default")
def unsqueeze(ctx, op):
    y = ctx.emit("torch.unsqueeze", [op.inputs[0]], params={"dim": op.params["dim"]})
    if normalize_dim(op.params["dim"], _rank(op.inputs[0]) + 1) == 0:
        # the new leading 1 is not the batch axis (the batch moved to dim 1)
        y.producer.meta["batch_out"] = [False]
    return y


@aten_converter("aten.permute.default", "aten.permute_copy.default")
def permute(ctx, op):
    x = op.inputs[0]
    rank = _rank(x)
    dims = [normalize_dim(d, rank) for d in op.params["dims"]]
    if dims == list(range(rank)):
        return x
    y = ctx.emit("Tensor.permute", [x], params={"dims": dims})
    if dims[0] != 0:
        y.producer.meta["batch_out"] = [False]
    return y


def _transpose(ctx, x, dim0: int, dim1: int):
    rank = _rank(x)
    if rank < 2:
        return x
    d0, d1 = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
    if d0 == d1:
        return x
    y = ctx.emit("torch.transpose", [x], params={"dim0": d0, "dim1": d1})
    if 0 in (d0, d1):
        y.producer.meta["batch_out"] = [False]
    return y


@aten_converter("aten.transpose.int")
def transpose(ctx, op):
    return _transpose(ctx, op.inputs[0], op.params["dim0"], op.params["dim1"])


@aten_converter("aten.t.default")
def t(ctx, op):
    return _transpose(ctx, op.inputs[0], 0, 1)


@aten_converter("aten.cat.default", "aten.concat.default")
def cat(ctx, op):
    if len(op.inputs) == 1:
        return op.inputs[0]
    return ctx.emit("torch.cat", list(op.inputs), params={"dim": op.params.get("dim", 0)})


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


@aten_converter("aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    start, end, step = (_const_int(ctx, op, k) for k in ("start", "end", "step"))
    if _same_shape(x, out) and step == 1:
        return x  # x[:, :] style full slices
    return ctx.emit("Tensor.slice", [x], params={"dim": op.params["dim"], "start": 0 if start is None else start,
                                                   "end": INT64_MAX if end is None else end, "step": step})


@aten_converter("aten.select.int", "aten.select_copy.int")
def select(ctx, op):
    y = ctx.emit("Tensor.select", [op.inputs[0]],
                 params={"dim": op.params["dim"], "index": _const_int(ctx, op, "index")})
    if normalize_dim(op.params["dim"], _rank(op.inputs[0])) == 0:
        y.producer.meta["batch_out"] = [False]
    return y


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


def index_vector(op, ctx):
    """(dim, index array, index operand) of an ``aten.index.Tensor`` with exactly one index, a
    constant 1-D integer vector; else None."""
    used = [(d, v) for d, v in enumerate(op.params.get("indices") or []) if v is not None]
    if len(used) != 1:
        return None
    opd = op.named_input(f"indices.{used[0][0]}")
    value = None if opd is None else ctx.const_value(opd)
    if value is None or np.ndim(value) != 1 or not np.issubdtype(np.asarray(value).dtype, np.integer):
        return None
    return used[0][0], np.asarray(value, dtype=np.int64), opd


_RUNS_LIMIT = 32


def _gather_runs(idx: np.ndarray, size) -> list[tuple[int, int]] | None:
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


def _check_gather(op, ctx):
    found = index_vector(op, ctx) if op.type == "aten.index.Tensor" else None
    if op.type == "aten.index_select.default":
        value = ctx.const_value(op.inputs[1])
        found = None if value is None or np.ndim(value) != 1 else (op.params["dim"], np.asarray(value), op.inputs[1])
    if found is None:
        return "unsupported: indexing with run-time or multi-dim indices (ncnn gathers constant indices on one dim)"
    dim, idx, _ = found
    x = op.inputs[0]
    if _gather_runs(idx, (x.shape or [None] * (dim + 1))[dim]) is None:
        return f"unsupported: gather of {len(idx)} indices in more than {_RUNS_LIMIT} runs"
    return None


@aten_converter("aten.index.Tensor", "aten.index_select.default", validator=_check_gather, priority=Priority.LOW)
def gather(ctx, op):
    """A constant index vector on one dim: ``torch.index_select`` with the indices as a param
    (crops of its runs + concat in ncnn)."""
    if op.type == "aten.index.Tensor":
        dim, idx, _ = index_vector(op, ctx)
    else:
        dim, idx = op.params["dim"], ctx.const_value(op.inputs[1])
    index = [int(i) for i in np.asarray(idx).reshape(-1)]
    return ctx.emit("torch.index_select", [op.inputs[0]], params={"dim": dim, "index": index})


# ----------------------------------------------------------------------------- pnnx → ncnn

@ncnn_rule("Tensor.reshape", "Tensor.view", "torch.flatten", "torch.squeeze", "torch.unsqueeze")
def reshape_ncnn(ctx, op):
    """Every reshape-like op: nothing, Flatten or Reshape to the output's ncnn shape."""
    out = ncnn_shape(op.outputs[0])
    if out is None or ncnn_shape(op.inputs[0]) is None:
        ctx.unsupported("reshape of a tensor of unknown shape")
    return reshape_to(ctx, op.inputs[0], out, final=True)


#: Permute order_type for a batch-less permutation (outermost first): ncnn numbers the
#: permutations of each rank in lexicographic order (permute.cpp, pnnx Tensor_permute.cpp)
PERMUTE_ORDER = {r: {p: i for i, p in enumerate(itertools.permutations(range(r)))} for r in (1, 2, 3, 4)}


def _permute_dims(op) -> list[int]:
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
    dims = _permute_dims(op)
    src = ncnn_shape(x)
    if is_batched(x):
        perm = [d - 1 for d in dims if d != 0]
    else:
        perm = dims
    if len(perm) > 4:
        ctx.unsupported(f"permute of a {len(perm)}-D tensor (ncnn blobs have at most 4 dims)")
    permuted = [src[p] for p in perm]
    want = ncnn_shape(out)
    y = x
    if perm != sorted(perm):
        if permuted == want:
            return ctx.layer("Permute", [x], order_type=PERMUTE_ORDER[len(perm)][tuple(perm)])
        y = intermediate(ctx.layer("Permute", [x], order_type=PERMUTE_ORDER[len(perm)][tuple(perm)]), permuted)
    # the batch axis moved (ncnn's batch is 1, so that is a reshape)
    return reshape_to(ctx, y, want, final=True)


def _same_rank(op) -> int:
    ranks = {len(ncnn_shape(i) or []) for i in op.inputs}
    if len(ranks) != 1:
        raise Unsupported("unsupported: inputs mix batched and batch-less tensors "
                          f"({', '.join(f'{i.name}{list(i.shape or [])}' for i in op.inputs)})")
    return ranks.pop()


@ncnn_rule("torch.cat")
def cat_ncnn(ctx, op):
    _same_rank(op)
    ref = max(op.inputs, key=lambda i: bool(i.meta.get("batch")))
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
    return dim == 0 and is_batched(x) and x.shape[0] == 1 and first


@ncnn_rule("Tensor.slice")
def slice_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
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
    if not is_static(src):
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


@ncnn_rule("torch.index_select")
def index_select_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    dim = normalize_dim(op.params["dim"], _rank(x))
    axis = ncnn_axis(x, dim)
    src = ncnn_shape(x)
    runs = _gather_runs(np.asarray(op.params["index"], dtype=np.int64), src[axis])
    if runs is None:
        ctx.unsupported(f"index_select of {len(op.params['index'])} indices in more than {_RUNS_LIMIT} runs")
    if len(runs) == 1:
        (start, stop), = runs
        return _crop(ctx, x, axis, start, stop, ncnn_shape(out), final=True)
    parts = []
    for start, stop in runs:
        piece = list(src)
        piece[axis] = stop - start
        parts.append(_crop(ctx, x, axis, start, stop, piece, final=False))
    return ctx.layer("Concat", parts, axis=axis)


@ncnn_rule("nn.ChannelShuffle")
def channel_shuffle_ncnn(ctx, op):
    x = op.inputs[0]
    if len(ncnn_shape(x) or []) != 3:
        ctx.unsupported(f"channel shuffle of shape {x.shape} (ncnn shuffles the channels of a (N, C, H, W) tensor)")
    return ctx.layer("ShuffleChannel", [x], group=op.params["groups"])



