"""Turn lookups ncnn has no layer for into ATen arithmetic the converters lower (ATen level, after
``mark_integer_inputs``).

ncnn gathers only int32 token ids from a model input (``Embed``) and constant index lists
(``Crop``/``Concat``). Everything else is rewritten here:

* **computed indices** — ``embedding`` whose indices are computed (RoBERTa's position ids from a
  cumsum), ``index.Tensor`` / ``index_select`` / ``gather`` with run-time indices: a one-hot
  matrix ``eq(unsqueeze(index, -1), arange(N))`` (exact 0/1) multiplied with the data. Every
  output element is one data element plus zeros, so the lookup is exact (for finite data);
  negative indices of ``index.Tensor`` wrap around first. ``index.Tensor`` with several index
  tensors (adjacent, broadcast together) gathers from the flattened indexed dims;
* **constant indices into run-time data** with several index tensors (the ``mask[batch_idx,
  kv_idx]`` of Hugging Face's mask functions) → ``view`` to 1-D, ``index_select`` of the
  distinct constant positions, ``view``, ``expand`` (indices repeated along a dim are a
  broadcast, not a gather);
* **a gather from a constant that is the same along the gathered dim** (RoBERTa's token type ids
  ``zeros.gather(1, positions)``) is that constant, whatever the index;
* **a scalar written at computed indices** — ``scatter.value`` (DeepSeek-V3's group mask,
  ``zeros.scatter_(1, group_idx, 1)``): the one-hot rows of the indices, any of them along the
  dim, select ``value`` over the tensor (``where``);
* (``argmax``, ``max`` over a dim with indices and ``topk`` are :mod:`decompose_selections`',
  which runs just before and uses the same positions.)

A dynamic size (``torch.export.Dim("seq", max=N)``) along the looked-up dim is
rewritten the same way, with the positions ``arange(N)`` computed at the largest size and cut
to the run-time one (``fold_dynamic_constants``' mechanism: an ncnn ``Crop`` measuring a model
input), and the run-time size, where negative indices need it, summed from ``ones(N)`` cut the
same way. The reshapes around a one-hot product take at most one dynamic dim each; a lookup
that needs more, or whose size has no upper bound or is not a model input's, stays and is
refused by its converter with the reason. So does an ``index.Tensor`` whose indices are all
constants cut to a run-time size (the indexing converters' case). A lookup that a dedicated
converter (above the generic ``LOW`` priority: im2col's window gather, a reflection pad's
index) accepts as it is stays too.
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ..converters.shape import gather_runs
from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
from ._match import const_array, number
from .fold_dynamic_constants import cut_constant_to, largest_size
from .manager import graph_pass

log = logging.getLogger(__name__)


def _static(*operands: Operand) -> bool:
    return all(o is not None and o.shape is not None and all(isinstance(d, int) for d in o.shape) for o in operands)


def _broadcast(*shapes) -> list | None:
    """The broadcast of shapes whose dims may be symbols (None when two differ)."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for a, d in enumerate(s, rank - len(s)):
            if d != 1 and out[a] not in (1, d):
                return None
            out[a] = d if d != 1 else out[a]
    return out


def _product(dims) -> Any:
    """The number of elements of ``dims``: an int, or the one dynamic dim among 1s (else None)."""
    dynamic = [d for d in dims if not isinstance(d, int)]
    if not dynamic:
        return math.prod(dims)
    return dynamic[0] if len(dynamic) == 1 and all(d == 1 for d in dims if isinstance(d, int)) else None


def _reshapable(*shapes) -> bool:
    """Whether each shape has at most one dynamic dim (a ``view`` writes it as -1)."""
    return all(s is not None and sum(not isinstance(d, int) for d in s) <= 1 for s in shapes)


