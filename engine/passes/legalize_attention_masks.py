"""Make every ``scaled_dot_product_attention`` mask one ncnn's ``SDPA`` can add (ATen level,
after the attention recompositions).

ncnn's SDPA adds a float mask to the scores; PyTorch also takes a boolean one (True = attend).

* a constant mask that masks nothing (boolean all True, additive all zeros) — also one folded at
  the largest size and cut to the run-time one, as a decode step's mask over its cache is — is
  dropped;
* a constant boolean mask that is PyTorch's causal mask becomes ``is_causal=True`` (no input),
  also when it is a causal mask folded at the largest size and cut to the run-time one;
  any other constant one becomes the additive constant (0 where True, ``-1e30`` elsewhere);
* a boolean mask computed at run time (a padding mask from ``attention_mask``, combined with a
  causal or sliding-window mask) becomes ``logical_not(mask) * -1e30`` (see
  :data:`engine.converters.attention.MASKED`), and the attention output is multiplied by
  ``amax(mask, -1)``: a query row whose keys are all masked gives zeros in PyTorch, and a finite
  uniform average (never NaN) in ncnn before that product.
"""
from __future__ import annotations

import logging

import numpy as np

from ..converters.attention import MASKED, is_causal_mask
from ..ir import Graph
from ._aten import AtenEmitter
from ._match import const_array
from .decompose_runtime_lookups import cut_constant
from .manager import graph_pass

log = logging.getLogger(__name__)

SDPA = "aten.scaled_dot_product_attention.default"


def _masks_nothing(table: np.ndarray) -> bool:
    """A boolean mask of all True, or an additive one of all zeros."""
    return bool(table.all()) if table.dtype == np.bool_ else bool(table.size) and not np.any(table)


@graph_pass("legalize_attention_masks", "make boolean attention masks additive (causal ones is_causal)")
def run(graph: Graph, cx) -> None:
    for op in graph.ops_of_type(SDPA):
        mask = op.named_input("attn_mask")
        if mask is None or mask.shape is None:
            continue
        index = op.input_names.index("attn_mask")
        value = const_array(mask)
        cut = cut_constant(mask) if value is None else None
        table = value if value is not None else cut[0] if cut is not None else None
        if table is not None and _masks_nothing(np.asarray(table)):
            # attends to every key (a decode step's mask, cut to the run-time cache length): no mask
            graph.remove_input(op, index)
            graph.prune([mask])
            continue
        if mask.dtype != "bool":
            continue
        if cut is not None and is_causal_mask(cut[0]) and not op.params.get("is_causal"):
            # a causal mask folded at the largest size and cut to the run-time one is causal
            graph.remove_input(op, index)
            op.params["is_causal"] = True
            graph.prune([mask])
            continue
        if value is not None:
            if is_causal_mask(value) and not op.params.get("is_causal"):
                graph.remove_input(op, index)
                op.params["is_causal"] = True
            else:
                em = AtenEmitter(graph, op)
                additive = np.where(np.asarray(value, bool), np.float32(0), np.float32(MASKED)).astype(np.float32)
                graph.set_input(op, index, em.constant(additive, name=f"{op.name}_mask"))
            graph.prune([mask])
            continue
        shape = list(mask.shape)
        em = AtenEmitter(graph, op)
        em.base = f"{op.name}_mask"
        hidden = em.op("aten.logical_not.default", {"self": mask}, shape=shape, dtype="bool")
        additive = em.op("aten.mul.Tensor", {"self": hidden}, shape=shape, dtype="f32", other=MASKED)
        keep = em.op("aten._to_copy.default", {"self": mask}, shape=shape, dtype="f32")
        rows = em.op("aten.amax.default", {"self": keep}, shape=shape[:-1] + [1], dtype="f32", dim=[-1],
                     keepdim=True)
        graph.set_input(op, index, additive)
        out = op.outputs[0]
        after = AtenEmitter(graph, op, after=True)
        after.base = f"{op.name}_rows"
        readers = list(out.consumers)
        guarded = after.op("aten.mul.Tensor", {"self": out, "other": rows}, shape=list(out.shape), dtype=out.dtype)
        for r in readers:
            for k, x in enumerate(r.inputs):
                if x is out:
                    graph.set_input(r, k, guarded)
        log.debug("made the boolean mask of %s additive", op.name)
