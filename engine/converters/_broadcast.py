"""Make two tensors broadcast in ncnn exactly as they do in PyTorch.

PyTorch aligns shapes from the right (numpy rules). ncnn's ``BinaryOp`` (``binaryop.cpp``)
broadcasts axis by axis only when both Mats have the same number of dims; when they differ it
expands the lower-rank Mat on its *inner* side: a 2-D ``(h, w)`` operand against a 3-D one
becomes ``(h, w, 1)`` (its rows line up with channels), and a 1-D operand of length ``n``
becomes ``(n, 1, ...)`` when ``n`` equals the other's outermost dim, else ``(..., 1, n)``.

:func:`align_operands` computes, for each operand, the batch-less shape it must have for the
PyTorch result (its right-aligned shape, with the output's batch axis dropped) and makes it so:
nothing when ncnn's implicit rule already gives that shape, a reshaped ``MemoryData`` for a
constant, else an ``ExpandDims`` / ``Squeeze`` layer. Broadcasting that mixes the batch axis with
another axis, or needs more than 4 dims without the batch axis, is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..convert.shapes import is_batched
from ..ir import Dim, Operand


@dataclass
class Value:
    """A tensor during expression expansion: its operand, PyTorch shape and batch flag."""

    operand: Operand
    shape: list[Dim]
    batched: bool

    @staticmethod
    def of(opd: Operand) -> "Value":
        shape = list(opd.shape) if opd.shape is not None else None
        if shape is None:
            from ..convert.context import Unsupported

            raise Unsupported(f"unsupported: shape of {opd.name} unknown")
        return Value(opd, shape, is_batched(opd))

    @property
    def ncnn_shape(self) -> list[Dim]:
        return self.shape[1:] if self.batched else list(self.shape)


def broadcast_shapes(a: list[Dim], b: list[Dim], what: str) -> list[Dim]:
    """PyTorch's broadcast of two shapes (symbolic dims compare by name)."""
    from ..convert.context import Unsupported

    n = max(len(a), len(b))
    pa, pb = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    out: list[Dim] = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif isinstance(x, int) and isinstance(y, int):
            raise Unsupported(f"unsupported: {what}: shapes {a} and {b} do not broadcast")
        else:
            out.append(x if isinstance(x, str) else y)
    return out


def _target(v: Value, rank: int, out_batched: bool, what: str) -> list[Dim]:
    """The batch-less shape operand ``v`` must have in ncnn for an output of ``rank`` dims.
    A batch axis of static size 1 that PyTorch lines up with another axis is just a 1 there
    (ncnn runs batch 1); a dynamic one cannot be expressed."""
    from ..convert.context import Unsupported

    padded = [1] * (rank - len(v.shape)) + list(v.shape)
    moved = v.batched and (not out_batched or len(v.shape) != rank)
    if moved and v.shape[0] != 1:
        raise Unsupported(f"unsupported: {what}: the batch axis of {v.operand.name} {v.shape} would broadcast "
                          f"against a non-batch axis of the {rank}-d result")
    if out_batched:
        if not v.batched and padded[0] != 1:
            raise Unsupported(f"unsupported: {what}: {v.operand.name} {v.shape} has extent {padded[0]} along "
                              "the batch axis of the result")
        return padded[1:]
    return padded


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
    data = md.attrs["data"].map(lambda a: np.ascontiguousarray(np.asarray(a, dtype=np.float32).reshape(shape or (1,))))
    return ctx.layer("MemoryData", [], weights={"data": data}, name=f"{md.name}_bcast", shape=torch_shape,
                     **memorydata_params(shape))


def _fix(ctx, v: Value, target: list[Dim], ref: list[Dim] | None, out_batched: bool) -> Operand:
    """Make ``v``'s ncnn Mat broadcast like ``target`` against a Mat of shape ``ref``."""
    actual = v.ncnn_shape
    n = len(target)
    if len(actual) == n:
        return v.operand
    if len(actual) < n and ref is not None and implicit_expansion(actual, ref, n) == list(target):
        return v.operand
    torch_shape = ([1] + list(target)) if out_batched else list(target)
    if memorydata_of(v.operand) is not None and all(isinstance(d, int) for d in target):
        out = _reshaped_constant(ctx, v, target, torch_shape)
    elif len(actual) > n:
        drop = len(actual) - n
        out = ctx.layer("Squeeze", [v.operand], axes=list(range(drop)), name=f"{v.operand.name}_squeeze",
                        shape=torch_shape)
    else:
        out = ctx.layer("ExpandDims", [v.operand], axes=list(range(n - len(actual))),
                        name=f"{v.operand.name}_expand", shape=torch_shape)
    out.meta["batch"] = out_batched
    out.dtype = "f32" if out.producer.type == "MemoryData" else v.operand.dtype
    return out


def align_operands(ctx, a: Value, b: Value, what: str) -> tuple[Operand, Operand, list[Dim], bool]:
    """Operands to feed ncnn's BinaryOp so it computes PyTorch's broadcast of ``a`` and ``b``;
    also returns the result's PyTorch shape and batch flag."""
    from ..convert.context import Unsupported

    out_shape = broadcast_shapes(a.shape, b.shape, what)
    rank = len(out_shape)
    out_batched = (a.batched and len(a.shape) == rank) or (b.batched and len(b.shape) == rank)
    ta, tb = _target(a, rank, out_batched, what), _target(b, rank, out_batched, what)
    n = len(ta)
    if n > 4:
        raise Unsupported(f"unsupported: {what} on {n}-d tensors (ncnn has at most 4 dims without the batch axis)")
    if n == 0:
        return a.operand, b.operand, out_shape, out_batched
    full_a, full_b = len(a.ncnn_shape) == n, len(b.ncnn_shape) == n
    if full_a and full_b:
        return a.operand, b.operand, out_shape, out_batched
    if full_a:
        return a.operand, _fix(ctx, b, tb, ta, out_batched), out_shape, out_batched
    if full_b:
        return _fix(ctx, a, ta, tb, out_batched), b.operand, out_shape, out_batched
    pa = _fix(ctx, a, ta, None, out_batched)
    return pa, _fix(ctx, b, tb, ta, out_batched), out_shape, out_batched


def result_value(opd: Operand, shape: list[Dim], batched: bool, dtype: Any = None) -> Value:
    """Annotate a freshly emitted operand and wrap it as a :class:`Value`."""
    opd.shape = list(shape)
    opd.meta["batch"] = batched
    if dtype is not None:
        opd.dtype = dtype
    return Value(opd, list(shape), batched)
