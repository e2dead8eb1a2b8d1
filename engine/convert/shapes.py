"""Shapes and axes as ncnn sees them.

An ncnn Mat is (w, h, d, c) with at most 4 dims plus a batch count; every layer computes each
sample of the batch alike. The ``infer_batch_axis`` pass (the per-value layout solver of
:mod:`.layout`) marks every pnnx-level operand with the PyTorch dim that is that batch:
``meta["batch_dim"]`` (an int, or None when every dim is in the blob) and, for the many rules
written when only "dim 0 is the batch" was tracked, ``meta["batch"]`` (True exactly when
``batch_dim`` is 0).

The ncnn blob of an operand is the PyTorch tensor with its batch dim dropped (carried as the
Mat's batch count); the data order within a sample is the same. Rules use :func:`ncnn_shape` (shape without the batch
dim, wherever it is) and :func:`ncnn_axis` (a torch dim as an ncnn axis, outermost first;
refusing the batch dim). :func:`is_batched` keeps its old meaning (dim 0 is the batch); rules
that handle a batch elsewhere use :func:`batch_dim`.

``meta["batch"]`` wins over ``meta["batch_dim"]`` when they disagree (rules that made an
operand set ``meta["batch"]`` only), and an operand never annotated is taken as batched at
dim 0 when it has rank ≥ 2 (the old default).
"""
from __future__ import annotations

from ..ir import Dim, Operand
from .context import Unsupported


def batch_dim(opd: Operand) -> int | None:
    """The torch dim of ``opd`` that is the model's batch axis (dropped in ncnn), or None."""
    flag = opd.meta.get("batch")
    if flag:
        return 0
    if flag is None and "batch_dim" not in opd.meta:
        return 0 if opd.shape is not None and len(opd.shape) >= 2 else None
    bd = opd.meta.get("batch_dim")
    if not isinstance(bd, int) or isinstance(bd, bool) or opd.shape is None or not 0 <= bd < len(opd.shape):
        return None
    return bd if (flag is None or bd > 0) else None


def set_batch_dim(opd: Operand, dim: int | None) -> Operand:
    """Annotate ``opd`` (both keys, kept consistent)."""
    opd.meta["batch_dim"] = dim
    opd.meta["batch"] = dim == 0
    return opd


def is_batched(opd: Operand) -> bool:
    """Whether dim 0 of ``opd`` is the batch axis."""
    return batch_dim(opd) == 0


def ncnn_shape(opd: Operand) -> list[Dim] | None:
    """The operand's shape with the batch dim dropped (None when unknown)."""
    if opd.shape is None:
        return None
    b = batch_dim(opd)
    return list(opd.shape) if b is None else list(opd.shape[:b]) + list(opd.shape[b + 1:])


def ncnn_rank(opd: Operand) -> int | None:
    s = ncnn_shape(opd)
    return None if s is None else len(s)


def normalize_dim(dim: int, rank: int) -> int:
    if not -rank <= dim < max(rank, 1):
        raise Unsupported(f"unsupported: dim {dim} out of range for rank {rank}")
    return dim % rank if rank else 0


def ncnn_axis(opd: Operand, dim: int) -> int:
    """Torch ``dim`` of ``opd`` as an ncnn axis (0 = outermost of the batch-less shape)."""
    if opd.shape is None:
        raise Unsupported(f"unsupported: shape of {opd.name} unknown")
    d = normalize_dim(dim, len(opd.shape))
    b = batch_dim(opd)
    if b is None:
        return d
    if d == b:
        raise Unsupported(f"unsupported: operation along the batch axis of {opd.name}")
    return d - 1 if d > b else d


def ncnn_axes(opd: Operand, dims) -> list[int]:
    """Several torch dims as ncnn axes (the batch dim, of size 1 in ncnn, left out)."""
    if opd.shape is None:
        raise Unsupported(f"unsupported: shape of {opd.name} unknown")
    b = batch_dim(opd)
    rank = len(opd.shape)
    out = []
    for dim in dims:
        d = normalize_dim(dim, max(rank, 1))
        if d != b:
            out.append(d - 1 if b is not None and d > b else d)
    return sorted(set(out))
