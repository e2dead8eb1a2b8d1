"""Put core ATen's batched ``matmul`` back together (ATen level, before lowering).

``run_decompositions()`` spells ``a @ b`` on tensors of rank ≥ 3 (or with broadcast batch
dims) as ``view(bmm(view(expand(a)), view(expand(b))), out)``: the batch dims are broadcast,
flattened into one, multiplied and unflattened. Those flattened intermediates mix the batch
axis with the others and may need 5-D views; ``aten.matmul.default(a, b)`` is one ncnn MatMul.

The chain is replaced when every intermediate value has a single user, each operand's view
keeps its last two dims, and the final view's shape is ``a @ b``'s broadcast shape. A right
operand that constant folding already made one ``(batch, K, N)`` constant (a small weight
broadcast over the batch: Twins-SVT's qkv projection) is the weight it was broadcast from again.
"""
from __future__ import annotations

import logging
import math

import numpy as np

from ..converters.matmul import matmul_result_shape
from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
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


def _folded_weight(flat: Operand, batch) -> np.ndarray | None:
    """A weight broadcast over the batch and folded as such (constant folding made ``expand`` +
    ``view`` of a small weight one ``(batch..., K, N)`` constant): the weight as it was, with
    only the trailing batch dims of ``batch`` (the left operand's) its values vary along — none
    for a matrix (Twins-SVT's qkv projection), the heads for a per-head weight."""
    p = flat.producer
    if p is None or p.type != "pnnx.Attribute" or "data" not in p.attrs or len(flat.consumers) != 1:
        return None
    data = np.asarray(p.attrs["data"].data)
    batch = list(batch)
    if data.ndim != 3 or not all(isinstance(d, int) for d in batch) or math.prod(batch) != data.shape[0]:
        return None
    for j in range(len(batch), -1, -1):  # the fewest trailing dims first
        tail = batch[j:]
        blocks = data.reshape(-1, math.prod(tail), *data.shape[1:])
        if (blocks == blocks[:1]).all():
            return np.ascontiguousarray(blocks[0].reshape(*tail, *data.shape[1:]))
    return None


def _broadcasts(a, b) -> bool:
    """Whether batch dims ``a`` and ``b`` broadcast together (right-aligned: equal, or one is 1)."""
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(list(a)), reversed(list(b))))


def _recompose(graph: Graph, out_view: Operator) -> bool:
    bmm = _sole(out_view.inputs[0], ("aten.bmm.default",))
    out = out_view.outputs[0]
    if bmm is None or out.shape is None:
        return False
    absorbed = [bmm]
    a = _operand_of(bmm.inputs[0], absorbed)
    b = _operand_of(bmm.inputs[1], absorbed)
    matrix = _folded_weight(b, a.shape[:-2]) if b is bmm.inputs[1] and a.shape is not None else None
    b_shape = b.shape if matrix is None else list(matrix.shape)
    if len(absorbed) == 1 or a.shape is None or b_shape is None or len(a.shape) < 2 or len(b_shape) < 2:
        return False
    if list(a.shape[-2:]) != list(bmm.inputs[0].shape[-2:]) or list(b_shape[-2:]) != list(bmm.inputs[1].shape[-2:]):
        return False
    if not _broadcasts(a.shape[:-2], b_shape[:-2]) or matmul_result_shape(a.shape, b_shape) != list(out.shape):
        return False
    if matrix is not None:
        b = AtenEmitter(graph, bmm).constant(matrix, name=f"{b.name}_matrix")
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
