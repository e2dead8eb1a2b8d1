"""Selections along a dim as exact ATen arithmetic the converters lower (ATen level, just before
:mod:`decompose_runtime_lookups`, whose positions it uses): ``argmax`` / ``argmin``, ``max`` /
``min`` over a dim when their indices are read, ``topk`` (MoE routers, detection heads), and
``sort`` / ``argsort`` of at most :data:`MAX_K` values (a topk of all of them: ViT-MAE's random
masking sorts its noise).

ncnn's ``ArgMax`` ranks a whole blob, not a dim. Along dim ``d`` of size ``N`` (static, or a
model input's size with an upper bound: the positions ``arange(N)`` are then cut to the
run-time size, as for the lookups):

* the first position holding the extreme value, PyTorch's rule: ``m = amax(x, d, keepdim)``,
  ``e = eq(x, m)``, ``first = e * eq(cumsum(e, d), 1)``, ``sum(first * arange(N), d)``;
* ``max`` / ``min`` over a dim with indices: ``m`` (or ``amin``) and that position;
* ``topk(k)`` (up to :data:`MAX_K`): ``k`` picks on a key ``clamp(x, -1e38, 1e38)``, each the
  first position of the key's extreme, after which the picked key drops below every other
  (``key - 3e38 * eq(arange(N), i)``); values and indices joined with ``cat`` along ``d``, sorted
  largest first (smallest with ``largest=False``), ties by the lowest position (PyTorch's
  kernel may order ties otherwise). The key keeps every comparison finite: ncnn compares by
  subtracting, and its reductions start from the largest finite floats, so an infinite score
  would never equal the extreme found. Values are exact for finite inputs up to 1e38 in
  magnitude; an infinite one (a masked score) comes out as ±1e38.

Indices are exact (integers below 2^24) and marked non-negative, so a lookup by them needs no
wrap-around. A NaN is not ranked as PyTorch ranks it (the largest).
"""
from __future__ import annotations

from ..convert.shapes import normalize_dim
from ..ir import Graph, Operand
from ._match import const_array
from .decompose_runtime_lookups import Rewriter, _product, apply_rewrites
from .manager import graph_pass

#: the largest k decomposed (each pick is about seven ops)
MAX_K = 64
#: the key's bound, and how far a picked key drops (below every other, finite or -inf)
_BOUND, _DROP = 1e38, 3e38


def _first(r: Rewriter, x: Operand, dim: int, largest: bool, pos: Operand) -> tuple[Operand, Operand]:
    """``(m, i)``, both keepdim: the extreme of ``x`` along ``dim`` and its first position."""
    em = r.em
    reduced = list(x.shape)
    reduced[dim] = 1
    m = em.op("aten.amax.default" if largest else "aten.amin.default", {"self": x}, shape=reduced, dtype=x.dtype,
              dim=[dim], keepdim=True)
    hit = em.op("aten.eq.Tensor", {"self": x, "other": m}, shape=list(x.shape), dtype="bool")
    count = em.op("aten.cumsum.default", {"self": hit}, shape=list(x.shape), dtype="i64", dim=dim)
    once = em.op("aten.eq.Scalar", {"self": count}, shape=list(x.shape), dtype="bool", other=1)
    first = em.op("aten.logical_and.default", {"self": hit, "other": once}, shape=list(x.shape), dtype="bool")
    where = em.op("aten.mul.Tensor", {"self": first, "other": pos}, shape=list(x.shape), dtype="i64")
    i = em.op("aten.sum.dim_IntList", {"self": where}, shape=reduced, dtype="i64", dim=[dim], keepdim=True)
    i.meta["nonnegative"] = True
    return m, i


def _dim(r: Rewriter, x: Operand, key: str = "dim", default=None) -> int | None:
    """The op's dim, normalized, when the selection along it can be written out (None: not)."""
    dim = r.op.params.get(key, default)
    if x.shape is None or not x.shape or dim is None or const_array(x) is not None:
        return None
    d = normalize_dim(dim, len(x.shape))
    return d if r.measurable(x.shape[d]) else None


def _squeezed(r: Rewriter, y: Operand, dim: int, keepdim: bool) -> Operand:
    if keepdim:
        return y
    shape = [s for k, s in enumerate(y.shape) if k != dim]
    out = r.em.op("aten.squeeze.dims", {"self": y}, shape=shape, dtype=y.dtype, dim=[dim])
    out.meta.update(y.meta)
    return out