class Rewriter:
    """Emits a lookup's replacement before it (ATen operators), with the positions it needs."""

    def __init__(self, graph: Graph, op: Operator):
        self.graph, self.op = graph, op
        self.em = AtenEmitter(graph, op)

    def view(self, x: Operand, shape: list) -> Operand:
        if list(x.shape) == list(shape):
            return x
        return self.em.op("aten.view.default", {"self": x}, shape=shape, dtype=x.dtype,
                          size=[d if isinstance(d, int) else -1 for d in shape])

    def measurable(self, *dims) -> bool:
        """Whether each dim is static or a model input's size with an upper bound."""
        return all(largest_size(self.graph, d) is not None for d in dims)

    def along(self, values: np.ndarray, n: Any, rank: int = 1, axis: int = 0, name: str = "positions") -> Operand:
        """``values[:n]`` (``values`` of the largest ``n``) laid along ``axis`` of a rank-``rank``
        tensor, 1 elsewhere: a constant, cut to the run-time ``n`` when it is dynamic."""
        top = largest_size(self.graph, n)
        shape = [n if a == axis else 1 for a in range(rank)]
        large = values[:top].reshape([top if a == axis else 1 for a in range(rank)])
        return cut_constant_to(self.graph, self.em, large, shape, name=f"{self.op.name}_{name}")

    def positions(self, n: Any, rank: int = 1, axis: int = 0) -> Operand:
        """``arange(n)`` along ``axis`` (see :meth:`along`)."""
        return self.along(np.arange(largest_size(self.graph, n), dtype=np.int64), n, rank, axis)

    def one_hot(self, index: Operand, n: Any) -> Operand:
        """``eq(unsqueeze(index, -1), arange(n))`` as float: shape ``index.shape + [n]``."""
        em = self.em
        col = em.op("aten.unsqueeze.default", {"self": index}, shape=list(index.shape) + [1], dtype=index.dtype,
                    dim=len(index.shape))
        rng = self.positions(n)
        hit = em.op("aten.eq.Tensor", {"self": col, "other": rng}, shape=list(index.shape) + [n], dtype="bool")
        return em.op("aten._to_copy.default", {"self": hit}, shape=list(hit.shape), dtype="f32")

    def wrapped(self, index: Operand, n: Any) -> Operand:
        """``index + n * (index < 0)`` (PyTorch's negative indices); the index itself when it is
        known not to be negative (an argmax, a topk). A dynamic ``n`` is summed from cut ones."""
        if index.meta.get("nonnegative"):
            return index
        em, shape = self.em, list(index.shape)
        neg = em.op("aten.lt.Scalar", {"self": index}, shape=shape, dtype="bool", other=0)
        if isinstance(n, int):
            shift = em.op("aten.mul.Tensor", {"self": neg}, shape=shape, dtype=index.dtype, other=n)
        else:
            rank = len(shape)
            ones = self.along(np.ones(largest_size(self.graph, n), np.int64), n, max(rank, 1), max(rank, 1) - 1,
                              name="ones")
            size = em.op("aten.sum.dim_IntList", {"self": ones}, shape=[1] * rank, dtype="i64", dim=[-1],
                         keepdim=rank > 0)
            shift = em.op("aten.mul.Tensor", {"self": neg, "other": size}, shape=shape, dtype=index.dtype)
        return em.op("aten.add.Tensor", {"self": index, "other": shift}, shape=list(index.shape), dtype=index.dtype,
                     alpha=1)

    def can_gather_rows(self, x: Operand, first: int, count: int, index_shape: list) -> bool:
        """Whether :meth:`gather_rows` can write its reshapes (and measure a dynamic ``N``)."""
        shape = list(x.shape)
        pre, mid, post = shape[:first], shape[first:first + count], shape[first + count:]
        sizes = [_product(pre), _product(mid), _product(post), _product(index_shape)]
        return None not in sizes and self.measurable(sizes[1]) and \
            _reshapable(sizes[:3], [sizes[3], sizes[1]], pre + list(index_shape) + post)

    def gather_rows(self, x: Operand, first: int, count: int, flat_index: Operand, index_shape: list) -> Operand:
        """``x`` with its dims ``first .. first+count-1`` (``N`` elements) replaced by the
        elements at ``flat_index`` (of shape ``index_shape``), by a one-hot matmul (check
        :meth:`can_gather_rows` first)."""
        shape = list(x.shape)
        pre, mid, post = shape[:first], shape[first:first + count], shape[first + count:]
        n, p, q, k = _product(mid), _product(pre), _product(post), _product(index_shape)
        dtype = x.dtype if x.dtype in ("f32", "f16", "bf16", "f64") else "f32"
        em = self.em
        data = self.view(x, [p, n, q])
        if dtype != x.dtype:
            data = em.op("aten._to_copy.default", {"self": data}, shape=[p, n, q], dtype=dtype)
        hot = self.view(self.one_hot(flat_index, n), [k, n])
        picked = em.op("aten.matmul.default", {"self": hot, "other": data}, shape=[p, k, q], dtype=dtype)
        out = self.view(picked, pre + list(index_shape) + post)
        if x.dtype != dtype:
            out = em.op("aten._to_copy.default", {"self": out}, shape=list(out.shape), dtype=x.dtype)
        return out


