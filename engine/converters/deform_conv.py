"""Deformable convolution: torchvision's ``DeformConv2d`` (``torchvision.ops.deform_conv2d``).

ATen → pnnx: ``torchvision.deform_conv2d.default`` with a constant weight (and bias) →
``torchvision.ops.DeformConv2d`` (``in_channels, out_channels, kernel_size, stride, padding,
dilation, groups, bias``; ``@weight``, ``@bias``) of the input, the offsets and, with
``use_mask``, the modulation mask (DCNv2).

pnnx → ncnn: ``DeformableConv2D`` (the kernel in PyTorch's ``(out, in, kh, kw)`` order) with the
input, offset and mask blobs. The runtime has one weight group and one offset group: more of
either is refused.
"""
from __future__ import annotations

import math


from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_rank

_GEOMETRY = (("stride_h", "stride_w"), ("pad_h", "pad_w"), ("dilation_h", "dilation_w"))


@aten_converter("torchvision.deform_conv2d.default")
def deform_conv2d(ctx, op):
    x, offset, mask = op.named_input("input"), op.named_input("offset"), op.named_input("mask")
    w, b = op.named_input("weight"), op.named_input("bias")
    w_attr = ctx.attribute(w)
    b_attr = ctx.attribute(b) if b is not None else None
    if w_attr is None or (b is not None and b_attr is None):
        ctx.unsupported("deform_conv2d with a weight or bias computed in the graph")
    p = op.params
    values = [p.get(k) for pair in _GEOMETRY for k in pair] + [p.get("groups"), p.get("offset_groups")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        ctx.unsupported(f"deform_conv2d with non-constant geometry {values}")
    stride, padding, dilation = ([p[a], p[b]] for a, b in _GEOMETRY)
    out_c, in_g, kh, kw = (int(d) for d in w.shape)
    params = {"in_channels": in_g * p["groups"], "out_channels": out_c, "kernel_size": [kh, kw], "stride": stride,
              "padding": padding, "dilation": dilation, "groups": p["groups"], "offset_groups": p["offset_groups"],
              "bias": b_attr is not None}
    attrs = {"weight": w_attr} | ({"bias": b_attr} if b_attr is not None else {})
    inputs = [x, offset] + ([mask] if p.get("use_mask") else [])
    return ctx.emit("torchvision.ops.DeformConv2d", inputs, params=params, attrs=attrs,
                    input_names=["input", "offset", "mask"][:len(inputs)])


def _check_groups(op, ctx):
    p = op.params
    if p["groups"] != 1 or p["offset_groups"] != 1:
        return (f"unsupported: deform_conv2d with groups={p['groups']}, offset_groups={p['offset_groups']} "
                "(ncnn's DeformableConv2D has one of each)")
    if any(ncnn_rank(x) != 3 for x in op.inputs):
        return "unsupported: deform_conv2d of inputs that are not (N, C, H, W) with the batch axis first"
    return None


@ncnn_rule("torchvision.ops.DeformConv2d", validator=_check_groups)
def deformable_conv_layer(ctx, op):
    p = op.params
    weight = op.attrs["weight"]
    weights = {"weight_data": weight}
    if p["bias"]:
        weights["bias_data"] = op.attrs["bias"]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = p["kernel_size"], p["stride"], p["padding"], p["dilation"]
    return ctx.layer("DeformableConv2D", list(op.inputs), weights=weights, num_output=p["out_channels"],
                     kernel_w=kw, kernel_h=kh, stride_w=sw, stride_h=sh, dilation_w=dw, dilation_h=dh,
                     pad_left=pw, pad_right=pw, pad_top=ph, pad_bottom=ph, bias_term=int(bool(p["bias"])),
                     weight_data_size=math.prod(weight.shape))
