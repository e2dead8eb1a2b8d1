"""``Tensor.unfold(dimension, size, step)``, sliding windows along a dim with a new last dim of
``size`` (timm's HaloNet cuts its feature map into overlapping halos this way), as ATen views the
converters lower: a pad or a cut, slices, views, one ``cat`` and a ``permute``; no gather.
(An ``unfold`` that frames a signal for an STFT is recomposed before this pass, and one of a
constant is folded.)

Along a dim of length ``L``: ``n = (L - size) // step + 1`` windows and ``m = ceil(size / step)``
pieces. Piece ``c`` holds elements ``c·step … c·step + w_c - 1`` of every window (``w_c =
min(step, size - c·step)``): the slice ``[c·step, c·step + n·step)`` of ``x`` viewed as ``(n,
step)`` and cut to its first ``w_c``. ``x`` is first cut, or padded with zeros at its end, to
``(n - 1 + m)·step``, the length the last piece's slice needs; a padded zero is never inside a
window. The pieces joined along the ``step`` axis are the windows ``(…, n, size, …)``, and a
permute moves ``size`` last.

Needs the unfolded dim static; of the others at most one may be dynamic (it becomes the ``-1``
of the views).
"""
from __future__ import annotations

from ..convert.shapes import normalize_dim
from ..ir import Graph, Operand
from .decompose_runtime_lookups import Rewriter, apply_rewrites
from .manager import graph_pass


def _slice(r: Rewriter, x: Operand, dim: int, start: int, end: int) -> Operand:
    if start == 0 and end == x.shape[dim]:
        return x
    shape = list(x.shape)
    shape[dim] = end - start
    return r.em.op("aten.slice.Tensor", {"self": x}, shape=shape, dtype=x.dtype, dim=dim, start=start, end=end,
                   step=1)


def _to_length(r: Rewriter, x: Operand, dim: int, length: int) -> Operand:
    """``x`` cut, or padded with zeros at its end, to ``length`` along ``dim``."""
    have = x.shape[dim]
    if have >= length:
        return _slice(r, x, dim, 0, length)
    pad = [0, 0] * (len(x.shape) - dim)
    pad[-1] = length - have  # constant_pad_nd lists (before, after) from the last dim backwards
    shape = list(x.shape)
    shape[dim] = length
    return r.em.op("aten.constant_pad_nd.default", {"self": x}, shape=shape, dtype=x.dtype, pad=pad, value=0.0)


def _unfold(r: Rewriter) -> Operand | None:
    op = r.op
    x = op.inputs[0]
    size, step = op.params.get("size"), op.params.get("step")
    if x.shape is None or not isinstance(size, int) or not isinstance(step, int) or size < 1 or step < 1:
        return None
    rank = len(x.shape)
    d = normalize_dim(op.params.get("dimension", 0), max(rank, 1))
    length = x.shape[d] if rank else 1
    if not isinstance(length, int) or length < size or sum(not isinstance(s, int) for s in x.shape) > 1:
        return None
    if rank == 0:  # a 0-d tensor unfolds into a 1-vector of itself
        return r.view(x, [1])
    n, m = (length - size) // step + 1, -(-size // step)
    x = _to_length(r, x, d, (n - 1 + m) * step)
    pieces = []
    for c in range(m):
        part = _slice(r, x, d, c * step, c * step + n * step)
        part = r.view(part, [*x.shape[:d], n, step, *x.shape[d + 1:]])
        pieces.append(_slice(r, part, d + 1, 0, min(step, size - c * step)))
    shape = [*x.shape[:d], n, size, *x.shape[d + 1:]]
    y = pieces[0] if m == 1 else r.em.op("aten.cat.default", [(f"tensors.{j}", p) for j, p in enumerate(pieces)],
                                         shape=shape, dtype=x.dtype, dim=d + 1)
    if d + 1 == rank:  # the windows' axis is already last
        return y
    order = [*range(d + 1), *range(d + 2, rank + 1), d + 1]
    return r.em.op("aten.permute.default", {"self": y}, shape=[shape[k] for k in order], dtype=x.dtype, dims=order)


@graph_pass("decompose_unfold", "Tensor.unfold (sliding windows) as slices, views, a cat and a permute")
def run(graph: Graph, cx) -> None:
    apply_rewrites(graph, {"aten.unfold.default": _unfold})
