"""Activations.

ATen → pnnx (pnnx's own op names and params):

==============================================  ==============================================
``aten.relu.default``                            ``F.relu``
``aten.relu6.default``, ``hardtanh(0, 6)``       ``F.relu6``
``aten.hardtanh.default``                        ``F.hardtanh(min_val, max_val)``
``aten.clamp.default``, ``clamp_min.default``,   ``torch.clamp(min, max)`` (None = unbounded)
``clamp_max.default``
``aten.clamp.Tensor``, ``clamp_min.Tensor``,     ``torch.clamp`` for one-element constant
``clamp_max.Tensor``                             bounds, else ``pnnx.Expression`` min/max
``aten.leaky_relu.default``                      ``F.leaky_relu(negative_slope)``
``aten.prelu.default``,                          ``nn.PReLU(num_parameters)`` ``@weight``
``aten._prelu_kernel.default``                   (constant weight)
``aten.elu.default``                             ``F.elu(alpha)``; ``F.selu`` for SELU's
                                                 constants; ``F.elu(alpha, scale)`` otherwise
``aten.selu.default`` / ``aten.celu.default``    ``F.selu`` / ``F.celu(alpha)``
``aten.gelu.default``                            ``F.gelu(approximate)``
``aten.silu/mish/sigmoid/tanh.default``          ``F.silu`` / ``F.mish`` / ``F.sigmoid`` / ``F.tanh``
``aten.hardsigmoid/hardswish.default``           ``F.hardsigmoid`` / ``F.hardswish``
``aten.softplus.default``                        ``F.softplus(beta, threshold)``
``aten.log_sigmoid.default``,                    ``F.logsigmoid``
``aten.log_sigmoid_forward.default``
==============================================  ==============================================

pnnx → ncnn: ``ReLU`` (slope for leaky), ``Clip`` (``torch.clamp(min=0)`` is ``ReLU``),
``PReLU``, ``ELU``, ``SELU``, ``CELU``, ``GELU`` (``fast_gelu=1`` for ``approximate='tanh'``),
``Swish``, ``Mish``, ``Sigmoid``, ``TanH``, ``HardSigmoid``/``HardSwish`` (alpha 1/6, beta 0.5),
``Softplus`` (``beta != 1`` wraps it in scalar ``BinaryOp`` mul/div), ``F.logsigmoid`` →
``Sigmoid`` + ``UnaryOp`` log. Core-ATen decompositions of these activations are put back
together by the ``recompose_activations`` pass before lowering.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..ir import Attribute
from ..ncnn.enums import BinaryOpType, UnaryOpType
from ._expression import ExpressionBuilder

#: SELU's constants (torch.nn.functional.selu)
SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805

#: Softplus: ncnn has no threshold; thresholds where switching to ``x`` changes the result by at
#: most ``log1p(exp(-threshold)) / beta`` ≤ 1e-6 / beta convert silently
SOFTPLUS_MIN_THRESHOLD = 14.0
#: lower thresholds convert with a warning while that difference stays within fp32 tolerance
#: (``pt2ncnn verify``'s default for fp32 weights: |ncnn − PyTorch| ≤ atol + rtol·|PyTorch|,
#: checked where it is largest, right above the threshold, where |PyTorch| ≥ threshold / beta)
SOFTPLUS_TOLERANCE = (1e-5, 1e-4)

_SIMPLE = {
    "aten.relu.default": "F.relu", "aten.relu6.default": "F.relu6", "aten.selu.default": "F.selu",
    "aten.silu.default": "F.silu", "aten.mish.default": "F.mish", "aten.sigmoid.default": "F.sigmoid",
    "aten.tanh.default": "F.tanh", "aten.hardsigmoid.default": "F.hardsigmoid",
    "aten.hardswish.default": "F.hardswish", "aten.log_sigmoid.default": "F.logsigmoid",
}


def _number(ctx, op, name: str, allow_none: bool = False) -> Any:
    v = op.params.get(name)
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return ctx.unsupported(f"{name}={v!r} is not a constant number")
    return v


# ---------------------------------------------------------------------------- ATen → pnnx
@aten_converter(*_SIMPLE)
def simple_activation(ctx, op):
    return ctx.emit(_SIMPLE[op.type], [op.inputs[0]])


@aten_converter("aten.log_sigmoid_forward.default")
def log_sigmoid_forward(ctx, op):
    if len(op.outputs) > 1 and op.outputs[1].consumers:
        ctx.unsupported("the buffer output of log_sigmoid_forward is used")
    out = ctx.emit("F.logsigmoid", [op.inputs[0]])
    return [out] + [None] * (len(op.outputs) - 1)


@aten_converter("aten.hardtanh.default")
def hardtanh(ctx, op):
    lo, hi = _number(ctx, op, "min_val"), _number(ctx, op, "max_val")
    if lo == 0 and hi == 6:
        return ctx.emit("F.relu6", [op.inputs[0]])
    return ctx.emit("F.hardtanh", [op.inputs[0]], params={"min_val": lo, "max_val": hi})


@aten_converter("aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default")
def clamp(ctx, op):
    lo = _number(ctx, op, "min", allow_none=True) if op.type != "aten.clamp_max.default" else None
    hi = _number(ctx, op, "max", allow_none=True) if op.type != "aten.clamp_min.default" else None
    return ctx.emit("torch.clamp", [op.inputs[0]], params={"min": lo, "max": hi})


def _bound(ctx, op, name: str) -> tuple[str, Any]:
    """``("none", None)``, ``("literal", value)`` or ``("tensor", operand)`` for a clamp bound."""
    if name in op.input_names:
        opd = op.inputs[op.input_names.index(name)]
        value = ctx.const_value(opd)
        x = op.inputs[0]
        if value is not None and np.size(value) == 1 and (opd.shape is None or x.shape is None
                                                          or len(opd.shape) <= len(x.shape)):
            return "literal", np.asarray(value).reshape(-1)[0].item()
        return "tensor", opd
    v = op.params.get(name)
    if v is None:
        return "none", None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return "literal", v
    return ctx.unsupported(f"{name}={v!r}")


@aten_converter("aten.clamp.Tensor", "aten.clamp_min.Tensor", "aten.clamp_max.Tensor")
def clamp_tensor(ctx, op):
    lo = _bound(ctx, op, "min") if op.type != "aten.clamp_max.Tensor" else ("none", None)
    hi = _bound(ctx, op, "max") if op.type != "aten.clamp_min.Tensor" else ("none", None)
    if lo[0] != "tensor" and hi[0] != "tensor":
        return ctx.emit("torch.clamp", [op.inputs[0]], params={"min": lo[1], "max": hi[1]})
    e = ExpressionBuilder()
    text = e.input(op.inputs[0])
    for (kind, v), fn in ((lo, "maximum"), (hi, "minimum")):
        if kind != "none":
            text = e.call(fn, text, e.input(v) if kind == "tensor" else e.literal(v))
    return ctx.emit("pnnx.Expression", e.inputs, params={"expr": text})


@aten_converter("aten.leaky_relu.default")
def leaky_relu(ctx, op):
    return ctx.emit("F.leaky_relu", [op.inputs[0]], params={"negative_slope": _number(ctx, op, "negative_slope")})


def _prelu_slopes(ctx, op) -> np.ndarray:
    """The per-channel slopes of a PReLU, flattened; the weight must be a constant applying
    to dim 1 (or a single slope)."""
    x, w = op.inputs[0], op.inputs[1]
    a = ctx.attribute(w)
    value = ctx.const_value(w) if a is None else None
    if a is None and value is None:
        ctx.unsupported(f"weight {w.name} is not a constant")
    shape = list(a.shape if a is not None else np.shape(value))
    numel = int(np.prod(shape)) if shape else 1
    if numel != 1:
        if x.shape is None or len(x.shape) < 2:
            ctx.unsupported(f"weight of shape {shape} for an input of shape {x.shape} (no channel dim)")
        channels = x.shape[1]
        if op.type == "aten.prelu.default":
            ok = len(shape) == 1 and shape[0] == channels
        else:  # _prelu_kernel broadcasts the weight: its only non-1 dim must line up with dim 1
            padded = [1] * (len(x.shape) - len(shape)) + shape
            ok = len(padded) == len(x.shape) and padded[1] == channels and all(
                d == 1 for i, d in enumerate(padded) if i != 1)
        if not ok:
            ctx.unsupported(f"weight of shape {shape} is not per-channel for an input of shape {x.shape}")
    data = a.data if a is not None else value
    return np.asarray(data, dtype=np.float32).reshape(-1)


@aten_converter("aten.prelu.default", "aten._prelu_kernel.default")
def prelu(ctx, op):
    slopes = _prelu_slopes(ctx, op)
    return ctx.emit("nn.PReLU", [op.inputs[0]], params={"num_parameters": int(slopes.size)},
                    attrs={"weight": Attribute(slopes)})


@aten_converter("aten.elu.default")
def elu(ctx, op):
    alpha, scale, input_scale = (_number(ctx, op, k) for k in ("alpha", "scale", "input_scale"))
    if input_scale != 1:
        ctx.unsupported(f"elu with input_scale={input_scale}")
    if math.isclose(alpha, SELU_ALPHA, rel_tol=1e-7) and math.isclose(scale, SELU_SCALE, rel_tol=1e-7):
        return ctx.emit("F.selu", [op.inputs[0]])
    params = {"alpha": alpha} if scale == 1 else {"alpha": alpha, "scale": scale}
    return ctx.emit("F.elu", [op.inputs[0]], params=params)


@aten_converter("aten.celu.default")
def celu(ctx, op):
    return ctx.emit("F.celu", [op.inputs[0]], params={"alpha": _number(ctx, op, "alpha")})


@aten_converter("aten.gelu.default")
def gelu(ctx, op):
    approximate = op.params.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        ctx.unsupported(f"gelu approximate={approximate!r}")
    return ctx.emit("F.gelu", [op.inputs[0]], params={"approximate": approximate})


def _softplus_gap(t: float) -> float:
    """How much ncnn's threshold-less Softplus differs from PyTorch's, at most, times beta."""
    return math.log1p(math.exp(-t)) if t > -700 else math.inf


def _softplus_check(op, ctx):
    t = op.params.get("threshold", 20)
    if isinstance(t, (int, float)) and t < SOFTPLUS_MIN_THRESHOLD:
        atol, rtol = SOFTPLUS_TOLERANCE
        beta = op.params.get("beta", 1)
        if not isinstance(beta, (int, float)) or not beta or t <= 0 or \
                _softplus_gap(t) / abs(beta) > atol + rtol * t / abs(beta):
            return (f"unsupported: softplus threshold={t}: ncnn's Softplus has no threshold and would differ by up "
                    f"to {_softplus_gap(t):.3g}/beta above it, more than fp32 tolerance")
    return None


@aten_converter("aten.softplus.default", validator=_softplus_check)
def softplus(ctx, op):
    beta, threshold = _number(ctx, op, "beta"), _number(ctx, op, "threshold")
    if beta == 0:
        ctx.unsupported("softplus with beta=0")
    if threshold < SOFTPLUS_MIN_THRESHOLD:
        ctx.warn(f"softplus threshold={threshold}: ncnn's Softplus has no threshold; results above it differ by up "
                 f"to {_softplus_gap(threshold) / abs(beta):.3g} (within fp32 tolerance)")
    return ctx.emit("F.softplus", [op.inputs[0]], params={"beta": beta, "threshold": threshold})


# ---------------------------------------------------------------------------- pnnx → ncnn
_PLAIN_LAYERS = {"F.relu": "ReLU", "F.selu": "SELU", "F.silu": "Swish", "F.mish": "Mish", "F.sigmoid": "Sigmoid",
                 "F.tanh": "TanH"}


@ncnn_rule(*_PLAIN_LAYERS)
def plain_layer(ctx, op):
    return ctx.layer(_PLAIN_LAYERS[op.type], [op.inputs[0]])


@ncnn_rule("F.relu6")
def relu6_layer(ctx, op):
    return ctx.layer("Clip", [op.inputs[0]], min=0.0, max=6.0)


@ncnn_rule("F.hardtanh")
def hardtanh_layer(ctx, op):
    return ctx.layer("Clip", [op.inputs[0]], min=float(op.params["min_val"]), max=float(op.params["max_val"]))


@ncnn_rule("torch.clamp")
def clamp_layer(ctx, op):
    lo, hi = op.params.get("min"), op.params.get("max")
    if lo is not None and lo == 0 and hi is None:
        return ctx.layer("ReLU", [op.inputs[0]])
    return ctx.layer("Clip", [op.inputs[0]], min=None if lo is None else float(lo), max=None if hi is None else float(hi))


@ncnn_rule("F.leaky_relu")
def leaky_relu_layer(ctx, op):
    return ctx.layer("ReLU", [op.inputs[0]], slope=float(op.params["negative_slope"]))


@ncnn_rule("nn.PReLU")
def prelu_layer(ctx, op):
    w = op.attrs["weight"]
    return ctx.layer("PReLU", [op.inputs[0]], num_slope=int(op.params["num_parameters"]),
                     weights={"slope_data": w.map(lambda a: np.asarray(a, dtype=np.float32).reshape(-1),
                                                  (math.prod(w.shape),), "f32")})


@ncnn_rule("F.elu")
def elu_layer(ctx, op):
    alpha, scale = float(op.params.get("alpha", 1.0)), float(op.params.get("scale", 1.0))
    if scale != 1.0:
        return ctx.layer("SELU", [op.inputs[0]], alpha=alpha, **{"lambda": scale})
    return ctx.layer("ELU", [op.inputs[0]], alpha=alpha)


@ncnn_rule("F.celu")
def celu_layer(ctx, op):
    return ctx.layer("CELU", [op.inputs[0]], alpha=float(op.params.get("alpha", 1.0)))


@ncnn_rule("F.gelu")
def gelu_layer(ctx, op):
    return ctx.layer("GELU", [op.inputs[0]], fast_gelu=int(op.params.get("approximate", "none") == "tanh"))


@ncnn_rule("F.hardsigmoid", "F.hardswish")
def hard_layer(ctx, op):
    layer = "HardSigmoid" if op.type == "F.hardsigmoid" else "HardSwish"
    return ctx.layer(layer, [op.inputs[0]], alpha=1.0 / 6, beta=0.5)


@ncnn_rule("F.softplus")
def softplus_layer(ctx, op):
    beta = float(op.params.get("beta", 1.0))
    x = op.inputs[0]
    if beta == 1.0:
        return ctx.layer("Softplus", [x])
    scaled = ctx.layer("BinaryOp", [x], op_type=BinaryOpType.MUL, with_scalar=1, b=beta)
    y = ctx.layer("Softplus", [scaled])
    return ctx.layer("BinaryOp", [y], op_type=BinaryOpType.DIV, with_scalar=1, b=beta)


@ncnn_rule("F.logsigmoid")
def logsigmoid_layer(ctx, op):
    s = ctx.layer("Sigmoid", [op.inputs[0]])
    return ctx.layer("UnaryOp", [s], op_type=UnaryOpType.LOG)