def _argmax(r: Rewriter):
    op = r.op
    x = op.inputs[0]
    keep = bool(op.params.get("keepdim", False))
    if op.params.get("dim") is None and x.shape is not None and const_array(x) is None:
        n = _product(x.shape)  # over the flattened tensor
        if n is None or not r.measurable(n):
            return None
        x, dim = r.view(x, [n]), 0
    else:
        dim = _dim(r, x)
        if dim is None:
            return None
    _, i = _first(r, x, dim, op.type == "aten.argmax.default", r.positions(x.shape[dim], len(x.shape), dim))
    out_shape = list(op.outputs[0].shape)
    if list(i.shape) == out_shape:
        return [i]
    out = r.view(i, out_shape) if op.params.get("dim") is None else _squeezed(r, i, dim, keep)
    out.meta["nonnegative"] = True
    return [out]


def _max_dim(r: Rewriter):
    op = r.op
    x = op.inputs[0]
    dim = _dim(r, x)
    if dim is None or not op.outputs[1].consumers:  # values only: the plain reduction's
        return None
    keep = bool(op.params.get("keepdim", False))
    m, i = _first(r, x, dim, op.type == "aten.max.dim", r.positions(x.shape[dim], len(x.shape), dim))
    return [_squeezed(r, m, dim, keep), _squeezed(r, i, dim, keep)]


def _topk(r: Rewriter):
    op = r.op
    x, k = op.inputs[0], op.params.get("k")
    return _picks(r, x, _dim(r, x, default=-1), k, bool(op.params.get("largest", True)), f"topk with k={k}")


def _sort(r: Rewriter):
    """``sort`` (values and indices) and ``argsort`` (indices) along a dim of at most
    :data:`MAX_K`: a topk of all of it, ascending unless ``descending`` (ties by the lowest
    position: a stable sort)."""
    op = r.op
    x = op.inputs[0]
    dim = _dim(r, x, default=-1)
    n = x.shape[dim] if dim is not None else None
    picked = _picks(r, x, dim, n, bool(op.params.get("descending", False)), f"sort of {n} values")
    if picked is None:
        return None
    return picked[1:] if op.type.startswith("aten.argsort") else picked


def _picks(r: Rewriter, x: Operand, dim: int | None, k, largest: bool, what: str):
    """``[values, indices]`` of the ``k`` largest (smallest) along ``dim`` (None: not one
    :func:`_dim` accepts), in order."""
    op = r.op
    if isinstance(k, int) and k > MAX_K:
        op.meta["unsupported_reason"] = (f"unsupported: {what} (written out up to k={MAX_K}: each pick is "
                                         "about seven ncnn layers)")
    if dim is None or not isinstance(k, int) or not 0 < k <= MAX_K:
        return None
    n = x.shape[dim]
    if isinstance(n, int) and k > n:
        return None
    em, shape = r.em, list(x.shape)
    pos = r.positions(n, len(shape), dim)
    key = em.op("aten.clamp.default", {"self": x}, shape=shape, dtype=x.dtype, min=-_BOUND, max=_BOUND)
    values, indices = [], []
    for t in range(k):
        m, i = _first(r, key, dim, largest, pos)
        values.append(m)
        indices.append(i)
        if t + 1 < k:  # the pick drops out of the running
            taken = em.op("aten.eq.Tensor", {"self": pos, "other": i}, shape=shape, dtype="bool")
            drop = em.op("aten.mul.Tensor", {"self": taken}, shape=shape, dtype=x.dtype,
                         other=-_DROP if largest else _DROP)
            key = em.op("aten.add.Tensor", {"self": key, "other": drop}, shape=shape, dtype=x.dtype, alpha=1)
    out = list(shape)
    out[dim] = k

    def joined(parts: list[Operand], dtype: str) -> Operand:
        if len(parts) == 1:
            return parts[0]
        y = em.op("aten.cat.default", [(f"tensors.{j}", p) for j, p in enumerate(parts)], shape=out, dtype=dtype,
                  dim=dim)
        y.meta.update(parts[0].meta)
        return y

    return [joined(values, x.dtype), joined(indices, "i64")]


REWRITES = {
    "aten.argmax.default": _argmax,
    "aten.argmin.default": _argmax,
    "aten.max.dim": _max_dim,
    "aten.min.dim": _max_dim,
    "aten.topk.default": _topk,
    "aten.sort.default": _sort,
    "aten.sort.stable": _sort,
    "aten.argsort.default": _sort,
    "aten.argsort.stable": _sort,
}


@graph_pass("decompose_selections", "argmax, max/min over a dim with indices and topk as exact arithmetic")
def run(graph: Graph, cx) -> None:
    apply_rewrites(graph, REWRITES)
