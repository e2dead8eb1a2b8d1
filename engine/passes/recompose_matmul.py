"""Put core ATen's batched ``matmul`` back together (ATen level, before lowering).

``run_decompositions()`` spells ``a @ b`` on tensors of rank ≥ 3 (or with broadcast batch
dims) as ``view(bmm(view(expand(a)), view(expand(b))), out)``: the batch dims are broadcast,
flattened into one, multiplied and unflattened. Those flattened intermediates mix the batch
axis with the others and may need 5-D views; ``aten.matmul.default(a, b)`` is one ncnn MatMul.

The chain is replaced when every intermediate value has a single user, each operand's view
keeps its last two dims, and the final view's shape is ``a @ b``'s broadcast shape.
"""
from __future__ import annotations

import logging

from ..converters.matmul import matmul_result_shape
from ..ir import Graph, Operand, Operator
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

VIEWS = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")


def _sole(opd: Operand, types) -> Operator | None:
    p = opd.producer
    if p is None or p.type not in types or len(opd.consumers) != 1 or len(p.outputs) != 1:
        return None
    return p


def _operand_of(flat: Operand, absorbed: list[Operator]) -> Operand:
    """The tensor a bmm operand was flattened from: through ``view`` and ``expand``."""
    x = flat
    view = _sole(x, VIEWS)
    if view is None:
        return x
    absorbed.append(view)
    x = view.inputs[0]
    expand = _sole(x, ("aten.expand.default",))
    if expand is not None:
        absorbed.append(expand)
        x = expand.inputs[0]
    return x


def _recompose(graph: Graph, out_view: Operator) -> bool:
    bmm = _sole(out_view.inputs[0], ("aten.bmm.default",))
    out = out_view.outputs[0]
    if bmm is None or out.shape is None:
        return False
    absorbed = [bmm]
    a = _operand_of(bmm.inputs[0], absorbed)
    b = _operand_of(bmm.inputs[1], absorbed)
    if len(absorbed) == 1 or a.shape is None or b.shape is None or len(a.shape) < 2 or len(b.shape) < 2:
        return False
    if list(a.shape[-2:]) != list(bmm.inputs[0].shape[-2:]) or list(b.shape[-2:]) != list(bmm.inputs[1].shape[-2:]):
        return False
    if matmul_result_shape(a.shape, b.shape) != list(out.shape):
        return False
    new = replace_chain(graph, out_view, absorbed, "aten.matmul.default", [a, b], input_names=["self", "other"])
    new.meta["target"] = "aten.matmul.default"
    new.meta["recomposed_from"] = [o.name for o in absorbed] + [new.name]
    return True


@graph_pass("recompose_matmul", "turn core ATen's view/expand/bmm/view spelling of a batched matmul into matmul")
def run(graph: Graph, cx) -> None:
    for op in list(graph.ops):
        if op.type in VIEWS and op.inputs and op.inputs[0].producer is not None \
                and op.inputs[0].producer.type == "aten.bmm.default":
            if _recompose(graph, op):
                log.debug("recomposed matmul at %s", op.name)