# ----------------------------------------------------------------------------- the rewrites
def _embedding(r: Rewriter) -> Operand | None:
    op = r.op
    weight, index = op.named_input("weight"), op.named_input("indices")
    if op.meta.get("int32_indices") or const_array(index) is not None or const_array(weight) is None:
        return None
    if not _static(weight) or index.shape is None or len(weight.shape) != 2:
        return None
    v, d = weight.shape
    hot = r.one_hot(index, v)
    return r.em.op("aten.matmul.default", {"self": hot, "other": weight}, shape=list(index.shape) + [d],
                   dtype=weight.dtype)


def _index_tensors(op: Operator) -> list[tuple[int, Operand]] | None:
    listed = op.params.get("indices") or [n for n in op.input_names if n.startswith("indices.")]
    out = []
    for k, v in enumerate(listed):
        if v is None:
            continue
        opd = op.named_input(f"indices.{k}")
        if opd is None:
            return None
        out.append((k, opd))
    return out


def cut_constant(opd: Operand) -> tuple[np.ndarray, dict[int, str]] | None:
    """``(largest, {axis: size})`` when ``opd`` is a constant cut along some axes to run-time
    sizes (``fold_dynamic_constants``'s ``slice(constant, axis, 0, size)`` chains)."""
    cuts: dict[int, str] = {}
    while True:
        value = const_array(opd)
        if value is not None:
            return value, cuts
        p = opd.producer
        if p is None or p.type != "aten.slice.Tensor" or (p.params.get("start") or 0) != 0 or \
                p.params.get("step", 1) != 1 or opd.shape is None:
            return None
        axis = p.params.get("dim", 0) % len(opd.shape)
        cuts[axis] = opd.shape[axis]
        opd = p.inputs[0]


def _identity_index(r: Rewriter, x: Operand, dims: list[int], found: list) -> Operand | None:
    """``x[..., i0, i1, ...]`` whose index tensors (cut constants, dynamic) pick every element
    in order — each is ``arange`` of its dim's size along one axis of the index shape, or all
    zeros on a dim of size 1: ``x`` with those dims squeezed and moved by unsqueezes, then
    expanded when the index shape is larger."""
    shape = list(op_shape := r.op.outputs[0].shape or [])
    index_shape = shape[dims[0]:len(shape) - (len(x.shape) - dims[-1] - 1)]
    placed, squeezed = {}, []
    for (k, opd), d in zip(found, dims):
        cut = cut_constant(opd)
        if cut is None:
            return None
        large, _ = cut
        pad = len(index_shape) - large.ndim
        if pad < 0:
            return None
        if x.shape[d] == 1 and not large.any():
            squeezed.append(d)
            continue
        axes = [a for a, n in enumerate(large.shape) if n > 1]
        if len(axes) != 1:
            return None
        a = axes[0]
        n = large.shape[a]
        if not np.array_equal(large.reshape(-1), np.arange(n)) or opd.shape[a] != x.shape[d] or \
                index_shape[a + pad] != x.shape[d]:
            return None
        placed[d] = a + pad
    order = [placed[d] for d in dims if d in placed]
    if order != sorted(order) or len(set(order)) != len(order):
        return None
    em, cur, cur_shape = r.em, x, list(x.shape)
    for d in sorted(squeezed, reverse=True):
        cur_shape.pop(d)
        cur = em.op("aten.squeeze.dim", {"self": cur}, shape=list(cur_shape), dtype=x.dtype, dim=d)
    first = dims[0]
    for p in range(len(index_shape)):
        if p not in order:
            cur_shape.insert(first + p, 1)
            cur = em.op("aten.unsqueeze.default", {"self": cur}, shape=list(cur_shape), dtype=x.dtype, dim=first + p)
    if cur_shape != list(op_shape):
        cur = em.op("aten.expand.default", {"self": cur}, shape=list(op_shape), dtype=x.dtype,
                    size=[d if isinstance(d, int) else -1 for d in op_shape])
    return cur


