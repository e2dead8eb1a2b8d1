"""Make two tensors broadcast in ncnn exactly as they do in PyTorch.

PyTorch aligns shapes from the right (numpy rules). ncnn's ``BinaryOp`` (``binaryop.cpp``)
broadcasts axis by axis only when both Mats have the same number of dims; when they differ it
expands the lower-rank Mat on its *inner* side: a 2-D ``(h, w)`` operand against a 3-D one
becomes ``(h, w, 1)`` (its rows line up with channels), and a 1-D operand of length ``n``
becomes ``(n, 1, ...)`` when ``n`` equals the other's outermost dim, else ``(..., 1, n)``.

:func:`align_operands` computes, for each operand, the batch-less shape it must have for the
PyTorch result (its right-aligned shape, with the output's batch dim dropped) and makes it so:
nothing when ncnn's implicit rule already gives that shape, a reshaped ``MemoryData`` for a
constant, else a ``Squeeze`` (leading dims) or ``Reshape`` layer. The batch
dim may be anywhere (:func:`engine.convert.shapes.batch_dim`); an operand's batch dim (size 1
in ncnn) that lines up with another axis of the result is a plain 1 there when its size is a
static 1. Broadcasting that mixes a dynamic batch with another axis, or needs more than 4 dims
without the batch axis, is refused.
"""
from __future__ import annotations

from typing import Any

from ..convert.shapes import batch_dim, set_batch_dim
from ..ir import Dim, Operand
from ..records import record


def _unsupported(reason: str):
    from ..convert.context import Unsupported

    return Unsupported(f"unsupported: {reason}")


@record
class Value:
    """A tensor during expression expansion: its operand, PyTorch shape and batch dim."""

    operand: Operand
    shape: list[Dim]
    bdim: int | None

    @staticmethod
    def of(opd: Operand) -> "Value":
        shape = list(opd.shape) if opd.shape is not None else None
        if shape is None:
            raise _unsupported(f"shape of {opd.name} unknown")
        return Value(opd, shape, batch_dim(opd))

    @property
    def batched(self) -> bool:
        """Whether dim 0 is the batch (the older rules' question)."""
        return self.bdim == 0

    @property
    def ncnn_shape(self) -> list[Dim]:
        b = self.bdim
        return list(self.shape) if b is None else self.shape[:b] + self.shape[b + 1:]

    def position(self, rank: int) -> int | None:
        """This value's batch dim in a result of ``rank`` dims (right-aligned)."""
        return None if self.bdim is None else self.bdim + rank - len(self.shape)


def broadcast_shapes(a: list[Dim], b: list[Dim], what: str) -> list[Dim]:
    """PyTorch's broadcast of two shapes (symbolic dims compare by name)."""
    n = max(len(a), len(b))
    pa, pb = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    out: list[Dim] = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif isinstance(x, int) and isinstance(y, int):
            raise _unsupported(f"{what}: shapes {a} and {b} do not broadcast")
        else:
            out.append(x if isinstance(x, str) else y)
    return out


def result_batch_dim(values, out_shape: list[Dim]) -> int | None:
    """Where the result's batch dim is: an operand's batch dim (right-aligned) that keeps its
    size in the result, from the operand of highest rank."""
    rank = len(out_shape)
    best = None
    for v in values:
        pos = v.position(rank)
        if pos is not None and 0 <= pos < rank and out_shape[pos] == v.shape[v.bdim]:
            if best is None or len(v.shape) > best[1]:
                best = (pos, len(v.shape))
    return None if best is None else best[0]


def _target(v: Value, rank: int, out_b: int | None, what: str) -> list[Dim]:
    """The batch-less shape operand ``v`` must have in ncnn for a result of ``rank`` dims whose
    batch dim is ``out_b``. A batch dim of static size 1 that PyTorch lines up with another axis
    is just a 1 there (ncnn runs batch 1); a dynamic one cannot be expressed."""
    padded = [1] * (rank - len(v.shape)) + list(v.shape)
    pos = v.position(rank)
    if pos is not None and pos != out_b and v.shape[v.bdim] != 1:
        raise _unsupported(f"{what}: the batch axis of {v.operand.name} {v.shape} would broadcast "
                           f"against a non-batch axis of the {rank}-d result")
    if out_b is None:
        return padded
    if pos != out_b and padded[out_b] != 1:
        raise _unsupported(f"{what}: {v.operand.name} {v.shape} has extent {padded[out_b]} along "
                           "the batch axis of the result")
    return padded[:out_b] + padded[out_b + 1:]


def implicit_expansion(actual: list[Dim], other: list[Dim], n: int) -> list[Dim] | None:
    """The shape ncnn's BinaryOp gives a Mat of ``actual`` dims against one of ``other``
    (``n`` dims), or None when it depends on sizes unknown before run time."""
    d = len(actual)
    if d == n:
        return list(actual)
    if d == 1:
        x, outer = actual[0], other[0]
        if x == 1:
            return [1] * n
        if not (isinstance(x, int) and isinstance(outer, int)):
            return None
        return [x] + [1] * (n - 1) if x == outer else [1] * (n - 1) + [x]
    return list(actual) + [1] * (n - d)


