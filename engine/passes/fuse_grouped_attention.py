"""Let ncnn's SDPA share key/value heads (grouped-query attention) instead of repeating them
(ATen level, before lowering).

Hugging Face's ``repeat_kv`` (LLaMA, Mistral, Qwen, Gemma...) copies each of the ``G`` key/value
heads ``n`` times before attention::

    k' = reshape(expand(unsqueeze(k, 2), [B, G, n, S, E]), [B, G*n, S, E])

When both the key and the value of an ``aten.scaled_dot_product_attention.default`` are made
so (same ``n``), the SDPA reads ``k``/``v`` directly with ``enable_gqa=True``: query head ``h``
uses key/value head ``h // n``, exactly the repetition's order, and ncnn's SDPA does the same
from ``G`` key/value planes (no ``Tile`` copies).
"""
from __future__ import annotations

import logging

from ..ir import Graph, Operand
from .manager import graph_pass

log = logging.getLogger(__name__)

SDPA = "aten.scaled_dot_product_attention.default"
_RESHAPES = ("aten.reshape.default", "aten.view.default", "aten._unsafe_view.default")


def _repeated(opd: Operand) -> tuple[Operand, int] | None:
    """``(k, n)`` when ``opd`` is ``k``'s heads each repeated ``n`` times, else None."""
    reshape = opd.producer
    if reshape is None or reshape.type not in _RESHAPES:
        return None
    expand = reshape.inputs[0].producer
    if expand is None or expand.type != "aten.expand.default":
        return None
    unsq = expand.inputs[0].producer
    if unsq is None or unsq.type != "aten.unsqueeze.default":
        return None
    k = unsq.inputs[0]
    if k.shape is None or len(k.shape) != 4 or unsq.params.get("dim") not in (2, -3):
        return None
    b, g, s, e = k.shape
    big = expand.outputs[0].shape
    if big is None or len(big) != 5 or list(big[:2]) != [b, g] or list(big[3:]) != [s, e]:
        return None
    n = big[2]
    if not isinstance(n, int) or not isinstance(g, int) or list(opd.shape or []) != [b, g * n, s, e]:
        return None
    return k, n


@graph_pass("fuse_grouped_attention", "attention reads repeated key/value heads once (SDPA's grouped heads)")
def run(graph: Graph, cx) -> None:
    for op in graph.ops_of_type(SDPA):
        key, value = op.named_input("key"), op.named_input("value")
        rk, rv = _repeated(key), _repeated(value)
        if rk is None or rv is None or rk[1] != rv[1]:
            continue
        graph.set_input(op, op.input_names.index("key"), rk[0])
        graph.set_input(op, op.input_names.index("value"), rv[0])
        op.params["enable_gqa"] = True
        graph.prune([key, value])
        log.debug("%s reads %d key/value heads, each for %d query heads", op.name, rk[0].shape[1], rk[1])
