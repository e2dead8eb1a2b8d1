"""Fully connected layers with constant weights.

ATen → pnnx ``nn.Linear`` (params ``in_features, out_features, bias``; attrs ``weight`` in
PyTorch's ``(out, in)`` layout, ``bias``):

* ``aten.linear.default`` with a constant weight (and constant or no bias);
* core ATen's ``aten.addmm.default(bias, x, permute(weight, [1, 0]))`` and
  ``aten.mm.default(x, permute(weight, [1, 0]))`` (``t``/``transpose`` too, lowered or not, or a
  constant ``(in, out)`` matrix directly); ``beta``/``alpha`` are folded into the weights;
* ``aten.matmul.default(x, W)`` with a constant 2-D ``W``.

Each validator refuses a computed weight with a reason, so another family (matmul between
activations) can take those.

pnnx → ncnn (as pnnx's ``pass_ncnn/nn_Linear.cpp`` and ``insert_reshape_linear``):

* input ``(N, in)`` → ``InnerProduct`` (a 1-D blob in ncnn);
* input ``(N, m, in)`` (or unbatched ``(m, in)``) → ``Gemm`` (``transB=1``, constant B = the
  weight, constant C = the bias broadcast along N);
* higher ranks → ``Reshape`` to 2-D, ``Gemm``, ``Reshape`` back.
"""
from __future__ import annotations

import logging
import math
from numbers import Number

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import is_batched, ncnn_shape
from ._weights import derived, derived_rows, matmul_weight, product_f32

log = logging.getLogger(__name__)


def _emit_linear(ctx, x, weight, bias):
    out_f, in_f = (int(s) for s in weight.shape)
    attrs = {"weight": weight}
    if bias is not None:
        attrs["bias"] = bias
    return ctx.emit("nn.Linear", [x], params={"in_features": in_f, "out_features": out_f, "bias": bias is not None},
                    attrs=attrs)


def _bias_vector(ctx, opd, out_f: int):
    """The bias operand of addmm as a constant ``(out,)`` attribute, else None."""
    attr = ctx.attribute(opd)
    if attr is None or math.prod(attr.shape) not in (1, out_f) or len(attr.shape) > 2:
        return None
    if attr.shape == (out_f,):
        return attr
    return derived(lambda: np.broadcast_to(np.asarray(attr.data).reshape(-1), (out_f,)).copy(), (out_f,), attr.dtype)


# ---------------------------------------------------------------------------- aten.linear
def _check_linear(op, ctx):
    w, b = op.named_input("weight"), op.named_input("bias")
    wa = ctx.attribute(w)
    if wa is None or len(wa.shape) != 2:
        return f"unsupported: linear weight {w.name} is not a constant 2-D tensor"
    if b is not None:
        ba = ctx.attribute(b)
        if ba is None or ba.shape != (wa.shape[0],):
            return f"unsupported: linear bias {b.name} is not a constant ({wa.shape[0]},) vector"
    return None


@aten_converter("aten.linear.default", validator=_check_linear)
def linear(ctx, op):
    b = op.named_input("bias")
    return _emit_linear(ctx, op.inputs[0], ctx.attribute(op.named_input("weight")),
                        ctx.attribute(b) if b is not None else None)


# ---------------------------------------------------------------------------- addmm / mm / matmul
def _scalar(op, key) -> float | None:
    v = op.params.get(key, 1)
    return float(v) if isinstance(v, Number) and not isinstance(v, bool) else None


def _mm_operands(op):
    """``(x, mat2)`` of ``x @ mat2`` for addmm (bias, x, mat2), mm and matmul (x, mat2)."""
    return tuple(op.inputs[1:3]) if op.type == "aten.addmm.default" else tuple(op.inputs[:2])


def _check_mm(op, ctx):
    x, mat2 = _mm_operands(op)
    if matmul_weight(ctx, mat2) is None:
        return f"unsupported: {op.type} with a right operand that is not a constant 2-D matrix"
    if x.shape is None or len(x.shape) < 1:
        return f"unsupported: {op.type} of a scalar"
    if op.type == "aten.addmm.default":
        if _scalar(op, "alpha") is None or _scalar(op, "beta") is None:
            return "unsupported: addmm with symbolic alpha/beta"
        if _bias_vector(ctx, op.inputs[0], int(mat2.shape[1])) is None:
            return f"unsupported: addmm bias {op.inputs[0].name} is not a constant vector"
    return None