def _index(r: Rewriter) -> Operand | None:
    op = r.op
    x = op.inputs[0]
    found = _index_tensors(op)
    if not found or x.shape is None or op.outputs[0].shape is None or any(o.shape is None for _, o in found):
        return None
    dims = [k for k, _ in found]
    if dims != list(range(dims[0], dims[0] + len(dims))):
        return None  # non-adjacent advanced indices move the result dims to the front
    static = _static(x, op.outputs[0], *[o for _, o in found])
    if not static and (out := _identity_index(r, x, dims, found)) is not None:
        return out
    if not static and all(cut_constant(o) is not None for _, o in found):
        return None  # constant positions cut to a run-time size: left to the indexing converters
    if any(o.dtype == "bool" for _, o in found):
        return None  # boolean masks select a data-dependent number of elements
    values = [const_array(o) for _, o in found]
    if static and all(v is not None for v in values):
        return _constant_index(r, x, dims, values) if len(found) > 1 else None
    first, sizes = dims[0], [x.shape[k] for k in dims]
    index_shape = _broadcast(*[o.shape for _, o in found])
    # a dim of size 1 adds nothing to the flat position; a dynamic one must lead the others
    terms = [(t, size) for t, size in zip(found, sizes) if size != 1] or [(found[0], sizes[0])]
    kept = [size for _, size in terms]
    flat_shape = _broadcast(*[opd.shape for (_, opd), _ in terms])
    if index_shape is None or flat_shape is None or any(not isinstance(n, int) for n in kept[1:]) or \
            not r.can_gather_rows(x, first, len(dims), index_shape) or \
            any(not isinstance(d, int) and d not in flat_shape for d in index_shape):
        return None  # (an expand to a dynamic size is not written here)
    em, flat = r.em, None
    for ((k, opd), size), stride in zip(terms, _strides(kept)):
        term = r.wrapped(opd, size)
        if stride != 1:
            term = em.op("aten.mul.Tensor", {"self": term}, shape=list(term.shape), dtype=term.dtype, other=stride)
        if flat is not None:
            term = em.op("aten.add.Tensor", {"self": flat, "other": term}, shape=_broadcast(flat.shape, term.shape),
                         dtype=term.dtype, alpha=1)
        flat = term
    if list(flat.shape) != index_shape:
        flat = em.op("aten.expand.default", {"self": flat}, shape=index_shape, dtype=flat.dtype,
                     size=[d if isinstance(d, int) else -1 for d in index_shape])
    return r.gather_rows(x, first, len(dims), flat, index_shape)


def _strides(sizes: list) -> list[int]:
    return [math.prod(sizes[i + 1:]) for i in range(len(sizes))]


