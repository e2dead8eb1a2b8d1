"""Fold an inference BatchNorm into the convolution or transposed convolution before it
(pnnx's ``fuse_conv2d_batchnorm2d`` / ``fuse_convtranspose2d_batchnorm2d`` and 1d forms).

``nn.Conv1d/2d/3d`` or ``nn.ConvTranspose1d/2d/3d`` whose only user is an ``nn.BatchNorm1d/2d/3d`` over
its channels: the BatchNorm's per-channel ``scale, shift`` scale the kernel along the output
channels and become the bias (``bias * scale + shift``); the BatchNorm is removed and its users
read the convolution. The new weights are computed lazily: the kernel in float32, as pnnx folds
it (within one float32 ulp of a float64 fold, and several times cheaper on large kernels); the
per-channel vectors in float64.
"""
from __future__ import annotations

import numpy as np

from ..converters._weights import as_f64, derived, derived_rows
from ..converters.norm import batchnorm_affine
from ._rewrite import sole_consumer
from .manager import graph_pass

_CONVS = {f"nn.{conv}{n}d": f"nn.BatchNorm{n}d" for conv in ("Conv", "ConvTranspose") for n in (1, 2, 3)}


def fold_scale_shift(graph, op, bn, weight_fn, through=None):
    """Give ``op`` the folded ``weight`` (``weight_fn(w, scale)``, both float32) and bias, drop ``bn``
    (whose readers read ``through``, by default ``op``'s output)."""
    weight, bias = op.attrs["weight"], op.attrs.get("bias")
    n = int(bn.params["num_features"])

    computed: list = []

    def scale_shift():  # once for both weights (a list, not functools.cache: made for every fold)
        if not computed:
            computed.append(batchnorm_affine(bn))
        return computed[0]

    def new_weight(rows=slice(None)):
        scale, _ = scale_shift()
        return weight_fn(np.asarray(weight.data[rows], np.float32), scale[rows].astype(np.float32))

    def new_bias():
        scale, shift = scale_shift()
        old = 0.0 if bias is None else as_f64(bias, n, 0.0)  # no bias: zeros, without the array of them
        return (old * scale + shift).astype(np.float32)

    # whole output channels scaled (not a transposed convolution's): a block of them at a time
    op.attrs["weight"] = (derived_rows if weight_fn is scale_rows else derived)(new_weight, weight.shape)
    op.attrs["bias"] = derived(new_bias, (n,))
    op.params["bias"] = True
    op.provenance = op.provenance.union(bn.provenance)
    graph.replace_all_uses(bn.outputs[0], through if through is not None else op.outputs[0])
    graph.remove_op(bn)


def scale_rows(w, scale):
    """``w`` (output channels first: a convolution kernel or a linear weight) times ``scale``
    per output channel (each channel's weights as one contiguous row)."""
    return (w.reshape(len(scale), -1) * scale[:, None]).reshape(w.shape)


def _scale_deconv(groups):
    def fn(w, scale):
        in_c, out_g = w.shape[:2]
        wg = w.reshape(groups, in_c // groups, out_g, -1) * scale.reshape(groups, 1, out_g, 1)
        return wg.reshape(w.shape)
    return fn


@graph_pass("fuse_conv_batchnorm", "fold BatchNorm into the preceding convolution / transposed convolution")
def run(graph, cx):
    for op in list(graph.ops):
        bn_type = _CONVS.get(op.type)
        if bn_type is None or "weight" not in op.attrs:
            continue
        bn = sole_consumer(op, (bn_type,))
        if bn is None or int(bn.params["num_features"]) != int(op.params["out_channels"]):
            continue
        fn = _scale_deconv(int(op.params.get("groups", 1))) if "Transpose" in op.type else scale_rows
        fold_scale_shift(graph, op, bn, fn)
