"""Fold an inference ``nn.BatchNorm1d`` into the ``nn.Linear`` before it (pnnx's
``fuse_linear_batchnorm1d``): for a 2-D ``(N, features)`` input to the BatchNorm, where its
channels are the linear layer's output features — the linear output itself, or that output
reshaped with the features kept last (timm's LeViT: ``bn(linear(x).flatten(0, 1)).reshape_as(x)``,
a BatchNorm over tokens)."""
from __future__ import annotations

from ._rewrite import sole_consumer
from .fuse_conv_batchnorm import fold_scale_shift, scale_rows
from .manager import graph_pass

_RESHAPES = ("Tensor.reshape", "Tensor.view", "torch.flatten")


@graph_pass("fuse_linear_batchnorm", "fold BatchNorm1d into the preceding linear layer")
def run(graph, cx):
    for op in list(graph.ops):
        if op.type != "nn.Linear" or "weight" not in op.attrs:
            continue
        features = int(op.params["out_features"])
        cur = op
        while True:  # reshapes that keep the features as the last dim
            nxt = sole_consumer(cur, _RESHAPES + ("nn.BatchNorm1d",))
            shape = cur.outputs[0].shape
            if nxt is None or shape is None or shape[-1] != features:
                nxt = None
                break
            if nxt.type == "nn.BatchNorm1d":
                break
            cur = nxt
        bn = nxt
        if bn is None or len(cur.outputs[0].shape) != 2 or int(bn.params["num_features"]) != features:
            continue
        fold_scale_shift(graph, op, bn, scale_rows, through=cur.outputs[0])
