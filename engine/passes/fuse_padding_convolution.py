"""Fold a constant ``Padding`` layer into the convolution after it (pnnx's
``fuse_padding_convolution`` / ``fuse_padding_convolutiondepthwise``, extended to 1D, to 3D
(the Padding's front/behind pad the depth of a 4-D blob: ``pad_front``/``pad_behind``) and to
asymmetric pads, which ncnn's pad_left/right/top/bottom express directly).

Conditions: Padding ``type=0`` (constant), no per-channel values, no front/behind (channel)
padding of a 1D/2D convolution's input, no negative (cropping) pads, the convolution is the
Padding's only reader, the convolution's own pads are explicit (not ncnn's -233/-234 SAME
modes), and the pad value equals the convolution's ``pad_value`` when the convolution already
pads.
"""
from __future__ import annotations

from ..ncnn.layers import make_params, param_values, resolve_params
from ._rewrite import sole_consumer
from .manager import graph_pass

CONV2D = ("Convolution", "ConvolutionDepthWise")
CONV1D = ("Convolution1D", "ConvolutionDepthWise1D")
CONV3D = ("Convolution3D", "ConvolutionDepthWise3D")
_SIDES = ("pad_left", "pad_right", "pad_top", "pad_bottom", "pad_front", "pad_behind")
#: the convolution's pad param for each Padding side it can absorb
_CONV_SIDE = {"left": "pad_left", "right": "pad_right", "top": "pad_top", "bottom": "pad_bottom",
              "front": "pad_front", "behind": "pad_behind"}


def _fusable(pad: dict, conv_type: str, conv: dict) -> bool:
    if pad["type"] != 0 or pad["per_channel_pad_data_size"] != 0:
        return False
    if conv_type not in CONV3D and (pad["front"] != 0 or pad["behind"] != 0):
        return False
    if min(pad["top"], pad["bottom"], pad["left"], pad["right"], pad["front"], pad["behind"]) < 0:
        return False
    if conv_type in CONV1D and (pad["top"] or pad["bottom"]):
        return False  # a 1D convolution's blob is (h=channels, w=length)
    sides = [conv[s] for s in _SIDES if s in conv]
    if min(sides) < 0:
        return False
    return not any(sides) or float(pad["value"]) == float(conv["pad_value"])


@graph_pass("fuse_padding_convolution", "fold constant Padding layers into the following convolution's pads")
def run(graph, cx):
    for pad in list(graph.ops):
        if pad.type != "Padding" or len(pad.inputs) != 1:
            continue
        conv = sole_consumer(pad, CONV2D + CONV1D + CONV3D)
        if conv is None:
            continue
        pp = resolve_params("Padding", pad.params)
        cp = resolve_params(conv.type, conv.params)
        if not _fusable(pp, conv.type, cp):
            continue
        new = {name: cp[name] + pp[side] for side, name in _CONV_SIDE.items() if name in cp}
        new["pad_value"] = float(pp["value"])
        conv.params = make_params(conv.type, **{**param_values(conv.type, conv.params), **new})
        conv.provenance = conv.provenance.union(pad.provenance)
        graph.set_input(conv, 0, pad.inputs[0])
        graph.remove_op(pad)
