"""Fold an inference ``nn.BatchNorm1d`` into the ``nn.Linear`` before it (pnnx's
``fuse_linear_batchnorm1d``): only for a 2-D ``(N, features)`` linear output, where the
BatchNorm's channels are the linear layer's output features."""
from __future__ import annotations

from ._rewrite import sole_consumer
from .fuse_conv_batchnorm import fold_scale_shift, scale_rows
from .manager import graph_pass


@graph_pass("fuse_linear_batchnorm", "fold BatchNorm1d into the preceding linear layer")
def run(graph, cx):
    for op in list(graph.ops):
        if op.type != "nn.Linear" or "weight" not in op.attrs:
            continue
        out = op.outputs[0]
        bn = sole_consumer(op, ("nn.BatchNorm1d",))
        if bn is None or out.shape is None or len(out.shape) != 2:
            continue
        if int(bn.params["num_features"]) != int(op.params["out_features"]):
            continue
        fold_scale_shift(graph, op, bn, scale_rows)
