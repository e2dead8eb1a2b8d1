"""Insert ncnn ``Split`` layers: a blob consumed by more than one layer (or twice by one)
gets a Split with one output per use, as the ncnn runtime requires. An output marker counts as
a use only when the blob also feeds a layer (as in pnnx): otherwise an in-place consumer
(ReLU...) would overwrite the returned blob, or release it in light mode, before it is
extracted."""
from __future__ import annotations

from .manager import graph_pass


class _Uses:
    """Where each operand is read: ``(consumer, input index)`` in consumer order. A layer of many
    inputs (a Concat of hundreds of branches, each also read elsewhere) has its inputs indexed
    once, not scanned again for each of them."""

    def __init__(self) -> None:
        self._at: dict = {}  #: consumer → {operand: its input indices}

    def __call__(self, opd) -> list:
        uses = []
        for c in dict.fromkeys(opd.consumers):
            ins = c.inputs
            if len(ins) <= 4:
                uses += [(c, i) for i, x in enumerate(ins) if x is opd]
                continue
            at = self._at.get(c)
            if at is None:  # indices of operands this pass has yet to visit stay valid
                at = self._at[c] = {}
                for i, x in enumerate(ins):
                    at.setdefault(x, []).append(i)
            uses += [(c, i) for i in at.get(opd, ())]
        return uses


@graph_pass("insert_split", "give every blob used more than once a Split layer with one output per use")
def run(graph, cx):
    uses_of = _Uses()
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
