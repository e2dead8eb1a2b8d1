"""Run shape-agnostic elementwise layers before a Reshape instead of after it, so the Reshape
meets the next one and the two merge (ncnn level, before ``eliminate_noop_reshape``).

Linear layers on 3-D/4-D activations are ``Reshape → Gemm → Reshape``; a transformer MLP is
then ``… Gemm → Reshape → GELU → Reshape → Gemm …``: the GELU does not care about the shape,
so it runs on the Gemm's output and the two Reshapes around it become one (then nothing, when
they undo each other). Applies to a ``Reshape``/``Flatten`` followed by a chain of :data:`ELEMENTWISE` layers (each
the only reader of the one before, none a model output) ending in another ``Reshape``/``Flatten``;
the elementwise layers keep their names and output blobs, now in the first Reshape's input
shape.
"""
from __future__ import annotations

from ..ncnn.layers import param_values
from .manager import graph_pass

_RESHAPES = ("Reshape", "Flatten")
#: layers computing each element from itself alone (params independent of the shape)
ELEMENTWISE = ("ReLU", "GELU", "Sigmoid", "TanH", "Swish", "Mish", "HardSwish", "HardSigmoid", "ELU", "SELU",
               "CELU", "Clip", "UnaryOp", "Erf", "Exp", "Log", "Power", "Threshold", "Softplus", "AbsVal", "BNLL")


def _shape_free(op) -> bool:
    if op.type in ELEMENTWISE:
        return len(op.inputs) == 1 and len(op.outputs) == 1
    if op.type == "BinaryOp":
        return len(op.inputs) == 1 and param_values("BinaryOp", op.params).get("with_scalar") == 1
    return False


def _sole_reader(opd):
    return opd.consumers[0] if len(opd.consumers) == 1 else None


@graph_pass("move_reshape_past_elementwise", "elementwise layers between two Reshapes run first; the Reshapes merge")
def run(graph, cx):
    for first in list(graph.ops):
        if first.type not in _RESHAPES or first not in graph.ops or len(first.inputs) != 1:
            continue
        chain, nxt = [], _sole_reader(first.outputs[0])
        while nxt is not None and _shape_free(nxt):
            chain.append(nxt)
            nxt = _sole_reader(nxt.outputs[0])
        second = nxt
        if not chain or second is None or second.type not in _RESHAPES or len(second.inputs) != 1:
            continue
        x, r = first.inputs[0], first.outputs[0]
        # x → chain (in x's shape) → first → r (the reshaped shape) → second
        graph.set_input(chain[0], 0, x)
        graph.set_input(first, 0, chain[-1].outputs[0])
        graph.set_input(second, 0, r)
        for op in chain:
            u = op.outputs[0]
            if u.shape is not None:  # the same data, re-shaped: what Verify compares it with
                u.meta.setdefault("aten_layout", {"value": u.name, "view_of": list(u.shape)})
            u.shape = None if x.shape is None else list(x.shape)
            u.meta.update({k: x.meta[k] for k in ("batch", "batch_dim") if k in x.meta})
        graph.move_before(first, second)
