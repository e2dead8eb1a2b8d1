"""Matching ATen chains for the ``recompose_*`` passes: :class:`Match` collects the operators of
a chain while it is walked from its root towards its inputs; :func:`arg`, :func:`number` and
:func:`commuted` read an operator's arguments; :func:`const_array` a constant operand's value."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import Operand, Operator
from ..ir.vocab import is_aten


class Match:
    """The ops of one matched chain (the root last) and the replacement's inputs/params."""

    def __init__(self) -> None:
        self.ops: list[Operator] = []

    def take(self, opd: Operand | None, *types: str, sole: bool = True) -> Operator | None:
        """The producer of ``opd`` if its type is one of ``types`` (and, with ``sole``, ``opd``
        has no other user); the op is recorded as part of the chain."""
        if opd is None or opd.producer is None or opd.producer.type not in types or not is_aten(opd.producer):
            return None
        if sole and len(opd.consumers) != 1:
            return None
        if opd.producer not in self.ops:
            self.ops.append(opd.producer)
        return opd.producer


def arg(op: Operator, name: str) -> Operand | None:
    """The operand passed as schema argument ``name``, or None."""
    return op.inputs[op.input_names.index(name)] if name in op.input_names else None


def number(op: Operator, name: str) -> Any:
    """A Python number argument, or a one-element constant tensor's value, else None."""
    opd = arg(op, name)
    if opd is not None:
        return const_scalar(opd)
    v = op.params.get(name)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def const_scalar(opd: Operand) -> Any:
    """The value of a folded scalar or a one-element constant tensor, else None."""
    if "const" in opd.meta and isinstance(opd.meta["const"], (int, float)):
        return opd.meta["const"]
    p = opd.producer
    if p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs and int(np.prod(p.attrs["data"].shape)) == 1:
        return np.asarray(p.attrs["data"].data).reshape(-1)[0].item()
    return None


def const_array(opd: Operand | None) -> np.ndarray | None:
    """The value of a constant operand (a folded scalar or a ``pnnx.Attribute``, loaded), else None."""
    if opd is None:
        return None
    if "const" in opd.meta:
        return np.asarray(opd.meta["const"])
    p = opd.producer
    if p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs:
        return np.asarray(p.attrs["data"].data)
    return None


def commuted(op: Operator) -> list[tuple[Operand | None, Operand | None]]:
    """Both ``(x, y)`` orders of a commutative binary op's tensor operands."""
    a, b = arg(op, "self"), arg(op, "other")
    return [(a, b), (b, a)]
