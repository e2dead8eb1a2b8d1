"""Undo core ATen's flattening around a linear layer: ``reshape(x, (prod(lead), in))`` →
``nn.Linear`` → ``reshape(.., (*lead, out))`` becomes ``nn.Linear`` on ``x`` directly (what the
TRAINING dialect's ``aten.linear`` gives, and pnnx's F.linear pattern for view/addmm/view).
Only for static shapes where both reshapes are exactly that flatten/unflatten and their
intermediate values have no other reader."""
from __future__ import annotations

import math

from ._rewrite import sole_consumer
from .manager import graph_pass

RESHAPES = ("Tensor.reshape", "Tensor.view")


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


@graph_pass("fuse_linear_reshape", "remove the flatten/unflatten reshapes core ATen puts around a linear layer")
def run(graph, cx):
    for op in list(graph.ops):
        if op.type != "nn.Linear" or len(op.inputs) != 1:
            continue
        flat, out = op.inputs[0], op.outputs[0]
        before = flat.producer
        if before is None or before.type not in RESHAPES or sole_consumer(before, ("nn.Linear",)) is not op:
            continue
        after = sole_consumer(op, RESHAPES)
        x = before.inputs[0]
        if after is None or not (_static(x.shape) and _static(flat.shape) and _static(after.outputs[0].shape)):
            continue
        lead = list(x.shape[:-1])
        if len(lead) < 2 or flat.shape != [math.prod(lead), x.shape[-1]]:
            continue
        if after.outputs[0].shape != lead + [out.shape[-1]]:
            continue
        graph.set_input(op, 0, x)
        out.shape = list(after.outputs[0].shape)
        op.provenance = op.provenance.union(before.provenance, after.provenance)
        graph.replace_all_uses(after.outputs[0], out)
        graph.remove_op(after)
        graph.remove_op(before)
