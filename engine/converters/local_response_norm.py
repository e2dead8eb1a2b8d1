"""Local response normalization across channels.

pnnx → ncnn: ``F.local_response_norm`` (made by the ``fuse_local_response_norm`` pass from
PyTorch's exported form, odd ``size`` only) → ``LRN`` (region across channels, ``local_size,
alpha, beta, bias = k``) on a (C, H, W) blob. There is no ATen op to lower: PyTorch exports the
normalization as a padded ``avg_pool3d`` chain, which converts op by op where it is not fused.
"""
from __future__ import annotations

from ..convert.registry import ncnn_rule
from ..convert.shapes import ncnn_axis, ncnn_rank
from ..ncnn.enums import LRNRegion


def _check_channels(op, ctx):
    x = op.inputs[0]
    if ncnn_rank(x) != 3 or ncnn_axis(x, 1) != 0:
        return f"unsupported: local_response_norm of {x.name} {x.shape}: ncnn's LRN normalizes a (C, H, W) blob"
    return None


@ncnn_rule("F.local_response_norm", validator=_check_channels)
def local_response_norm_ncnn(ctx, op):
    p = op.params
    return ctx.layer("LRN", [op.inputs[0]], region_type=int(LRNRegion.ACROSS_CHANNELS), local_size=int(p["size"]),
                     alpha=float(p["alpha"]), beta=float(p["beta"]), bias=float(p["k"]))
