"""PyTorch source of the pnnx ``nn.*`` operators (see :mod:`.pnnx_py_ops`): a submodule built
with the operator's params and its weights loaded from the ``.pnnx.bin`` (buffers as buffers;
LayerNorm/RMSNorm weights in ``normalized_shape``); recurrent layers with their state tuples; and
the fused multi-head attention written as the functional code it stands for.
"""
from __future__ import annotations

from ..ir import Operand, Operator
from .pnnx_py_ops import OpContext, OpSource, Weight, emitter, family
from .py_source import call, literal

#: module types whose ``bias`` exists unless disabled; a missing ``@bias`` means none
_BIASED_MODULES = ("nn.Linear", "nn.LayerNorm", "nn.GroupNorm", "nn.Conv1d", "nn.Conv2d", "nn.Conv3d",
                   "nn.ConvTranspose1d", "nn.ConvTranspose2d", "nn.ConvTranspose3d")
#: module attributes that are buffers, not parameters
_BUFFERS = ("running_mean", "running_var")


@family("nn.")
def _module(cx: OpContext) -> OpSource:
    op = cx.op
    src = OpSource(init=[f"self.{cx.attr} = {call(op.type, [], cx.params())}"])
    src.weights += _module_weights(cx)
    no_bias = "weight" in op.attrs and "bias" not in op.attrs and op.params.get("bias") is not False
    if op.type in _BIASED_MODULES and no_bias:
        src.init.append(f"self.{cx.attr}.bias = None")
    src.forward.append(cx.assign(call(f"self.{cx.attr}", [cx.var(i) for i in op.inputs])))
    return src


def _module_weights(cx: OpContext) -> list[Weight]:
    op = cx.op
    owner, normalized = f"self.{cx.attr}", _NORMALIZED_SHAPE.get(op.type)
    return [Weight(owner, key, f"{op.name}.{key}", a, "buffer" if key in _BUFFERS else "parameter",
                   shape=tuple(normalized(op, key, a.shape) if normalized else a.shape))
            for key, a in sorted(op.attrs.items())]


def _normalized(op: Operator, key: str, shape):
    """LayerNorm/RMSNorm affine weights have the module's ``normalized_shape`` (the converter may
    keep them flat)."""
    ns = op.params.get("normalized_shape")
    if key in ("weight", "bias") and isinstance(ns, (list, tuple)) and all(isinstance(d, int) for d in ns):
        return list(ns)
    return shape


_NORMALIZED_SHAPE = {"nn.LayerNorm": _normalized, "nn.RMSNorm": _normalized}


# ---------------------------------------------------------------------------- recurrent modules
@emitter("nn.LSTM", "nn.GRU", "nn.RNN")
def _rnn(cx: OpContext) -> OpSource:
    src = _module(cx)
    op = cx.op
    ins = [cx.var(i) for i in op.inputs]
    outs = [cx.var(o) for o in op.outputs] + ["_"] * (3 - len(op.outputs))
    if op.type == "nn.LSTM":
        state = f", ({ins[1]}, {ins[2]})" if len(ins) >= 3 else ""
        target = f"{outs[0]}, ({outs[1]}, {outs[2]})" if len(op.outputs) == 3 else f"{outs[0]}, _"
    else:
        state = f", {ins[1]}" if len(ins) >= 2 else ""
        target = f"{outs[0]}, {outs[1]}"
    src.forward = [f"{target} = self.{cx.attr}({ins[0]}{state})"]
    return src


@emitter("nn.LSTMCell")
def _lstm_cell(cx: OpContext) -> OpSource:
    src = _module(cx)
    ins = [cx.var(i) for i in cx.op.inputs]
    state = f", ({ins[1]}, {ins[2]})" if len(ins) >= 3 else ""
    src.forward = [cx.assign(f"self.{cx.attr}({ins[0]}{state})")]
    return src


# ---------------------------------------------------------------------------- fused attention
@emitter("nn.MultiheadAttention")
def _attention(cx: OpContext) -> OpSource:
    """The fused attention as the functional code it stands for: q/k/v projections of the
    tokens, ``num_heads`` heads, ``scaled_dot_product_attention`` and the output projection
    (the inputs hold the tokens × features, with size-1 dims around them)."""
    op = cx.op
    p = op.params
    heads, embed = int(p["num_heads"]), int(p["embed_dim"])
    q, k, v = (cx.var(op.named_input(n) or op.inputs[i]) for i, n in enumerate(("query", "key", "value")))
    mask = op.named_input("attn_mask")
    own = f"self.{cx.attr}"
    src = OpSource(init=[f"{own} = nn.Module()"])
    src.weights = [Weight(own, key, f"{op.name}.{key}", a) for key, a in sorted(op.attrs.items())]
    w = lambda n: f"{own}.{n}_weight" + (f", {own}.{n}_bias" if f"{n}_bias" in op.attrs else "")  # noqa: E731
    out = cx.var(op.outputs[0])
    tq, tk, tv = (cx.temp(f"{out}_{n}") for n in "qkv")
    head = embed // heads
    src.forward += [
        f"{tq} = F.linear({q}.reshape(-1, {p['qdim']}), {w('q')}).reshape(-1, {heads}, {head}).transpose(0, 1)",
        f"{tk} = F.linear({k}.reshape(-1, {p['kdim']}), {w('k')}).reshape(-1, {heads}, {head}).transpose(0, 1)",
        f"{tv} = F.linear({v}.reshape(-1, {p['vdim']}), {w('v')}).reshape(-1, {heads}, {head}).transpose(0, 1)",
        f"{out} = F.scaled_dot_product_attention({tq}, {tk}, {tv}"
        + (f", attn_mask={_heads_mask(cx, mask)}" if mask is not None else "")
        + (f", scale={literal(p['scale'])}" if p.get("scale") is not None else "") + ")",
    ]
    dims = cx.symbols.dims(list(op.outputs[0].shape or [-1, p["out_dim"]]))
    shape = ", ".join(dims) if dims is not None else f"-1, {p['out_dim']}"
    src.forward.append(f"{out} = F.linear({out}.transpose(0, 1).reshape(-1, {embed}), {w('out')}).reshape({shape})")
    return src


def _heads_mask(cx: OpContext, mask: Operand) -> str:
    """The mask with its leading dims merged (``(heads or 1, L, S)``), as the heads are dim 0."""
    rank = len(mask.shape or [])
    return f"{cx.var(mask)}.flatten(0, -3)" if rank > 3 else cx.var(mask)
