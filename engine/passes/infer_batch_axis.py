"""Mark which operands carry the model's batch axis at dim 0 (``operand.meta["batch"]``),
so ncnn rules can drop it (ncnn has no batch axis).

Model inputs of rank ≥ 2 are batched; constants are batched when they have rank ≥ 2 and a
leading 1 (e.g. a ViT position embedding ``(1, 197, 768)``). Otherwise an operator's outputs
are batched when one of its inputs is and the output's dim 0 equals that input's dim 0, except
where an operator states otherwise in ``op.meta["batch_out"]`` (a list of bools) — e.g. a
reshape or permute that moves the batch axis.
"""
from __future__ import annotations

from .manager import graph_pass


def _batched_input(op):
    for i in op.inputs:
        if i.meta.get("batch") and i.shape:
            return i
    return None


@graph_pass("infer_batch_axis", "mark operands whose dim 0 is the batch axis (dropped in ncnn)")
def run(graph, cx):
    for op in graph.ops:
        if op.type == "pnnx.Input":
            for o in op.outputs:
                o.meta["batch"] = o.shape is not None and len(o.shape) >= 2
            continue
        if op.type == "pnnx.Attribute":
            for o in op.outputs:
                o.meta["batch"] = bool(o.shape) and len(o.shape) >= 2 and o.shape[0] == 1
            continue
        forced = op.meta.get("batch_out")
        if forced is not None:
            for o, b in zip(op.outputs, forced):
                o.meta["batch"] = bool(b)
            continue
        src = _batched_input(op)
        for o in op.outputs:
            o.meta["batch"] = bool(src is not None and o.shape and o.shape[0] == src.shape[0])
