"""Which vocabulary an operator belongs to: ``aten`` (built from the program), ``pnnx``
(``nn.Conv2d``, ``F.relu``, ``torch.cat``, ``Tensor.view``, ``pnnx.*``) or ``ncnn`` (``Convolution``).

The builder marks every operator it makes from a graph node with ``meta["target"]`` (the
serialized target); that, not the type's spelling, is what makes an operator ATen-level
(``torch.sym_float`` is a graph target, ``torch.cat`` a pnnx op).
"""
from __future__ import annotations

from .graph import Operator


def vocabulary(op: Operator) -> str:
    if "target" in op.meta:
        return "aten"
    return "pnnx" if "." in op.type else "ncnn"


def is_aten(op: Operator) -> bool:
    return "target" in op.meta


def is_pnnx(op: Operator) -> bool:
    return "target" not in op.meta and "." in op.type


def is_ncnn(op: Operator) -> bool:
    return "target" not in op.meta and "." not in op.type
