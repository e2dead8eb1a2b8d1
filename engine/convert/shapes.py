"""Shapes and axes as ncnn sees them.

ncnn has no batch axis: a Mat is (w, h, d, c) with at most 4 dims. The ``infer_batch_axis``
pass marks every pnnx-level operand with ``meta["batch"]`` (True when its dim 0 is the
model's batch axis). Rules then use :func:`ncnn_shape` (shape without the batch axis) and
:func:`ncnn_axis` (a torch dim as an ncnn axis, outermost first; refusing the batch axis).
"""
from __future__ import annotations

from ..ir import Dim, Operand
from .context import Unsupported


def is_batched(opd: Operand) -> bool:
    b = opd.meta.get("batch")
    if b is not None:
        return bool(b)
    return opd.shape is not None and len(opd.shape) >= 2


def ncnn_shape(opd: Operand) -> list[Dim] | None:
    """The operand's shape with the batch axis dropped (None when unknown)."""
    if opd.shape is None:
        return None
    return list(opd.shape[1:]) if is_batched(opd) else list(opd.shape)


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
    if is_batched(opd):
        if d == 0:
            raise Unsupported(f"unsupported: operation along the batch axis of {opd.name}")
        return d - 1
    return d
