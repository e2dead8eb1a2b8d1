"""Fuse an activation layer into the convolution / deconvolution / InnerProduct before it, as
ncnn's ``activation_type`` / ``activation_params`` (pnnx's ``fuse_convolution_activation``
family, plus HardSwish which the runtime's fused activation also implements):

============  ===============  =====================
layer         activation_type  activation_params
============  ===============  =====================
ReLU          1 (slope 0)      —
ReLU (leaky)  2                (slope,)
Clip          3                (min, max)
Sigmoid       4                —
Mish          5                —
HardSwish     6                (alpha, beta)
============  ===============  =====================

Only when the producer has no activation yet and the activation is the sole reader of its
output (a graph output or a second reader keeps them apart).
"""
from __future__ import annotations

from ..ncnn.layers import param_id, resolve_params
from ._rewrite import sole_consumer
from .manager import graph_pass

#: layers with ncnn's fused activation (params 9 activation_type / 10 activation_params)
PRODUCERS = tuple(f"{base}{suffix}" for base in ("Convolution", "ConvolutionDepthWise", "Deconvolution",
                                                  "DeconvolutionDepthWise") for suffix in ("", "1D", "3D")) + (
    "InnerProduct",)
_PRODUCER_TYPES = frozenset(PRODUCERS)
ACTIVATIONS = ("ReLU", "Clip", "Sigmoid", "Mish", "HardSwish")


def activation_of(layer) -> tuple[int, list[float]]:
    """ncnn's (activation_type, activation_params) equivalent to activation layer ``layer``."""
    p = resolve_params(layer.type, layer.params)
    if layer.type == "ReLU":
        slope = float(p["slope"])
        return (1, []) if slope == 0.0 else (2, [slope])
    if layer.type == "Clip":
        return 3, [float(p["min"]), float(p["max"])]
    if layer.type == "HardSwish":
        return 6, [float(p["alpha"]), float(p["beta"])]
    return {"Sigmoid": 4, "Mish": 5}[layer.type], []


@graph_pass("fuse_convolution_activation", "fuse ReLU/LeakyReLU/Clip/Sigmoid/Mish/HardSwish into the conv or "
            "InnerProduct before it")
def run(graph, cx):
    for op in list(graph.ops):
        if op.type not in _PRODUCER_TYPES:
            continue
        act = sole_consumer(op, ACTIVATIONS)  # before resolving every param: mostly None
        if act is None or resolve_params(op.type, op.params)["activation_type"] != 0:
            continue
        kind, values = activation_of(act)
        op.params[param_id(op.type, "activation_type")] = kind
        if values:
            op.params[param_id(op.type, "activation_params")] = values
        op.params = dict(sorted(op.params.items()))
        op.provenance = op.provenance.union(act.provenance)
        graph.replace_all_uses(act.outputs[0], op.outputs[0])
        graph.remove_op(act)
