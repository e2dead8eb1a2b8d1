"""Layer, group, instance and RMS normalisation (batch norm lives in :mod:`.norm`).

ATen → pnnx (pnnx's spellings; weights must be constants):

* ``aten.layer_norm.default``, ``aten.native_layer_norm.default`` (multi-output: only the
  normalised tensor may be used) → ``nn.LayerNorm`` (``normalized_shape, eps,
  elementwise_affine``; attrs ``weight``, ``bias`` — zeros when the module has ``bias=False``);
* ``aten.group_norm.default``, ``aten.native_group_norm.default`` → ``nn.GroupNorm``
  (``num_groups, num_channels, eps, affine``);
* ``aten.instance_norm.default`` → ``nn.InstanceNorm1d/2d/3d`` (``num_features, eps, affine``)
  with input statistics, or the BatchNorm of :mod:`.norm` when it uses running statistics;
  core ATen's ``aten._native_batch_norm_legit.no_stats`` (batch statistics, what
  ``instance_norm`` decomposes to after viewing the input as ``(1, N*C, ...)``) is an instance
  norm when the batch is a static 1;
* ``aten.rms_norm.default`` → ``nn.RMSNorm`` (``normalized_shape, eps, elementwise_affine``;
  ``eps=None`` is float32's machine epsilon, as in PyTorch). Core ATen's decomposition is put
  back together by the ``recompose_norms`` pass.

pnnx → ncnn: ``LayerNorm`` / ``RMSNorm`` normalise over ncnn's innermost ``w``, ``w*h`` or
``w*h*d`` (a normalised shape covering the whole batch-less tensor of rank ≥ 2 is flattened to
1-D around the layer); ``GroupNorm`` over ncnn's outermost axis (the channels);
``InstanceNorm`` for 3-D/4-D blobs, ``GroupNorm`` with one group per channel for 2-D blobs
(``InstanceNorm1d``).
"""
from __future__ import annotations

import logging
import math

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import is_batched, ncnn_axis, ncnn_shape
from ._weights import derived
from .shape import intermediate, reshape_to

log = logging.getLogger(__name__)

#: float32 machine epsilon: ``rms_norm``'s eps when none is given
FLOAT32_EPS = float(np.finfo(np.float32).eps)

INSTANCE_NORMS = {3: "nn.InstanceNorm1d", 4: "nn.InstanceNorm2d", 5: "nn.InstanceNorm3d"}
BATCH_NORMS = {2: "nn.BatchNorm1d", 3: "nn.BatchNorm1d", 4: "nn.BatchNorm2d", 5: "nn.BatchNorm3d"}


# ---------------------------------------------------------------------------- helpers
def _const_vector(ctx, op, key: str, size: int, *, required: bool = False):
    """The constant ``(size,)`` attribute behind argument ``key`` (None when absent)."""
    opd = op.named_input(key)
    if opd is None:
        if required:
            ctx.unsupported(f"{op.type} without {key}")
        return None
    attr = ctx.attribute(opd)
    if attr is None:
        ctx.unsupported(f"{key} {opd.name} is computed in the graph, not a constant")
    if math.prod(attr.shape) != size:
        ctx.unsupported(f"{key} {opd.name} has shape {list(attr.shape)}, expected {size} values")
    if len(attr.shape) == 1:
        return attr
    return derived(lambda: np.asarray(attr.data, np.float32).reshape(-1), (size,), attr.dtype)


def _filled(size: int, value: float):
    return derived(lambda: np.full(size, value, np.float32), (size,))


def _affine_attrs(ctx, op, size: int, weight_key: str = "weight", bias_key: str | None = "bias"):
    """``(affine, attrs)``: weight and (for norms with a shift) bias, the missing one filled."""
    w = _const_vector(ctx, op, weight_key, size)
    b = _const_vector(ctx, op, bias_key, size) if bias_key else None
    if w is None and b is None:
        return False, {}
    attrs = {"weight": w if w is not None else _filled(size, 1.0)}
    if bias_key:
        attrs["bias"] = b if b is not None else _filled(size, 0.0)
    return True, attrs


def _only_first_output(op, out):
    return [out] + [None] * (len(op.outputs) - 1)


