"""A PyTorch value in the layout of the ncnn blob that holds it: :func:`as_blob`.

The blob holds the value (permuted as its :class:`~engine.verify.mapping.ValueRef` says) with
the model's batch axis dropped — one sample; PyTorch may have run several, then the first is
compared — and shaped as ncnn shapes it. Re-shaping keeps the data order, so the blob may merge
or split adjacent dims of the value ((1, 196, 384) for (1, 14, 14, 384)); a blob whose shape is
not such a re-shaping of the value's (the same elements in another order: (384, 14, 14) for
(14, 14, 384)) holds a layout no pass recorded, and is not compared — comparing it element by
element would report a correct layer as wrong.
"""
from __future__ import annotations

import math

import numpy as np

from .mapping import ValueRef


def _dims(shape) -> list[int]:
    return [int(d) for d in shape if int(d) != 1]


def _prefix_products(dims: list[int]) -> list[int]:
    out, p = [], 1
    for d in dims:
        p *= d
        out.append(p)
    return out


def same_order(value_shape, blob_shape) -> bool:
    """Whether ``blob_shape`` can be ``value_shape`` re-shaped by merging and splitting adjacent
    dims (size-1 dims ignored): every boundary of one shape falls on a boundary of a common
    refinement of both."""
    a, b = _dims(value_shape), _dims(blob_shape)
    if a == b:
        return True
    if math.prod(a) != math.prod(b):
        return False
    cuts = sorted(set(_prefix_products(a)) | set(_prefix_products(b)))
    return all(hi % lo == 0 for lo, hi in zip(cuts, cuts[1:]))


def as_blob(value: np.ndarray, ref: ValueRef, shape: tuple[int, ...]) -> tuple[np.ndarray | None, str, bool]:
    """``value`` laid out as a blob of ``shape`` (ncnn's): (array, "", False), or (None, why
    not, wrong) where ``wrong`` says the blob cannot be right (its size differs from the
    value's) rather than merely not comparable."""
    v = value
    if ref.dims is not None:
        if sorted(ref.dims) != list(range(v.ndim)):
            return None, f"recorded layout {list(ref.dims)} does not fit PyTorch's {list(value.shape)}", False
        v = v.transpose(ref.dims)
    n = math.prod(shape)
    if v.size != n:
        b = ref.batch
        if b is not None and 0 <= b < v.ndim and v.size == v.shape[b] * n:
            v = np.take(v, 0, axis=b)
        elif b is None and n and v.size % n == 0 and v.size // n in v.shape:
            return None, (f"PyTorch ran a batch of {v.size // n} and this blob's batch axis is not known "
                          f"(ncnn {list(shape)}, PyTorch {list(value.shape)}; not compared)"), False
        else:
            return None, f"shape differs: ncnn {list(shape)}, PyTorch {list(value.shape)}", True
    if not same_order(v.shape, shape):
        return None, (f"layout differs: ncnn holds {list(shape)}, PyTorch {list(value.shape)}"
                      + (f" permuted {list(ref.dims)}" if ref.dims is not None else "") + " (not compared)"), False
    return np.ascontiguousarray(v).reshape(shape), "", False