def memorydata_of(opd: Operand):
    """The ``MemoryData`` layer producing ``opd`` (a lowered constant), else None."""
    p = opd.producer
    if p is not None and p.type == "MemoryData" and "data" in p.attrs:
        return p
    return None


def memorydata_params(shape: list[int]) -> dict[str, int]:
    """``MemoryData`` w/h/d/c params of a batch-less shape (outermost first)."""
    keys = {1: ("w",), 2: ("w", "h"), 3: ("w", "h", "c"), 4: ("w", "h", "d", "c")}.get(len(shape), ())
    return {k: int(v) for k, v in zip(keys, reversed(shape))}


def _reshaped_constant(ctx, v: Value, target: list[Dim], torch_shape: list[Dim]) -> Operand:
    import numpy as np

    md = memorydata_of(v.operand)
    shape = [int(d) for d in target]
    data = md.attrs["data"].map(lambda a: np.ascontiguousarray(np.asarray(a, dtype=np.float32).reshape(shape or (1,))),
                                shape or [1], "f32")
    return ctx.layer("MemoryData", [], weights={"data": data}, name=f"{md.name}_bcast", shape=torch_shape,
                     **memorydata_params(shape))


def _fix(ctx, v: Value, target: list[Dim], ref: list[Dim] | None, out_shape: list[Dim],
         out_b: int | None) -> Operand:
    """Make ``v``'s ncnn Mat broadcast like ``target`` against a Mat of shape ``ref``."""
    actual = v.ncnn_shape
    n = len(target)
    if list(actual) == list(target) or (len(actual) == n and v.position(len(out_shape)) == out_b):
        return v.operand
    if len(actual) < n and ref is not None and implicit_expansion(actual, ref, n) == list(target):
        return v.operand
    torch_shape = list(target) if out_b is None else list(target[:out_b]) + [1] + list(target[out_b:])
    if memorydata_of(v.operand) is not None and all(isinstance(d, int) for d in target):
        out = _reshaped_constant(ctx, v, target, torch_shape)
    elif len(actual) > n and list(actual[len(actual) - n:]) == list(target):
        out = ctx.layer("Squeeze", [v.operand], axes=list(range(len(actual) - n)), name=f"{v.operand.name}_squeeze",
                        shape=torch_shape)
    else:  # ones to insert or drop: the same data, reshaped
        from .shape import reshape_params

        out = ctx.layer("Reshape", [v.operand], name=f"{v.operand.name}_bcast", shape=torch_shape,
                        **reshape_params(target, actual))
    set_batch_dim(out, out_b)
    out.dtype = "f32" if out.producer.type == "MemoryData" else v.operand.dtype
    return out


class Aligned(tuple):
    """What :func:`align_operands` gives, unpacked as ``(a, b, shape, batched)``: the two
    operands to feed ``BinaryOp``, the result's PyTorch shape and whether its dim 0 is the
    batch; :attr:`batch_dim` says where the batch dim is (None: none)."""

    def __new__(cls, a: Operand, b: Operand, shape: list[Dim], bdim: int | None):
        self = super().__new__(cls, (a, b, shape, bdim == 0))
        self.batch_dim = bdim
        return self

    @property
    def shape(self) -> list[Dim]:
        return self[2]


def align_operands(ctx, a: Value, b: Value, what: str):
    """Operands to feed ncnn's BinaryOp so it computes PyTorch's broadcast of ``a`` and ``b``;
    also the result's PyTorch shape and batch position (see :class:`Aligned`)."""
    out_shape = broadcast_shapes(a.shape, b.shape, what)
    rank = len(out_shape)
    out_b = result_batch_dim([a, b], out_shape)
    ta, tb = _target(a, rank, out_b, what), _target(b, rank, out_b, what)
    n = len(ta)
    if n > 4:
        raise _unsupported(f"{what} on {n}-d tensors (ncnn has at most 4 dims without the batch axis)")
    if n == 0:
        pa, pb = a.operand, b.operand
    else:
        full_a = len(a.ncnn_shape) == n and a.position(rank) == out_b
        full_b = len(b.ncnn_shape) == n and b.position(rank) == out_b
        if full_a and full_b:
            pa, pb = a.operand, b.operand
        elif full_a:
            pa, pb = a.operand, _fix(ctx, b, tb, ta, out_shape, out_b)
        elif full_b:
            pa, pb = _fix(ctx, a, ta, tb, out_shape, out_b), b.operand
        else:
            pa = _fix(ctx, a, ta, None, out_shape, out_b)
            pb = _fix(ctx, b, tb, ta, out_shape, out_b)
    return Aligned(pa, pb, out_shape, out_b)


def result_value(opd: Operand, shape: list[Dim], batched: bool | int | None, dtype: Any = None) -> Value:
    """Annotate a freshly emitted operand and wrap it as a :class:`Value`; ``batched`` is the
    batch dim (an int or None) or, as the older callers pass it, a bool for "dim 0"."""
    b = (0 if batched else None) if isinstance(batched, bool) else batched
    opd.shape = list(shape)
    set_batch_dim(opd, b)
    if dtype is not None:
        opd.dtype = dtype
    return Value(opd, list(shape), b)
