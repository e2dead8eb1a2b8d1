"""Batch normalization at inference (running statistics), 1d / 2d / 3d.

ATen → pnnx: ``aten.batch_norm.default``, ``aten.native_batch_norm.default``,
``aten._native_batch_norm_legit.default`` (with ``training=False``) and
``aten._native_batch_norm_legit_no_training.default`` (multi-output: only output 0, the
normalized tensor, may be used) → ``nn.BatchNorm1d`` (rank 2 or 3 input), ``nn.BatchNorm2d``
(rank 4), ``nn.BatchNorm3d`` (rank 5) with params ``num_features, eps, momentum, affine`` and
attrs ``running_mean, running_var`` (+ ``weight, bias`` when affine). Training-mode batch norm
(batch statistics) and statistics computed in the graph are refused.

The ``fuse_conv_batchnorm`` / ``fuse_linear_batchnorm`` passes fold a BatchNorm into the
preceding convolution / linear layer; what remains becomes ncnn ``BatchNorm`` (``slope_data,
mean_data, var_data, bias_data``; ``eps`` kept as a param, as pnnx does), or, when its channels
are not ncnn's outermost axis (a BatchNorm1d over ``(tokens, features)``), ``x * scale + shift``
with per-channel constants (two ``BinaryOp``).

:func:`batchnorm_affine` gives the per-channel ``(scale, shift)`` of a pnnx BatchNorm in float64,
for the folding passes.
"""
from __future__ import annotations

import logging

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_axis, set_batch_dim
from ..ncnn.enums import BinaryOpType
from ._broadcast import memorydata_params
from ._weights import as_f64, derived

log = logging.getLogger(__name__)

BATCHNORM_TYPES = ("nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d")
_BY_RANK = {2: "nn.BatchNorm1d", 3: "nn.BatchNorm1d", 4: "nn.BatchNorm2d", 5: "nn.BatchNorm3d"}


def _lower_batch_norm(ctx, op):
    x = op.inputs[0]
    if op.params.get("training"):
        ctx.unsupported("batch_norm in training mode (batch statistics); export the model after model.eval()")
    if x.shape is None or len(x.shape) not in _BY_RANK:
        ctx.unsupported(f"batch_norm of a rank-{None if x.shape is None else len(x.shape)} input")
    stats = {}
    for key in ("running_mean", "running_var", "weight", "bias"):
        opd = op.named_input(key)
        if opd is None:
            if key.startswith("running"):
                ctx.unsupported(f"batch_norm without {key} (batch statistics)")
            continue
        attr = ctx.attribute(opd)
        if attr is None:
            ctx.unsupported(f"batch_norm {key} {opd.name} is computed in the graph, not a constant")
        stats[key] = attr
    channels = int(stats["running_mean"].shape[0])
    affine = "weight" in stats or "bias" in stats
    if affine and "weight" not in stats:
        stats["weight"] = derived(lambda: np.ones(channels, np.float32), (channels,))
    if affine and "bias" not in stats:
        stats["bias"] = derived(lambda: np.zeros(channels, np.float32), (channels,))
    params = {"num_features": channels, "eps": float(op.params["eps"]),
              "momentum": float(op.params.get("momentum") or 0.1), "affine": affine}
    out = ctx.emit(_BY_RANK[len(x.shape)], [x], params=params, attrs=stats)
    return [out] + [None] * (len(op.outputs) - 1)


@aten_converter("aten.batch_norm.default", "aten.native_batch_norm.default", "aten._native_batch_norm_legit.default",
                "aten._native_batch_norm_legit_no_training.default")
def batch_norm(ctx, op):
    return _lower_batch_norm(ctx, op)


def batchnorm_affine(op) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, shift)`` (float64, per channel) such that ``bn(x) = x * scale + shift``."""
    n = int(op.params["num_features"])
    mean = as_f64(op.attrs["running_mean"], n, 0.0)
    var = as_f64(op.attrs["running_var"], n, 1.0)
    gamma = as_f64(op.attrs.get("weight"), n, 1.0)
    beta = as_f64(op.attrs.get("bias"), n, 0.0)
    scale = gamma / np.sqrt(var + float(op.params["eps"]))
    return scale, beta - mean * scale


def _affine_batchnorm(ctx, op):
    """A BatchNorm whose channels are not ncnn's outermost axis (timm LeViT's BatchNorm1d over
    ``(tokens, features)``): ``x * scale + shift`` with per-channel constants broadcast along dim
    1 (BinaryOps, broadcast as PyTorch does)."""
    from ._broadcast import Value, align_operands, result_value

    x = op.inputs[0]
    n = int(op.params["num_features"])
    scale, shift = batchnorm_affine(op)
    shape = [n] + [1] * (len(x.shape) - 2)
    out = Value.of(x)
    for name, vec, kind in (("scale", scale, BinaryOpType.MUL), ("shift", shift, BinaryOpType.ADD)):
        data = np.ascontiguousarray(vec.astype(np.float32).reshape(shape))
        const = ctx.layer("MemoryData", [], weights={"data": data}, name=f"{ctx.name}_{name}", shape=shape,
                          dtype="f32", **memorydata_params(shape))
        set_batch_dim(const, None)
        aligned = align_operands(ctx, out, Value.of(const), f"batch norm of {x.name}")
        y = ctx.layer("BinaryOp", list(aligned[:2]), op_type=kind)
        out = result_value(y, aligned.shape, aligned.batch_dim, x.dtype)
    return out.operand


@ncnn_rule(*BATCHNORM_TYPES)
def batchnorm_layer(ctx, op):
    if ncnn_axis(op.inputs[0], 1) != 0:
        return _affine_batchnorm(ctx, op)
    n = int(op.params["num_features"])
    ones = derived(lambda: np.ones(n, np.float32), (n,))
    zeros = derived(lambda: np.zeros(n, np.float32), (n,))
    weights = {"slope_data": op.attrs.get("weight", ones), "mean_data": op.attrs["running_mean"],
               "var_data": op.attrs["running_var"], "bias_data": op.attrs.get("bias", zeros)}
    return ctx.layer("BatchNorm", [op.inputs[0]], weights=weights, channels=n, eps=float(op.params["eps"]))