def _eps(ctx, op, default: float) -> float:
    eps = op.params.get("eps")
    if eps is None:
        return default
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        ctx.unsupported(f"eps={eps!r} is not a number")
    return float(eps)


def _normalized_shape(ctx, op) -> list[int]:
    shape = op.params.get("normalized_shape")
    if not isinstance(shape, (list, tuple)) or not all(isinstance(s, int) for s in shape):
        ctx.unsupported(f"normalized_shape={shape!r} is not a list of constant ints")
    x = op.inputs[0]
    if x.shape is None or list(x.shape[len(x.shape) - len(shape):]) != list(shape):
        ctx.unsupported(f"normalized_shape {list(shape)} does not match the input shape {x.shape}")
    return list(shape)


# ---------------------------------------------------------------------------- ATen → pnnx
@aten_converter("aten.layer_norm.default", "aten.native_layer_norm.default")
def layer_norm(ctx, op):
    shape = _normalized_shape(ctx, op)
    affine, attrs = _affine_attrs(ctx, op, math.prod(shape))
    out = ctx.emit("nn.LayerNorm", [op.inputs[0]], attrs=attrs,
                   params={"normalized_shape": shape, "eps": _eps(ctx, op, 1e-5), "elementwise_affine": affine})
    return _only_first_output(op, out)


@aten_converter("aten.rms_norm.default")
def rms_norm(ctx, op):
    shape = _normalized_shape(ctx, op)
    affine, attrs = _affine_attrs(ctx, op, math.prod(shape), bias_key=None)
    return ctx.emit("nn.RMSNorm", [op.inputs[0]], attrs=attrs,
                    params={"normalized_shape": shape, "eps": _eps(ctx, op, FLOAT32_EPS),
                            "elementwise_affine": affine})


def _emit_group_norm(ctx, op, groups, channels: int):
    if not isinstance(groups, int) or groups < 1 or channels % groups:
        ctx.unsupported(f"{groups!r} groups for {channels} channels")
    affine, attrs = _affine_attrs(ctx, op, channels)
    out = ctx.emit("nn.GroupNorm", [op.inputs[0]], attrs=attrs,
                   params={"num_groups": groups, "num_channels": channels, "eps": _eps(ctx, op, 1e-5),
                           "affine": affine})
    return _only_first_output(op, out)


def _channels(ctx, op) -> int:
    x = op.inputs[0]
    if x.shape is None or len(x.shape) < 2 or not isinstance(x.shape[1], int):
        ctx.unsupported(f"{op.type} of an input of shape {x.shape} (needs a static channel dim)")
    return int(x.shape[1])


@aten_converter("aten.group_norm.default")
def group_norm(ctx, op):
    return _emit_group_norm(ctx, op, op.params.get("num_groups"), _channels(ctx, op))


@aten_converter("aten.native_group_norm.default")
def native_group_norm(ctx, op):
    return _emit_group_norm(ctx, op, op.params.get("group"), _channels(ctx, op))


def _emit_instance_norm(ctx, op):
    x = op.inputs[0]
    channels = _channels(ctx, op)
    if len(x.shape) not in INSTANCE_NORMS:
        ctx.unsupported(f"instance norm of a rank-{len(x.shape)} input")
    affine, attrs = _affine_attrs(ctx, op, channels)
    out = ctx.emit(INSTANCE_NORMS[len(x.shape)], [x], attrs=attrs,
                   params={"num_features": channels, "eps": _eps(ctx, op, 1e-5), "affine": affine,
                           "track_running_stats": False})
    return _only_first_output(op, out)


@aten_converter("aten.instance_norm.default")
def instance_norm(ctx, op):
    if op.params.get("use_input_stats", True):
        return _emit_instance_norm(ctx, op)
    # running statistics: an inference batch norm
    x = op.inputs[0]
    channels = _channels(ctx, op)
    stats = {k: _const_vector(ctx, op, k, channels, required=True) for k in ("running_mean", "running_var")}
    affine, attrs = _affine_attrs(ctx, op, channels)
    return ctx.emit(BATCH_NORMS[len(x.shape)], [x], attrs={**stats, **attrs},
                    params={"num_features": channels, "eps": _eps(ctx, op, 1e-5), "momentum": 0.1,
                            "affine": affine})


