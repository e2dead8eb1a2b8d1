"""Convolutions: conv1d / conv2d / conv3d (integer, ``'same'`` or ``'valid'`` padding, groups,
dilation), conv_transpose1d / 2d / 3d (output_padding, groups, dilation) and core ATen's
``convolution``.

ATen → pnnx (constant weight and bias → pnnx modules, as pnnx's ``fuse_static_conv``):

* ``aten.conv{1,2,3}d.default``, ``aten.conv{1,2,3}d.padding``, ``aten.convolution.default``,
  ``aten._convolution.default`` → ``nn.Conv1d`` / ``nn.Conv2d`` / ``nn.Conv3d`` (``padding``
  stays ``'same'``/``'valid'`` when given so); a computed weight → ``F.conv1d`` / ``F.conv2d``
  (ncnn's Convolution3D has no dynamic weight: a computed 3-D kernel is refused);
* ``aten.conv_transpose1d.default``, ``aten.conv_transpose2d.input``,
  ``aten.conv_transpose3d.input`` and transposed ``convolution`` → ``nn.ConvTranspose1d`` /
  ``2d`` / ``3d``.

pnnx → ncnn (as pnnx's ``pass_ncnn/nn_Conv2d.cpp`` and friends):

* ``nn.Conv2d`` → ``Convolution`` (groups 1) or ``ConvolutionDepthWise`` (any other groups,
  depthwise or grouped); ``nn.Conv1d`` → ``Convolution1D`` / ``ConvolutionDepthWise1D``;
  ``nn.Conv3d`` → ``Convolution3D`` / ``ConvolutionDepthWise3D`` on a 4-D (C, D, H, W) blob.
  ``'same'`` is written as explicit pads (PyTorch puts the odd pixel after, as ncnn's
  SAME_UPPER), so asymmetric pads need no Padding layer;
* ``nn.ConvTranspose2d`` → ``Deconvolution`` / ``DeconvolutionDepthWise``
  (``nn.ConvTranspose1d`` / ``3d`` → the 1D / 3D forms); PyTorch's ``(in, out/groups, k...)``
  kernel is reordered to ncnn's ``(out/groups, in/groups, k...)`` per group. Grouped 2-D
  deconvolution with several input channels per group → ``Slice`` + one ``Deconvolution`` per
  group + ``Concat`` (the runtime's x86 DeconvolutionDepthWise is wrong there; its
  DeconvolutionDepthWise3D is right);
* ``F.conv2d`` / ``F.conv1d`` (weight computed in the graph) → ``Convolution`` /
  ``Convolution1D`` / depthwise forms with ``dynamic_weight=1`` and the weight (and bias) as
  extra input blobs; ``F.conv_transpose2d`` / ``1d`` likewise → ``Deconvolution`` /
  ``Deconvolution1D`` / depthwise forms, which take PyTorch's ``(in, out/groups, k...)`` weight
  blob as it is (grouped with several input channels per group: per-group layers on sliced
  input, weight and bias blobs, as for constant weights).
"""
from __future__ import annotations

import logging
import math

import numpy as np

from ..convert.context import Unsupported
from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import batch_dim, is_batched, ncnn_rank, set_batch_dim
from ._args import int_tuple
from ._weights import derived

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- ATen → pnnx
def _ints(value, n: int, what: str) -> tuple[int, ...]:
    """``value`` (an int or a list of 1 or ``n`` ints) as ``n`` ints; strides, dilations and
    group counts at least 1, paddings at least 0."""
    return int_tuple(value, n, what, at_least=_AT_LEAST.get(what))


_AT_LEAST = {"groups": 1, "stride": 1, "dilation": 1, "kernel_size": 1, "padding": 0, "output_padding": 0}


def _spatial_rank(op) -> int:
    w = op.named_input("weight")
    if w is None or w.shape is None:
        raise Unsupported("unsupported: convolution weight of unknown shape")
    nd = len(w.shape) - 2
    if nd not in (1, 2, 3):
        raise Unsupported(f"unsupported: {nd}-D convolution (conv1d, conv2d and conv3d are supported)")
    if not all(isinstance(d, int) for d in w.shape):
        raise Unsupported(f"unsupported: convolution weight of symbolic shape {w.shape}")
    return nd


