"""Reading a tensor's value as a Python number: ``tensor.item()`` / ``.tolist()`` (``aten.item``,
core ATen's ``_local_scalar_dense``). A constant's is folded before lowering; what reaches this
rule is a value computed at run time — JetMoE's per-expert token counts, used to split the
tokens — a data-dependent number. An ncnn model's sizes come from its blobs' shapes, never from
their values, and ncnn has no scalars outside blobs, so it is refused by name, with the cure
where there is one: a number used only in arithmetic can stay a tensor in the model
(``x * t`` for ``x * t.item()``).
"""
from __future__ import annotations

from ..convert.registry import aten_converter

READS = ("aten.item.default", "aten._local_scalar_dense.default")


def _reason(op) -> str:
    src = op.inputs[0].name if op.inputs else "a tensor"
    return (f"unsupported: {src}'s value read as a number at run time (.item()/.tolist()): a data-dependent "
            "value an ncnn model cannot hold (its sizes come from shapes, not values); if the number only "
            "scales or shifts tensors, keep it a tensor in the model (x * t rather than x * t.item())")


@aten_converter(*READS, validator=lambda op, ctx: _reason(op))
def scalar_read(ctx, op):  # refused by its validator; a plug-in overriding it decides otherwise
    ctx.unsupported(_reason(op))
