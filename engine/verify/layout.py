"""A PyTorch value in the layout of the ncnn blob that holds it: :func:`as_blob`.

The blob holds the value (permuted as its :class:`~engine.verify.mapping.ValueRef` says) with
the model's batch axis dropped — one sample; PyTorch may have run several, then the first is
compared — and shaped as ncnn shapes it, in the same data order. When the conversion's shapes
established that order (``ValueRef.checked``) any re-shaping of the same size is taken; else
(a user's file, an unknown shape) the blob must have the value's shape, size-1 dims aside: the
same elements in another order would make a correct layer look wrong, so such a blob is not
compared.
"""
from __future__ import annotations

import math

import numpy as np

from .mapping import ValueRef


def _squeezed(shape) -> tuple[int, ...]:
    return tuple(int(d) for d in shape if int(d) != 1)


def _permuted(value: np.ndarray, ref: ValueRef) -> np.ndarray | None:
    """``value`` permuted as ``ref`` records (None when the permutation does not fit it)."""
    if ref.dims is None:
        return value
    return value.transpose(ref.dims) if sorted(ref.dims) == list(range(value.ndim)) else None


def as_blob(value: np.ndarray, ref: ValueRef, shape: tuple[int, ...]) -> tuple[np.ndarray | None, str, bool]:
    """``value`` laid out as a blob of ``shape`` (ncnn's): (array, "", False), or (None, why
    not, wrong) where ``wrong`` says the blob cannot be right (its size differs from the
    value's) rather than merely not comparable."""
    v = _permuted(value, ref)
    if v is None:
        return None, f"recorded layout {list(ref.dims)} does not fit PyTorch's {list(value.shape)}", False
    n = math.prod(shape)
    if v.size != n:
        b = ref.batch
        if b is not None and 0 <= b < v.ndim and v.size == v.shape[b] * n:
            v = np.take(v, 0, axis=b)
        elif b is None and n and v.size % n == 0 and v.size // n in v.shape:
            return None, (f"PyTorch ran a batch of {v.size // n} and this blob's batch axis is not known "
                          f"(ncnn {list(shape)}, PyTorch {list(value.shape)}; not compared)"), False
        elif n and v.size % n == 0:  # one sample of a batch ncnn made inside the model (Swin's windows)
            return None, (f"this blob is one of {v.size // n} samples of a batch made inside the model "
                          f"(ncnn {list(shape)}, PyTorch {list(value.shape)}; not compared)"), False
        else:
            return None, f"shape differs: ncnn {list(shape)}, PyTorch {list(value.shape)}", True
    if not ref.checked and _squeezed(v.shape) != _squeezed(shape):
        return None, (f"layout differs: ncnn holds {list(shape)}, PyTorch {list(value.shape)}"
                      + (f" permuted {list(ref.dims)}" if ref.dims is not None else "") + " (not compared)"), False
    return np.ascontiguousarray(v).reshape(shape), "", False


def as_batch(value: np.ndarray, ref: ValueRef, shape: tuple[int, ...]) -> np.ndarray | None:
    """Every sample of ``value`` laid out as :func:`as_blob` lays out the first, samples first:
    PyTorch's value of a blob that ncnn holds as a batch of several samples, to set it whole.
    None when the value has no batch of several samples along ``ref.batch``, or its samples do
    not lay out as ``shape``."""
    v, b = _permuted(value, ref), ref.batch
    if v is None or b is None or not 0 <= b < v.ndim or v.shape[b] < 2 or v.size != v.shape[b] * math.prod(shape):
        return None
    if not ref.checked and _squeezed(np.take(v, 0, axis=b).shape) != _squeezed(shape):
        return None
    return np.ascontiguousarray(np.moveaxis(v, b, 0)).reshape((v.shape[b], *shape))