def _lower_conv(ctx, op, transposed: bool):
    x, w, b = op.inputs[0], op.named_input("weight"), op.named_input("bias")
    nd = _spatial_rank(op)
    groups = _ints(op.params.get("groups", 1), 1, "groups")[0]
    stride = _ints(op.params.get("stride", 1), nd, "stride")
    dilation = _ints(op.params.get("dilation", 1), nd, "dilation")
    padding = op.params.get("padding", 0)
    if isinstance(padding, str):
        if padding not in ("same", "valid") or transposed:
            ctx.unsupported(f"padding={padding!r}")
    else:
        padding = _ints(padding, nd, "padding")
    kernel = tuple(int(k) for k in w.shape[2:])
    w_attr = ctx.attribute(w)
    b_attr = ctx.attribute(b) if b is not None else None
    if w_attr is None or (b is not None and b_attr is None):
        if nd == 3:
            ctx.unsupported(f"{'conv_transpose3d' if transposed else 'conv3d'} with a weight or bias computed in "
                            "the graph (ncnn's 3-D convolutions have no dynamic weight)")
        inputs = [x, w] + ([b] if b is not None else [])
        params = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        if transposed:
            params["output_padding"] = _ints(op.params.get("output_padding", 0), nd, "output_padding")
        return ctx.emit(f"F.conv_transpose{nd}d" if transposed else f"F.conv{nd}d", inputs,
                        input_names=["input", "weight", "bias"][:len(inputs)], params=params)
    attrs = {"weight": w_attr}
    if b_attr is not None:
        attrs["bias"] = b_attr
    if transposed:
        output_padding = _ints(op.params.get("output_padding", 0), nd, "output_padding")
        params = {"in_channels": int(w.shape[0]), "out_channels": int(w.shape[1]) * groups, "kernel_size": kernel,
                  "stride": stride, "padding": padding, "output_padding": output_padding, "groups": groups,
                  "bias": b_attr is not None, "dilation": dilation}
        return ctx.emit(f"nn.ConvTranspose{nd}d", [x], params=params, attrs=attrs)
    params = {"in_channels": int(w.shape[1]) * groups, "out_channels": int(w.shape[0]), "kernel_size": kernel,
              "stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
              "bias": b_attr is not None, "padding_mode": "zeros"}
    return ctx.emit(f"nn.Conv{nd}d", [x], params=params, attrs=attrs)


@aten_converter("aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.conv1d.padding",
                "aten.conv2d.padding", "aten.conv3d.padding")
def conv(ctx, op):
    return _lower_conv(ctx, op, transposed=False)


@aten_converter("aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.conv_transpose3d.input")
def conv_transpose(ctx, op):
    return _lower_conv(ctx, op, transposed=True)


@aten_converter("aten.convolution.default", "aten._convolution.default")
def convolution(ctx, op):
    return _lower_conv(ctx, op, transposed=bool(op.params.get("transposed", False)))


# ---------------------------------------------------------------------------- pnnx → ncnn
def _nd(op) -> int:
    return int(op.type[-2])  # nn.Conv1d ... nn.ConvTranspose3d, F.conv1d / F.conv2d


#: ncnn param names per spatial axis, outermost (d) first: kernel, stride, dilation, pads
_AXIS_NAMES = (("kernel_d", "stride_d", "dilation_d", "pad_front", "pad_behind"),
               ("kernel_h", "stride_h", "dilation_h", "pad_top", "pad_bottom"),
               ("kernel_w", "stride_w", "dilation_w", "pad_left", "pad_right"))


