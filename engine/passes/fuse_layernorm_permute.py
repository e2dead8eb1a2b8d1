"""Run ConvNeXt-style channels-last MLPs channels-first (pnnx level, after ``fuse_linear_reshape``).

ConvNeXt blocks go NCHW → ``permute(0, 2, 3, 1)`` → LayerNorm(C) → Linear → GELU → Linear
[→ ``* gamma``] → ``permute(0, 3, 1, 2)``. Op by op, ncnn runs each Linear on an (H, W, C) blob as
Reshape → Gemm → Reshape, and every Reshape between ncnn's packed 2-D and 3-D layouts copies the
tensor (~2 ms for a 56×56×384 one). Measured (one thread, CPU time): a ConvNeXt-T stage-1 block
9.6 ms op by op → 7.5 ms channels-first (16 → 10 layers); ConvNeXt-T 112 → 100 ms. (pnnx's own
output takes ~990 ms: its Reshapes after each Gemm carry a two-input shape expression
``6="0w,1h,1c"``, which ncnn evaluates ~100× slower than a static Reshape under the packed
layout — 259 ms against 2.5 ms for one 3136×384 blob; made static, pnnx's model runs in 124 ms.)
This pass rewrites::

    permute(0,2,3,1) → LN → [Linear | elementwise]… → permute(0,3,1,2)
      ⇒  permute(0,2,3,1) → LN → permute(0,3,1,2) → [1×1 Conv2d | elementwise]…

(no LayerNorm: the first permute goes too). A Linear becomes an ``nn.Conv2d`` with kernel 1;
elementwise activations and one-tensor ``pnnx.Expression`` s just change layout; a
``mul(@0, gamma)`` by a constant per-channel vector right after a Linear — inside the permutes
(timm) or right after the closing permute (torchvision's ``layer_scale``, shaped ``(C, 1, 1)``) —
is folded into that 1×1 convolution's weights and bias. The region must be a single-consumer
chain; the LayerNorm must normalise the last dim only.
"""
from __future__ import annotations

import logging

import numpy as np

from ..converters._weights import derived, derived_rows, product_f32
from ..ir import Attribute, Graph, Operand, Operator
from .manager import graph_pass

log = logging.getLogger(__name__)

TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]
RELAID = "aten_layout"  #: operand annotation: the ATen value it holds, permuted by ``dims``
PERMUTES = ("Tensor.permute", "torch.permute")
#: single-input ops that compute element by element (layout-free)
ELEMENTWISE = ("F.relu", "F.relu6", "F.gelu", "F.silu", "F.sigmoid", "F.tanh", "F.hardswish", "F.hardsigmoid",
               "F.mish", "F.elu", "F.selu", "F.celu", "F.leaky_relu", "F.hardtanh", "F.softplus", "F.logsigmoid")


def _permute_of(op: Operator | None, dims: list[int]) -> bool:
    if op is None or op.type not in PERMUTES or len(op.inputs) != 1:
        return False
    shape = op.inputs[0].shape
    return shape is not None and len(shape) == 4 and [int(d) % 4 for d in op.params.get("dims", [])] == dims


def _sole_user(opd: Operand) -> Operator | None:
    return opd.consumers[0] if len(opd.consumers) == 1 else None


def _const_attr(opd: Operand) -> Attribute | None:
    p = opd.producer
    return p.attrs.get("data") if p is not None and p.type == "pnnx.Attribute" else None


def _channel_vector(opd: Operand, channels: int, layout: str) -> Attribute | None:
    """A constant of shape ``(C,)``/``(1, 1, 1, C)`` (NHWC) or ``(C, 1, 1)``/``(1, C, 1, 1)`` (NCHW)."""
    a = _const_attr(opd)
    if a is None or int(np.prod(a.shape)) != channels:
        return None
    shape = [int(s) for s in a.shape]
    ok = shape[-1:] == [channels] and all(s == 1 for s in shape[:-1]) if layout == "nhwc" else \
        shape[-3:] == [channels, 1, 1] and all(s == 1 for s in shape[:-3])
    return a if ok else None


def _scale_by(op: Operator, layout: str, channels: int) -> Attribute | None:
    """``gamma`` when ``op`` is ``mul(@0, gamma)`` / ``mul(gamma, @0)`` of a per-channel constant."""
    if op.type != "pnnx.Expression" or len(op.inputs) != 2:
        return None
    expr = str(op.params.get("expr", "")).replace(" ", "")
    if expr not in ("mul(@0,@1)", "mul(@1,@0)"):
        return None
    for opd in op.inputs:
        g = _channel_vector(opd, channels, layout)
        if g is not None:
            return g
    return None


def _one_tensor_expression(op: Operator) -> bool:
    return op.type == "pnnx.Expression" and len(op.inputs) == 1


def _collect(first: Operand) -> tuple[list[Operator], Operator] | None:
    """The chain after the NHWC permute up to the closing permute, or None."""
    chain, cur = [], first
    while True:
        op = _sole_user(cur)
        if op is None or len(op.outputs) != 1 or op.inputs[0] is not cur:
            return None
        if _permute_of(op, TO_NCHW):
            return chain, op
        if op.type == "nn.LayerNorm":
            if chain or len(op.params.get("normalized_shape", [])) != 1:
                return None
        elif op.type == "pnnx.Expression" and len(op.inputs) == 2:
            after_linear = chain and chain[-1].type == "nn.Linear"
            if not after_linear or _scale_by(op, "nhwc", int(chain[-1].params["out_features"])) is None:
                return None
        elif op.type not in ("nn.Linear",) + ELEMENTWISE and not _one_tensor_expression(op):
            return None
        chain.append(op)
        cur = op.outputs[0]


