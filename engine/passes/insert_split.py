"""Insert ncnn ``Split`` layers: a blob consumed by more than one layer (or twice by one)
gets a Split with one output per use, as the ncnn runtime requires. An output marker counts as
a use only when the blob also feeds a layer (as in pnnx): otherwise an in-place consumer
(ReLU...) would overwrite the returned blob, or release it in light mode, before it is
extracted."""
from __future__ import annotations

from ..ir.graph import InputPositions
from .manager import graph_pass


@graph_pass("insert_split", "give every blob used more than once a Split layer with one output per use")
def run(graph, cx):
    uses_of = InputPositions()  # the Splits change only inputs already visited
    for opd in list(graph.operands.values()):
        cons = opd.consumers
        if not cons or len(cons) == 1 and cons[0].inputs.count(opd) == 1:  # one use
            continue
        uses = uses_of(opd)
        if all(c.type == "Output" for c, _ in uses):
            continue
        if len(uses) < 2 or opd.producer is None:
            continue
        prod = opd.producer
        outs = [graph.new_operand(f"{opd.name}_split_{k}", dtype=opd.dtype, shape=opd.shape) for k in range(len(uses))]
        for o in outs:  # the same blob: the same batch axis
            o.meta.update({k: opd.meta[k] for k in ("batch", "batch_dim") if k in opd.meta})
        split = graph.add_op("Split", f"{opd.name}_split", [opd], outs, provenance=prod.provenance, after=prod)
        for k in ("source", "module_stack", "aten_op"):
            if k in prod.meta:
                split.meta[k] = prod.meta[k]
        for (consumer, idx), new in zip(uses, outs):
            graph.set_input(consumer, idx, new)