def _scaled(attr, factor: float):
    if factor == 1.0:
        return attr
    return derived_rows(lambda rows: product_f32(attr.data[rows], np.float64(factor)), attr.shape)


@aten_converter("aten.addmm.default", validator=_check_mm)
def addmm(ctx, op):
    x, mat2 = _mm_operands(op)
    weight = matmul_weight(ctx, mat2)
    bias = _bias_vector(ctx, op.inputs[0], int(weight.shape[0]))
    return _emit_linear(ctx, x, _scaled(weight, _scalar(op, "alpha")), _scaled(bias, _scalar(op, "beta")))


@aten_converter("aten.mm.default", "aten.matmul.default", validator=_check_mm)
def mm(ctx, op):
    x, mat2 = _mm_operands(op)
    return _emit_linear(ctx, x, matmul_weight(ctx, mat2), None)


# ---------------------------------------------------------------------------- pnnx → ncnn
def _check_linear_input(op, ctx):
    shape = ncnn_shape(op.inputs[0])
    if shape is None or not shape:
        return f"unsupported: nn.Linear input {op.inputs[0].name} of shape {op.inputs[0].shape}"
    if len(shape) > 4:
        return f"unsupported: nn.Linear input of rank {len(shape)} without the batch axis"
    if len(shape) > 2 and sum(not isinstance(d, int) for d in shape[:-1]) > 1:
        return f"unsupported: nn.Linear input {shape} with more than one symbolic leading dim"
    return None


def gemm_layer(ctx, x, weight, bias, rows):
    """An ncnn ``Gemm`` computing ``x @ weight.T (+ bias)`` for a 2-D blob ``x`` of ``rows`` rows
    (symbolic: left to the runtime), with the constant ``(out, in)`` ``weight`` and ``(out,)``
    ``bias`` (arrays or Attributes; ``bias`` may be None)."""
    out_f, in_f = (int(s) for s in weight.shape)
    weights = {"B_data": weight} if bias is None else {"B_data": weight, "C_data": bias}
    return ctx.layer("Gemm", [x], weights=weights, transA=0, transB=1, constantA=0, constantB=1, constantC=1,
                     constantM=rows if isinstance(rows, int) else 0, constantN=out_f, constantK=in_f,
                     constant_broadcast_type_C=-1 if bias is None else 4)


def _gemm(ctx, x, op, rows):
    return gemm_layer(ctx, x, op.attrs["weight"], op.attrs["bias"] if op.params.get("bias") else None, rows)


@ncnn_rule("nn.Linear", validator=_check_linear_input)
def linear_layer(ctx, op):
    p = op.params
    x = op.inputs[0]
    shape = ncnn_shape(x)
    out_f, in_f = int(p["out_features"]), int(p["in_features"])
    if len(shape) == 1:
        weights = {"weight_data": op.attrs["weight"]}
        if p.get("bias"):
            weights["bias_data"] = op.attrs["bias"]
        return ctx.layer("InnerProduct", [x], weights=weights, num_output=out_f, bias_term=int(bool(p.get("bias"))),
                         weight_data_size=out_f * in_f)
    if len(shape) == 2:
        return _gemm(ctx, x, op, shape[0])
    lead = shape[:-1]
    rows = math.prod(lead) if all(isinstance(d, int) for d in lead) else -1
    batch = list(x.shape[:1]) if is_batched(x) else []
    base = ctx.name
    flat = _reshape(ctx, x, f"{base}_ncnnreshape0", [rows, in_f], batch + [rows, in_f], is_batched(x))
    y = _gemm(ctx, flat, op, rows)
    y.shape, y.meta["batch"] = batch + [rows, out_f], is_batched(x)
    return _reshape(ctx, y, f"{base}_ncnnreshape1", [d if isinstance(d, int) else -1 for d in lead] + [out_f],
                    None, is_batched(x))


def _reshape(ctx, x, name, dims, torch_shape, batched):
    """An ncnn Reshape to ``dims`` (outermost first, without the batch axis)."""
    keys = {2: ("w", "h"), 3: ("w", "h", "c"), 4: ("w", "h", "d", "c")}[len(dims)]
    out = ctx.layer("Reshape", [x], name=name, **dict(zip(keys, reversed(dims))))
    if torch_shape is not None:
        out.shape = list(torch_shape)
    out.meta["batch"] = batched
    return out