def _to_conv(op: Operator) -> None:
    """``nn.Linear`` → ``nn.Conv2d`` with a 1×1 kernel (same weights, viewed (out, in, 1, 1))."""
    p = op.params
    w = op.attrs["weight"]
    out_f, in_f = int(p["out_features"]), int(p["in_features"])
    op.type = "nn.Conv2d"
    op.params = {"in_channels": in_f, "out_channels": out_f, "kernel_size": [1, 1], "stride": [1, 1],
                 "padding": [0, 0], "dilation": [1, 1], "groups": 1, "bias": bool(p.get("bias")),
                 "padding_mode": "zeros"}
    op.attrs["weight"] = derived(lambda: np.asarray(w.data).reshape(out_f, in_f, 1, 1), (out_f, in_f, 1, 1), w.dtype)


def _fold_scale(graph: Graph, conv: Operator, scale_op: Operator, gamma: Attribute) -> None:
    """Fold ``conv(x) * gamma`` (per output channel) into the 1×1 convolution."""
    n = int(conv.params["out_channels"])
    w, b = conv.attrs["weight"], conv.attrs.get("bias")
    g = lambda: np.asarray(gamma.data).reshape(-1)  # noqa: E731
    conv.attrs["weight"] = derived_rows(lambda rows: product_f32(w.data[rows], g()[rows].reshape(-1, 1, 1, 1)), w.shape)
    conv.attrs["bias"] = derived(lambda: product_f32(np.zeros(n, np.float32) if b is None else b.data, g()), (n,))
    conv.params["bias"] = True
    conv.provenance = conv.provenance.union(scale_op.provenance)
    graph.replace_all_uses(scale_op.outputs[0], conv.outputs[0])
    graph.remove_op(scale_op)


def _nchw(shape: list) -> list:
    return [shape[0], shape[3], shape[1], shape[2]]


def _relaid(opd: Operand, value: str) -> None:
    """Record that ``opd`` holds channels-last ``value`` channels-first (what Verify compares
    it with: see engine.verify.mapping)."""
    opd.meta[RELAID] = {"value": value, "dims": TO_NCHW}


def _rewrite(graph: Graph, to_nhwc: Operator, chain: list[Operator], closing: Operator) -> None:
    body = chain[1:] if chain[0].type == "nn.LayerNorm" else chain
    graph.replace_all_uses(closing.outputs[0], body[-1].outputs[0])
    graph.remove_op(closing)
    if body is chain:  # no LayerNorm: both permutes go
        graph.set_input(body[0], 0, to_nhwc.inputs[0])
        graph.remove_op(to_nhwc)
    else:  # the closing permute moves up to right after the LayerNorm
        ln_out = chain[0].outputs[0]
        back = graph.new_operand(graph.unique_operand_name(f"{ln_out.name}_nchw"), dtype=ln_out.dtype,
                                 shape=_nchw(list(ln_out.shape)))
        _relaid(back, ln_out.name)
        graph.add_op(closing.type, graph.unique_op_name(closing.name), [ln_out], [back], params={"dims": TO_NCHW},
                     provenance=closing.provenance, before=body[0])
        graph.set_input(body[0], 0, back)
    conv = None
    for op in body:
        if op.type == "pnnx.Expression" and len(op.inputs) == 2:
            value = op.outputs[0].name
            _fold_scale(graph, conv, op, _scale_by(op, "nhwc", int(conv.params["out_channels"])))
            _relaid(conv.outputs[0], value)
            continue
        op.outputs[0].shape = _nchw(list(op.outputs[0].shape))
        _relaid(op.outputs[0], op.outputs[0].name)
        if op.type == "nn.Linear":
            _to_conv(op)
            conv = op
    # torchvision's layer scale, (C, 1, 1), right after the closing permute
    if conv is not None and _last_alive(body, graph) is conv:
        user = _sole_user(conv.outputs[0])
        gamma = _scale_by(user, "nchw", int(conv.params["out_channels"])) if user is not None else None
        if gamma is not None:
            _fold_scale(graph, conv, user, gamma)
            conv.outputs[0].meta.pop(RELAID, None)  # now the (channels-first) scaled value itself


def _last_alive(body: list[Operator], graph: Graph) -> Operator | None:
    """The last op of ``body`` still in the graph (scales folded away are gone)."""
    for op in reversed(body):
        if op in graph.ops:
            return op
    return None


@graph_pass("fuse_layernorm_permute", "run channels-last LayerNorm + Linear MLPs (ConvNeXt) channels-first "
            "with 1x1 convolutions; fold layer scales")
def run(graph: Graph, cx) -> None:
    for op in list(graph.ops):
        if not _permute_of(op, TO_NHWC) or op not in graph.ops:
            continue
        found = _collect(op.outputs[0])
        if found is None:
            continue
        chain, closing = found
        if not any(o.type == "nn.Linear" for o in chain):
            continue  # LayerNorm2d alone: nothing to gain
        _rewrite(graph, op, chain, closing)
        log.debug("channels-first MLP after %s", op.name)
