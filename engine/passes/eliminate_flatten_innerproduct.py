"""Drop a ``Flatten`` layer whose only reader is an ``InnerProduct``: the runtime's InnerProduct
flattens a 3-D / 4-D blob itself, in the same (c, d, h, w) order (ncnn's InnerProduct::forward).
A 2-D blob is kept flattened explicitly: InnerProduct would read it as rows (gemm) when its
width equals the layer's input size. Saves a layer and a copy in every CNN classifier head."""
from __future__ import annotations

from ..convert.shapes import ncnn_rank
from ._rewrite import sole_consumer
from .manager import graph_pass


@graph_pass("eliminate_flatten_innerproduct", "drop Flatten before InnerProduct (InnerProduct flattens itself)")
def run(graph, cx):
    for op in list(graph.ops):
        if op.type != "Flatten" or len(op.inputs) != 1:
            continue
        ip = sole_consumer(op, ("InnerProduct",))
        if ip is None or ncnn_rank(op.inputs[0]) not in (3, 4):
            continue
        ip.provenance = ip.provenance.union(op.provenance)
        graph.set_input(ip, 0, op.inputs[0])
        graph.remove_op(op)