def _explicit_pads(op, nd: int, kernel, dilation) -> list[tuple[int, int]]:
    """(before, after) per spatial dim, torch order; ``'same'`` puts the odd pixel after."""
    padding = op.params["padding"]
    if padding == "valid":
        return [(0, 0)] * nd
    if padding == "same":
        out = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            out.append((total // 2, total - total // 2))
        return out
    return [(p, p) for p in _ints(padding, nd, "padding")]


def _geometry(nd: int, kernel, stride, dilation, pads) -> dict:
    """ncnn's kernel/stride/dilation/pad params (w = last torch dim, h = the one before, d = the
    one before that)."""
    out = {}
    for names, k, s, d, (before, after) in zip(_AXIS_NAMES[-nd:], kernel, stride, dilation, pads):
        out.update(zip(names, (k, s, d, before, after)))
    return out


def _layer_type(base: str, nd: int, groups: int) -> str:
    return base + ("DepthWise" if groups != 1 else "") + {1: "1D", 2: "", 3: "3D"}[nd]


_FEATURE_MAP = {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}


def _check_feature_map(op, ctx):
    """The input must be (N, C, L) / (N, C, H, W) / (N, C, D, H, W) with the batch axis at dim 0,
    or unbatched: a (C, L) / (C, H, W) / (C, D, H, W) blob in ncnn either way."""
    nd = _nd(op)
    x = op.inputs[0]
    if ncnn_rank(x) != nd + 1:
        return (f"unsupported: {op.type} input {x.name} of shape {x.shape} is not {_FEATURE_MAP[nd]} "
                "with the batch axis first")
    return None


@ncnn_rule("nn.Conv1d", "nn.Conv2d", "nn.Conv3d", validator=_check_feature_map)
def conv_layer(ctx, op):
    nd = _nd(op)
    p = op.params
    if p.get("padding_mode", "zeros") != "zeros":
        ctx.unsupported(f"padding_mode={p['padding_mode']!r}")
    kernel, stride, dilation = (_ints(p[k], nd, k) for k in ("kernel_size", "stride", "dilation"))
    groups = int(p.get("groups", 1))
    weight = op.attrs["weight"]
    weights = {"weight_data": weight}
    if p.get("bias"):
        weights["bias_data"] = op.attrs["bias"]
    return ctx.layer(_layer_type("Convolution", nd, groups), [op.inputs[0]], weights=weights,
                     num_output=int(p["out_channels"]), bias_term=int(bool(p.get("bias"))),
                     weight_data_size=math.prod(weight.shape), group=groups if groups != 1 else None,
                     **_geometry(nd, kernel, stride, dilation, _explicit_pads(op, nd, kernel, dilation)))


def _deconv_weight(weight, groups: int):
    """PyTorch ``(in, out/g, k...)`` → ncnn ``(g, out/g, in/g, k...)`` flattened as (out, in/g, k...)."""
    in_c, out_g, *kernel = weight.shape
    in_g = in_c // groups

    def load():
        w = np.asarray(weight.data).reshape(groups, in_g, out_g, -1)
        return np.ascontiguousarray(w.transpose(0, 2, 1, 3)).reshape(groups * out_g, in_g, *kernel)

    return derived(load, (groups * out_g, in_g, *kernel), weight.dtype)


@ncnn_rule("nn.ConvTranspose1d", "nn.ConvTranspose2d", "nn.ConvTranspose3d", validator=_check_feature_map)
def deconv_layer(ctx, op):
    nd = _nd(op)
    p = op.params
    kernel, stride, dilation, padding, output_padding = (
        _ints(p[k], nd, k) for k in ("kernel_size", "stride", "dilation", "padding", "output_padding"))
    groups = int(p.get("groups", 1))
    geometry = _geometry(nd, kernel, stride, dilation, [(q, q) for q in padding])
    geometry.update(zip(("output_pad_behind", "output_pad_bottom", "output_pad_right")[-nd:], output_padding))
    weight, bias = op.attrs["weight"], op.attrs.get("bias") if p.get("bias") else None
    in_g = int(weight.shape[0]) // groups
    if nd == 2 and groups > 1 and in_g > 1:
        return _grouped_deconv(ctx, op, weight, bias, groups, geometry)
    weights = {"weight_data": _deconv_weight(weight, groups)}
    if bias is not None:
        weights["bias_data"] = bias
    return ctx.layer(_layer_type("Deconvolution", nd, groups), [op.inputs[0]], weights=weights,
                     num_output=int(p["out_channels"]), bias_term=int(bias is not None),
                     weight_data_size=math.prod(weight.shape), group=groups if groups != 1 else None,
                     **geometry)


def _channel_slices(ctx, opd, groups: int, n: int, name: str) -> list:
    """``opd`` cut into ``groups`` pieces of ``n`` channels (its channel dim: 1 when it is
    batched at dim 0, else 0 — ncnn's outermost axis either way) by one ``Slice``."""
    c = 1 if batch_dim(opd) == 0 else 0
    parts = ctx.layer("Slice", [opd], outputs=groups, name=name, slices=[n] * groups, axis=0)
    for part in parts:
        part.shape = [*opd.shape[:c], n, *opd.shape[c + 1:]]
        set_batch_dim(part, 0 if c else None)
    return parts


def _per_group(ctx, op, groups: int, in_g: int, out_g: int, layer) -> object:
    """Slice the input → ``layer(g, piece)`` for each group → Concat. ncnn's x86
    DeconvolutionDepthWise gives wrong results for grouped (not depthwise) deconvolution with
    more than one input channel per group (it runs each group on a channel-range view of the
    input); separate blobs per group avoid that code path."""
    x, out = op.inputs[0], op.outputs[0]
    c = 1 if batch_dim(x) == 0 else 0
    outs = []
    for g, part in enumerate(_channel_slices(ctx, x, groups, in_g, f"{ctx.name}_slice")):
        y = layer(g, part)
        y.shape = [*out.shape[:c], out_g, *out.shape[c + 1:]]
        set_batch_dim(y, 0 if c else None)
        outs.append(y)
    return ctx.layer("Concat", outs, axis=0)


def _grouped_deconv(ctx, op, weight, bias, groups: int, geometry: dict):
    """Constant weights: each group's Deconvolution holds its range of the weight and bias."""
    in_c, out_g = int(weight.shape[0]), int(weight.shape[1])
    in_g = in_c // groups

    def layer(g, part):
        weights = {"weight_data": _deconv_weight(_channel_range(weight, g * in_g, in_g), 1)}
        if bias is not None:
            weights["bias_data"] = _channel_range(bias, g * out_g, out_g)
        return ctx.layer("Deconvolution", [part], weights=weights, name=f"{ctx.name}_g{g}", num_output=out_g,
                         bias_term=int(bias is not None), weight_data_size=in_g * math.prod(weight.shape[1:]),
                         **geometry)

    return _per_group(ctx, op, groups, in_g, out_g, layer)


def _channel_range(attr, start: int, n: int):
    return derived(lambda: np.ascontiguousarray(np.asarray(attr.data)[start:start + n]), (n, *attr.shape[1:]),
                   attr.dtype)


def _check_dynamic(op, ctx):
    why = _check_feature_map(op, ctx)
    if why:
        return why
    nd = _nd(op)
    w = op.inputs[1]
    if w.shape is None or len(w.shape) != nd + 2 or not all(isinstance(d, int) for d in w.shape):
        return f"unsupported: {op.type} weight {w.name} of shape {w.shape}"
    if is_batched(w) or ncnn_rank(w) != nd + 2:
        return f"unsupported: {op.type} weight {w.name} carries the batch axis"
    if len(op.inputs) > 2 and (is_batched(op.inputs[2]) or ncnn_rank(op.inputs[2]) != 1):
        return f"unsupported: {op.type} bias {op.inputs[2].name} is not a 1-D tensor"
    return None


@ncnn_rule("F.conv1d", "F.conv2d", validator=_check_dynamic)
def dynamic_conv_layer(ctx, op):
    nd = _nd(op)
    p = op.params
    w = op.inputs[1]
    kernel = tuple(w.shape[2:])
    stride, dilation = (_ints(p[k], nd, k) for k in ("stride", "dilation"))
    groups = int(p.get("groups", 1))
    inputs = [op.inputs[0], w]  # the runtime reads (w=kernel_w, h=kernel_h / in, c=out) off the blob
    bias = len(op.inputs) > 2
    if bias:
        inputs.append(op.inputs[2])
    return ctx.layer(_layer_type("Convolution", nd, groups), inputs, num_output=int(w.shape[0]),
                     bias_term=int(bias), weight_data_size=math.prod(w.shape), dynamic_weight=1,
                     group=groups if groups != 1 else None,
                     **_geometry(nd, kernel, stride, dilation, _explicit_pads(op, nd, kernel, dilation)))


@ncnn_rule("F.conv_transpose1d", "F.conv_transpose2d", validator=_check_dynamic)
def dynamic_deconv_layer(ctx, op):
    nd = _nd(op)
    p = op.params
    x, w = op.inputs[0], op.inputs[1]
    bias = op.inputs[2] if len(op.inputs) > 2 else None
    kernel = tuple(w.shape[2:])
    stride, dilation, padding, output_padding = (
        _ints(p[k], nd, k) for k in ("stride", "dilation", "padding", "output_padding"))
    groups = int(p.get("groups", 1))
    geometry = _geometry(nd, kernel, stride, dilation, [(q, q) for q in padding])
    geometry.update(zip(("output_pad_bottom", "output_pad_right")[-nd:], output_padding))
    in_c, out_g = int(w.shape[0]), int(w.shape[1])
    in_g = in_c // groups
    if groups == 1 or in_g == 1:
        inputs = [x, w] + ([bias] if bias is not None else [])
        return ctx.layer(_layer_type("Deconvolution", nd, groups), inputs, num_output=out_g * groups,
                         bias_term=int(bias is not None), weight_data_size=math.prod(w.shape), dynamic_weight=1,
                         group=groups if groups != 1 else None, **geometry)
    # grouped with several input channels per group: one Deconvolution per group (see
    # _per_group) on its slices of the weight and bias blobs
    ws = _channel_slices(ctx, w, groups, in_g, f"{ctx.name}_slice_w")
    bs = _channel_slices(ctx, bias, groups, out_g, f"{ctx.name}_slice_b") if bias is not None else None
    return _per_group(ctx, op, groups, in_g, out_g, lambda g, part: ctx.layer(
        _layer_type("Deconvolution", nd, 1), [part, ws[g]] + ([bs[g]] if bs else []), name=f"{ctx.name}_g{g}",
        num_output=out_g, bias_term=int(bias is not None), weight_data_size=in_g * out_g * math.prod(kernel),
        dynamic_weight=1, **geometry))