def _constant_index(r: Rewriter, x: Operand, dims: list[int], values: list[np.ndarray]) -> Operand | None:
    """``x[..., i0, i1, ...]`` with constant index tensors: positions in the flattened indexed
    dims, gathered once per distinct position, then broadcast back."""
    first, sizes = dims[0], [x.shape[k] for k in dims]
    index_shape = _broadcast(*[np.shape(v) for v in values])
    flat = np.zeros(index_shape, np.int64)
    for v, size, stride in zip(values, sizes, _strides(sizes)):
        v = np.asarray(v, np.int64)
        flat = flat + np.where(v < 0, v + size, v) * stride
    # dims along which the position does not change are a broadcast of one slice
    core = flat
    for axis in range(flat.ndim):
        if flat.shape[axis] > 1 and (np.take(flat, [0], axis=axis) == flat).all():
            core = np.take(core, [0], axis=axis)
    shape = list(x.shape)
    pre, post = shape[:first], shape[first + len(dims):]
    n = math.prod(sizes)
    if gather_runs(core.reshape(-1), n) is None:
        return None  # more pieces than ncnn's Crop/Concat gather is worth
    data = r.view(x, pre + [n] + post)
    rng = r.em.constant(core.reshape(-1), name=f"{r.op.name}_positions")
    picked = r.em.op("aten.index_select.default", {"self": data, "index": rng},
                     shape=pre + [core.size] + post, dtype=x.dtype, dim=first)
    out = r.view(picked, pre + list(core.shape) + post)
    full = pre + list(index_shape) + post
    if list(out.shape) != full:
        out = r.em.op("aten.expand.default", {"self": out}, shape=full, dtype=x.dtype, size=full)
    return out


def _index_select(r: Rewriter) -> Operand | None:
    op = r.op
    x, index = op.inputs[0], op.named_input("index")
    if const_array(index) is not None or x.shape is None or index.shape is None:
        return None
    dim = op.params["dim"] % len(x.shape)
    if not r.can_gather_rows(x, dim, 1, list(index.shape)):
        return None
    return r.gather_rows(x, dim, 1, index, list(index.shape))


def _uniform_gather(r: Rewriter, data: np.ndarray, index: Operand, dim: int) -> Operand | None:
    """A gather from a constant that is the same along ``dim``, for an index of dynamic shape:
    ``index * 0 + data[..., :1, ...]`` (broadcast, exact for the integer index)."""
    sub = np.take(data, [0], axis=dim)
    if any(n not in (1, m) for d, (n, m) in enumerate(zip(sub.shape, index.shape)) if d != dim):
        return None
    em = r.em
    zero = em.op("aten.mul.Tensor", {"self": index}, shape=list(index.shape), dtype=index.dtype, other=0)
    table = em.constant(np.ascontiguousarray(sub), name=f"{r.op.name}_value")
    return em.op("aten.add.Tensor", {"self": zero, "other": table}, shape=list(index.shape),
                 dtype=r.op.outputs[0].dtype, alpha=1)


def _gather(r: Rewriter) -> Operand | None:
    op = r.op
    x, index = op.inputs[0], op.named_input("index")
    if x.shape is None or index.shape is None or len(x.shape) != len(index.shape):
        return None
    dim = op.params["dim"] % len(x.shape)
    data = const_array(x)
    if data is not None and not _static(index) and (np.take(data, [0], axis=dim) == data).all():
        return _uniform_gather(r, data, index, dim)
    if data is not None and (np.take(data, [0], axis=dim) == data).all():
        # the same value wherever along dim: the index does not matter
        sub = np.take(data, [0], axis=dim)
        value = np.broadcast_to(sub[tuple(slice(0, n) for n in index.shape[:dim] + [1] + index.shape[dim + 1:])],
                                index.shape)
        return r.em.constant(np.ascontiguousarray(value), name=f"{op.name}_value")
    if const_array(index) is not None or any(a != b for d, (a, b) in enumerate(zip(x.shape, index.shape)) if d != dim) \
            or not r.measurable(x.shape[dim]):
        return None
    em, n = r.em, x.shape[dim]
    hot = r.one_hot(index, n)  # (..., J, ..., N)
    moved = em.op("aten.movedim.int", {"self": x}, shape=x.shape[:dim] + x.shape[dim + 1:] + [n], dtype=x.dtype,
                  source=dim, destination=-1)
    idx_moved_shape = index.shape[:dim] + index.shape[dim + 1:] + [index.shape[dim]]
    hot = em.op("aten.movedim.int", {"self": hot}, shape=idx_moved_shape + [n], dtype=hot.dtype,
                source=dim, destination=-2)
    rows = em.op("aten.unsqueeze.default", {"self": moved}, shape=list(moved.shape[:-1]) + [1, n], dtype=x.dtype,
                 dim=-2)
    prod = em.op("aten.mul.Tensor", {"self": hot, "other": rows}, shape=idx_moved_shape + [n], dtype="f32")
    summed = em.op("aten.sum.dim_IntList", {"self": prod}, shape=idx_moved_shape, dtype="f32", dim=[-1],
                   keepdim=False)
    out = em.op("aten.movedim.int", {"self": summed}, shape=list(index.shape), dtype="f32", source=-1,
                destination=dim)
    if x.dtype != "f32":
        out = em.op("aten._to_copy.default", {"self": out}, shape=list(index.shape), dtype=x.dtype)
    return out


