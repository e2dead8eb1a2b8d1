"""Weight helpers shared by the conv / linear / norm families and their fusion passes.

Weights stay lazy: a derived weight (a transposed deconvolution kernel, a BatchNorm folded into
a convolution) is an :class:`~engine.ir.Attribute` with a loader, computed only when a writer
asks for the data.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from ..ir import Attribute, Operand

#: ATen and pnnx operator types that swap the two axes of a 2-D tensor
_TRANSPOSES_BY_DIMS = ("aten.permute.default", "torch.permute", "Tensor.permute")
_TRANSPOSES_PLAIN = ("aten.t.default", "aten.numpy_T.default", "torch.t", "Tensor.t")
_TRANSPOSES_BY_PAIR = ("aten.transpose.int", "torch.transpose", "Tensor.transpose")


def derived(fn: Callable[[], np.ndarray], shape: Sequence[int], dtype: str = "f32") -> Attribute:
    """A lazy attribute whose data is ``fn()`` (called on first use)."""
    return Attribute(loader=fn, shape=tuple(int(s) for s in shape), dtype=dtype)


def derived_rows(rows: Callable[[slice], np.ndarray], shape: Sequence[int], dtype: str = "f32") -> Attribute:
    """A lazy attribute computed along its first axis (the output channels): ``rows(s)`` is the
    data of the rows in the slice ``s`` (``rows(slice(None))`` all of it). A writer takes it a
    block of rows at a time (:meth:`~engine.ir.Attribute.pieces`), so it never exists whole."""
    shape = tuple(int(s) for s in shape)
    row = math.prod(shape[1:])

    def pieces(size: int):
        step = max(1, size // max(row, 1))
        for r in range(0, shape[0], step):
            yield rows(slice(r, r + step))

    return Attribute(loader=lambda: rows(slice(None)), pieces=pieces, shape=shape, dtype=dtype)


def product_f32(a, b) -> np.ndarray:
    """``a * b`` (broadcast) rounded once to float32: each value is the float64 product rounded,
    whatever the operands' dtypes, without a float64 copy of either. Two float32 operands
    multiply in float32, which is that same value (their significands multiply exactly in
    float64) about five times faster on a large kernel."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == np.float32 and b.dtype == np.float32:
        return a * b
    return np.multiply(a, b, dtype=np.float64, out=np.empty(np.broadcast_shapes(a.shape, b.shape), np.float32))


def as_f64(attr: Attribute | None, n: int, fill: float) -> np.ndarray:
    """The attribute's data as a flat float64 vector, or ``n`` copies of ``fill`` when absent."""
    if attr is None:
        return np.full(n, fill, np.float64)
    return np.asarray(attr.data, dtype=np.float64).reshape(-1)


def transposed_2d(attr: Attribute) -> Attribute:
    """The lazy transpose of a 2-D weight (dtype kept)."""
    rows, cols = attr.shape
    return derived(lambda: np.ascontiguousarray(np.asarray(attr.data).T), (cols, rows), attr.dtype)


def _is_2d_swap(op) -> bool:
    if op.type in _TRANSPOSES_PLAIN:
        return True
    if op.type in _TRANSPOSES_BY_DIMS:
        dims = op.params.get("dims")
        return isinstance(dims, (list, tuple)) and [int(d) % 2 for d in dims] == [1, 0] and len(dims) == 2
    if op.type in _TRANSPOSES_BY_PAIR:
        pair = {op.params.get("dim0"), op.params.get("dim1")}
        return pair in ({0, 1}, {-1, -2}, {0, -1}, {-2, 1})
    return False


def matmul_weight(ctx, mat2: Operand) -> Attribute | None:
    """The ``(out, in)`` Linear weight for ``x @ mat2`` when ``mat2`` is a constant 2-D matrix
    ``(in, out)``, directly or as the transpose of a constant ``(out, in)`` matrix (core ATen's
    ``permute(weight, [1, 0])`` / ``t(weight)``, already lowered or not). None otherwise."""
    if mat2.shape is None or len(mat2.shape) != 2:
        return None
    direct = ctx.attribute(mat2)
    if direct is not None:
        return transposed_2d(direct) if len(direct.shape) == 2 else None
    prod = mat2.producer
    if prod is None or not prod.inputs or not _is_2d_swap(prod):
        return None
    src = ctx.attribute(prod.inputs[0])
    if src is None or len(src.shape) != 2:
        return None
    return src