@aten_converter("aten._native_batch_norm_legit.no_stats")
def batch_statistics_norm(ctx, op):
    x = op.inputs[0]
    if x.shape is None or not x.shape or x.shape[0] != 1:
        ctx.unsupported("batch norm with batch statistics over a batch that is not a static 1 "
                        "(export the model after model.eval())")
    return _emit_instance_norm(ctx, op)


# ---------------------------------------------------------------------------- pnnx → ncnn
def _around_flat(ctx, x, layer_fn):
    """``layer_fn`` applied to ``x`` flattened to 1-D, reshaped back to ``x``'s ncnn shape."""
    shape = ncnn_shape(x)
    n = math.prod(shape)
    flat = reshape_to(ctx, x, [n])
    return reshape_to(ctx, intermediate(layer_fn(flat), [n]), shape, final=True)


def _inner_norm(ctx, op, layer_type: str, weights: dict):
    """A LayerNorm/RMSNorm over the last ``len(normalized_shape)`` dims."""
    x = op.inputs[0]
    shape = ncnn_shape(x)
    k = len(op.params["normalized_shape"])
    size = math.prod(op.params["normalized_shape"])
    if shape is None or k > len(shape) or not all(isinstance(d, int) for d in shape[len(shape) - k:]):
        ctx.unsupported(f"{op.type} over {k} dims of {x.name} {x.shape} (the normalised dims must be static and "
                        "not include the batch axis)")
    if len(shape) > 4:
        ctx.unsupported(f"{op.type} of a {len(shape)}-D tensor without the batch axis")
    params = {"affine_size": size, "eps": float(op.params["eps"]),
              "affine": int(bool(op.params.get("elementwise_affine")))}

    def layer(inp):
        return ctx.layer(layer_type, [inp], weights=weights, **params)

    if 1 < k == len(shape) and all(isinstance(d, int) for d in shape):
        return _around_flat(ctx, x, layer)
    if k > 1 and len(shape) == 2:
        ctx.unsupported(f"{op.type} over both dims of a dynamic 2-D tensor")
    return layer(x)


@ncnn_rule("nn.LayerNorm")
def layer_norm_layer(ctx, op):
    weights = {"gamma_data": op.attrs["weight"], "beta_data": op.attrs["bias"]} if op.params.get(
        "elementwise_affine") else {}
    return _inner_norm(ctx, op, "LayerNorm", weights)


@ncnn_rule("nn.RMSNorm")
def rms_norm_layer(ctx, op):
    weights = {"gamma_data": op.attrs["weight"]} if op.params.get("elementwise_affine") else {}
    return _inner_norm(ctx, op, "RMSNorm", weights)


def _check_channels_outermost(op, ctx):
    x = op.inputs[0]
    if not is_batched(x) or ncnn_axis(x, 1) != 0:
        return f"unsupported: {op.type} needs (N, C, ...) with N the batch axis; got {x.name} {x.shape}"
    if len(ncnn_shape(x)) > 4:
        return f"unsupported: {op.type} of a {len(ncnn_shape(x))}-D tensor without the batch axis"
    return None


def _affine_weights(op) -> dict:
    return {"gamma_data": op.attrs["weight"], "beta_data": op.attrs["bias"]} if op.params.get("affine") else {}


@ncnn_rule("nn.GroupNorm", validator=_check_channels_outermost)
def group_norm_layer(ctx, op):
    return ctx.layer("GroupNorm", [op.inputs[0]], weights=_affine_weights(op), group=int(op.params["num_groups"]),
                     channels=int(op.params["num_channels"]), eps=float(op.params["eps"]),
                     affine=int(bool(op.params.get("affine"))))


@ncnn_rule(*INSTANCE_NORMS.values(), validator=_check_channels_outermost)
def instance_norm_layer(ctx, op):
    x = op.inputs[0]
    c = int(op.params["num_features"])
    common = {"weights": _affine_weights(op), "eps": float(op.params["eps"]), "affine": int(bool(op.params.get("affine")))}
    if len(ncnn_shape(x)) == 2:  # (C, L): one group per channel is the same normalisation
        return ctx.layer("GroupNorm", [x], group=c, channels=c, **common)
    return ctx.layer("InstanceNorm", [x], channels=c, **common)