def _scatter_value(r: Rewriter) -> Operand | None:
    """``x.scatter(dim, index, value)`` with run-time indices (DeepSeek-V3's group mask): the places
    some index names along ``dim`` take ``value``: ``where(any_j one_hot(index)[j], value, x)``."""
    op = r.op
    x, index, value = op.inputs[0], op.named_input("index"), number(op, "value")
    if x.shape is None or index is None or index.shape is None or len(x.shape) != len(index.shape) or \
            value is None or const_array(index) is not None:
        return None
    dim = op.params["dim"] % len(x.shape)
    n = x.shape[dim]
    if any(a != b for d, (a, b) in enumerate(zip(x.shape, index.shape)) if d != dim) or not r.measurable(n):
        return None
    em = r.em
    hot = r.one_hot(index, n)  # (..., J, ..., N): 1 where index names that place
    rest = index.shape[:dim] + index.shape[dim + 1:]
    named = em.op("aten.amax.default", {"self": hot}, shape=rest + [n], dtype="f32", dim=[dim], keepdim=False)
    named = em.op("aten.movedim.int", {"self": named}, shape=list(x.shape), dtype="f32", source=-1, destination=dim)
    hit = em.op("aten.ne.Scalar", {"self": named}, shape=list(x.shape), dtype="bool", other=0)
    return em.op("aten.where.ScalarSelf", {"condition": hit, "other": x}, shape=list(x.shape), dtype=x.dtype,
                 param_dict={"self": value})


REWRITES = {
    "aten.embedding.default": _embedding,
    "aten.index.Tensor": _index,
    "aten.index_select.default": _index_select,
    "aten.gather.default": _gather,
    "aten.scatter.value": _scatter_value,
}


def _claimed(op: Operator, ctx) -> bool:
    """Whether a converter above the generic priority accepts ``op`` (an ``index.Tensor``: the
    pattern converters of im2col, pads and nearest resizes) as it is."""
    from ..convert.registry import ATEN, Priority

    if op.type != "aten.index.Tensor":
        return False
    conv, _ = ATEN.select(op, ctx)
    return conv is not None and conv.priority > Priority.LOW


def apply_rewrites(graph: Graph, rewrites: dict, skip=None) -> None:
    """Replace every ATen operator whose type has an entry in ``rewrites`` and whose result is read
    by what that entry emits: ``fn(Rewriter)`` returns the new operand (a list of them, one per
    output, for an operator of several outputs) or None to leave the operator. ``skip(op)``: leave
    it without asking."""
    for op in list(graph.ops):
        fn = rewrites.get(op.type)
        if fn is None or "target" not in op.meta or not any(o.consumers for o in op.outputs):
            continue
        if skip is not None and skip(op):
            continue
        r = Rewriter(graph, op)
        new = fn(r)
        if new is None:
            continue
        for k, y in enumerate(new if isinstance(new, list) else [new]):
            if y is not None and op.outputs[k].consumers:
                r.em.replace(y, k)
        graph.prune(list(op.outputs))
        log.debug("rewrote %s (%s)", op.name, op.type)


@graph_pass("decompose_runtime_lookups", "turn computed-index lookups into exact one-hot arithmetic")
def run(graph: Graph, cx) -> None:
    from ..convert.context import ConversionContext

    ctx = ConversionContext(graph, options=cx.options, diagnostics=[], stage="decompose_runtime_lookups")
    apply_rewrites(graph, REWRITES, skip=lambda op: _claimed(op, ctx))
