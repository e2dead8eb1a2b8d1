"""Fuse multi-head attention back into one op (ATen level, after ``recompose_attention``).

``nn.MultiheadAttention`` and hand-written attention reach us as projections, head-splitting
rearrangements, ``scaled_dot_product_attention`` and a head merge before the output projection —
with 5-D views in between (``unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2)``) that ncnn
cannot hold. Around every ``aten.scaled_dot_product_attention.default`` this pass looks for::

    q/k/v = split_heads(linear(rearrange(Xq|Xk|Xv), W, b)[..., off:off+E])     (one packed or three linears)
    y = rearrange(linear(merge_heads(sdpa(q, k, v, mask)), Wo, bo))

and replaces the whole region by one pnnx ``nn.MultiheadAttention`` (lowered to ncnn's
MultiHeadAttention). The rearrangements (view/reshape/unflatten/flatten/transpose/permute/
select/squeeze/unsqueeze/split/chunk/unbind/contiguous/clone/no-op expand) are not matched by
spelling: they are *evaluated* on index arrays, and the region is fused only if ``q[h, l, e]``
reads projection column ``off + h*d + e`` of token ``l``, the output projection reads head ``h``
of token ``l`` at column ``h*d + e``, and the input/output rearrangements keep the token/feature
order (they only add or drop size-1 dims). So batch-first and sequence-first modules, packed
``in_proj`` and separate projections, both dialects, all take the same path.

Params of the fused op: ``embed_dim, qdim, kdim, vdim, num_heads, scale`` (the SDPA's, ``None`` =
``1/sqrt(head_dim)``), ``out_dim``; attrs ``q_weight, k_weight, v_weight`` (``(E, in)``),
``q_bias, k_bias, v_bias``, ``out_weight`` (``(out, E)``), ``out_bias``; inputs ``query, key,
value`` and ``attn_mask`` when there is one (the causal mask becomes a constant).
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ..converters._weights import derived, matmul_weight
from ..converters.attention import causal_mask
from .recompose_attention import add_constant, constant_mask
from ..ir import Attribute, Graph, Operand, Operator
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

SDPA = "aten.scaled_dot_product_attention.default"
_VIEWS = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.unflatten.int",
          "aten.flatten.using_ints", "aten.view_copy.default")
_IDENTITY = ("aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.expand.default")
REARRANGE = _VIEWS + _IDENTITY + (
    "aten.transpose.int", "aten.permute.default", "aten.t.default", "aten.select.int", "aten.squeeze.dim",
    "aten.squeeze.dims", "aten.squeeze.default", "aten.unsqueeze.default", "aten.split.Tensor",
    "aten.split_with_sizes.default", "aten.chunk.default", "aten.unbind.int", "aten.slice.Tensor")
PROJECTIONS = ("aten.linear.default", "aten.addmm.default", "aten.mm.default", "aten.matmul.default")


# ---------------------------------------------------------------------------- index evaluation
#: ``0 .. n-1`` per size ``n``, made once per run of the pass (:func:`_iota`; cleared by :func:`run`)
_IOTA: dict[int, np.ndarray] = {}


def _iota(n: int) -> np.ndarray:
    """``0 .. n-1`` (int32 when that holds it: half the bytes to move), read-only. The index
    evaluation and every comparison against it use the same array while the pass runs: a fresh
    ``arange`` of a few hundred thousand indices per test was a third of the pass on ViT-B/16
    (288 of them, each new memory to fault in)."""
    a = _IOTA.get(n)
    if a is None:
        a = _IOTA[n] = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
        a.flags.writeable = False
    return a


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _apply(op: Operator, x: np.ndarray, broadcast: bool = False) -> list[np.ndarray]:
    """The outputs of rearrangement ``op`` applied to array ``x`` (its first input); with
    ``broadcast`` an ``expand`` may repeat elements."""
    p, t = op.params, op.type
    if t in _VIEWS:
        return [x.reshape(op.outputs[0].shape)]
    if t in _IDENTITY:
        if list(x.shape) != list(op.outputs[0].shape):
            if not broadcast or t != "aten.expand.default":
                raise ValueError("expand that broadcasts")
            return [np.broadcast_to(x, op.outputs[0].shape)]
        return [x]
    if t == "aten.transpose.int":
        return [np.swapaxes(x, p["dim0"], p["dim1"])]
    if t == "aten.t.default":
        return [x.T]
    if t == "aten.permute.default":
        return [np.transpose(x, p["dims"])]
    if t == "aten.select.int":
        return [x[(slice(None),) * (p["dim"] % x.ndim) + (p["index"],)]]  # a view, not a copy
    if t.startswith("aten.squeeze"):
        return [x.reshape(op.outputs[0].shape)]
    if t == "aten.unsqueeze.default":
        return [np.expand_dims(x, p["dim"] % (x.ndim + 1))]
    if t == "aten.slice.Tensor":
        dim = p["dim"] % x.ndim
        start, end, step = p.get("start") or 0, p.get("end"), p.get("step") or 1
        idx = [slice(None)] * x.ndim
        idx[dim] = slice(start, None if end is None or end >= 2**62 else end, step)
        return [x[tuple(idx)]]
    if t in ("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default", "aten.unbind.int"):
        dim = p["dim"] % x.ndim
        sizes = [o.shape[dim] if t != "aten.unbind.int" else 1 for o in op.outputs]
        parts = np.split(x, np.cumsum(sizes)[:-1], axis=dim)
        return [np.squeeze(a, dim) for a in parts] if t == "aten.unbind.int" else parts
    raise ValueError(t)


def _chain_back(opd: Operand, stop) -> tuple[list[tuple[Operator, int]], Operand]:
    """Walk producers of ``opd`` through rearrangements until ``stop(producer)`` or a
    non-rearrangement: ``([(op, output index)...] source first, source operand)``."""
    chain = []
    while True:
        p = opd.producer
        if p is None or p.type not in REARRANGE or stop(p) or not _static(opd.shape):
            return list(reversed(chain)), opd
        chain.append((p, p.outputs.index(opd)))
        opd = p.inputs[0]


def _indices(source: Operand, chain: list[tuple[Operator, int]], broadcast: bool = False) -> np.ndarray | None:
    """Where each element of the chain's end comes from, as flat indices into ``source``."""
    if not _static(source.shape):
        return None
    x = _iota(math.prod(source.shape)).reshape(source.shape)  # only viewed from here on
    try:
        for op, k in chain:
            x = _apply(op, x, broadcast)[k]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return x


def _chain_forward(opd: Operand) -> tuple[list[tuple[Operator, int]], Operand]:
    """Follow single consumers of ``opd`` through rearrangements."""
    chain = []
    while len(opd.consumers) == 1 and opd.consumers[0].type in REARRANGE and len(opd.consumers[0].outputs) == 1:
        op = opd.consumers[0]
        if op.inputs[0] is not opd or not _static(op.outputs[0].shape):
            break
        chain.append((op, 0))
        opd = op.outputs[0]
    return chain, opd


# ---------------------------------------------------------------------------- projections
class _Proj:
    """A projection ``y = x @ W.T + b`` with a constant weight."""

    def __init__(self, op: Operator, x: Operand, weight: Attribute, bias: Attribute | None):
        self.op, self.x, self.weight, self.bias = op, x, weight, bias


def _projection(op: Operator | None, ctx_attr) -> _Proj | None:
    if op is None or op.type not in PROJECTIONS:
        return None
    if op.type == "aten.linear.default":
        w = ctx_attr(op.inputs[op.input_names.index("weight")])
        b = op.inputs[op.input_names.index("bias")] if "bias" in op.input_names else None
        bias = ctx_attr(b) if b is not None else None
        if w is None or len(w.shape) != 2 or (b is not None and bias is None):
            return None
        return _Proj(op, op.inputs[0], w, bias)
    if op.type == "aten.addmm.default":
        if op.params.get("alpha", 1) != 1 or op.params.get("beta", 1) != 1:
            return None
        x, mat2, b = op.inputs[1], op.inputs[2], op.inputs[0]
        bias = ctx_attr(b)
        if bias is None or len(bias.shape) != 1:
            return None
    else:
        x, mat2, bias = op.inputs[0], op.inputs[1], None
    w = matmul_weight(_AttrCtx(ctx_attr), mat2)
    return _Proj(op, x, w, bias) if w is not None else None


class _AttrCtx:
    """The ``ctx.attribute`` interface :func:`matmul_weight` needs."""

    def __init__(self, fn):
        self.attribute = fn


def _attribute(opd: Operand) -> Attribute | None:
    """The constant behind ``opd``: an attribute, or one rearranged (``in_proj_bias.chunk(3)``)."""
    p = opd.producer
    if p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs:
        return p.attrs["data"]
    chain, src = _chain_back(opd, lambda op: False)
    base = src.producer
    if not chain or base is None or base.type != "pnnx.Attribute" or "data" not in base.attrs:
        return None
    data = base.attrs["data"]

    def load():
        x = np.asarray(data.data)
        for op, k in chain:
            x = _apply(op, x)[k]
        return np.ascontiguousarray(x)

    return derived(load, opd.shape, data.dtype) if _static(opd.shape) else None


# ---------------------------------------------------------------------------- the match
class _Region:
    def __init__(self, sdpa: Operator):
        self.sdpa = sdpa
        self.ops: list[Operator] = [sdpa]
        self.inputs: list[Operand] = []
        self.weights: dict[str, Attribute] = {}
        self.params: dict[str, Any] = {}
        self.output: Operand | None = None

    def add(self, ops) -> None:
        for op in ops:
            if op not in self.ops:
                self.ops.append(op)


def _plain_order(idx: np.ndarray | None, numel: int) -> bool:
    """The rearrangement only added/dropped size-1 dims (element order unchanged)."""
    return idx is not None and idx.size == numel and np.array_equal(idx, _iota(numel).reshape(idx.shape))


def _head_input(region: _Region, t: Operand, heads: int, length: int, d: int, name: str) -> bool:
    """Match ``t`` (``(.., heads, length, d)``) back to a projection of a plain input."""
    chain, src = _chain_back(t, lambda p: False)
    proj = _projection(src.producer, _attribute)
    if proj is None or not _static(src.shape) or math.prod(src.shape) % length:
        return False
    width = src.shape[-1]
    if math.prod(src.shape[:-1]) != length:
        return False
    idx = _indices(src, chain)
    if idx is None or idx.size != heads * length * d:
        return False
    idx = idx.reshape(heads, length, d)
    off = int(idx[0, 0, 0])
    if off + heads * d > width:
        return False
    # head h, token l, feature e reads column off + h*d + e of token l: ``src`` viewed that way
    want = _iota(length * width).reshape(length, width)[:, off:off + heads * d].reshape(length, heads, d)
    if not np.array_equal(idx, want.transpose(1, 0, 2)):
        return False
    # the projection's input: a plain view of the token features
    in_chain, x = _chain_back(proj.x, lambda p: False)
    if not _static(x.shape) or not _plain_order(_indices(x, in_chain), math.prod(x.shape)):
        return False
    if math.prod(proj.x.shape[:-1]) != length or x.shape[-1] != proj.x.shape[-1]:
        return False
    e_total = heads * d
    w, b = proj.weight, proj.bias
    rows = slice(off, off + e_total)
    region.weights[f"{name}_weight"] = w if (off, e_total) == (0, w.shape[0]) else derived(
        lambda: np.ascontiguousarray(np.asarray(w.data)[rows]), (e_total, w.shape[1]), w.dtype)
    region.weights[f"{name}_bias"] = (derived(lambda: np.asarray(b.data, np.float32).reshape(-1)[rows].copy(),
                                              (e_total,)) if b is not None else
                                      derived(lambda: np.zeros(e_total, np.float32), (e_total,)))
    region.params[f"{name}dim"] = int(w.shape[1])
    region.inputs.append(x)
    region.add([o for o, _ in chain] + [proj.op])  # the input's own views are left to dead-code elimination
    return True


def _output_side(region: _Region, heads: int, length: int, d: int) -> bool:
    out = region.sdpa.outputs[0]
    chain, z = _chain_forward(out)
    if len(z.consumers) != 1:
        return False
    proj = _projection(z.consumers[0], _attribute)
    if proj is None or proj.x is not z or not _static(z.shape) or z.shape[-1] != heads * d:
        return False
    idx = _indices(out, chain)
    if idx is None or idx.size != heads * length * d:
        return False
    # token l, column h*d + e of the merged heads reads head h, token l, feature e of the SDPA
    want = _iota(heads * length * d).reshape(heads, length, d).transpose(1, 0, 2)
    if not np.array_equal(idx.reshape(length, heads, d), want):
        return False
    y = proj.op.outputs[0]
    tail, _ = _chain_forward(y)
    while tail and not _plain_order(_indices(y, tail), math.prod(y.shape)):
        tail.pop()  # keep the views that only add/drop size-1 dims
    final = tail[-1][0].outputs[0] if tail else y
    region.weights["out_weight"] = proj.weight
    out_dim = int(proj.weight.shape[0])
    region.weights["out_bias"] = proj.bias if proj.bias is not None else derived(
        lambda: np.zeros(out_dim, np.float32), (out_dim,))
    region.params["out_dim"] = out_dim
    region.add([o for o, _ in chain] + [proj.op] + [o for o, _ in tail])
    region.output = final
    return True


def _match(sdpa: Operator) -> _Region | None:
    q, k, v = sdpa.inputs[:3]
    if not all(_static(t.shape) and len(t.shape) >= 3 for t in (q, k, v)):
        return None
    if sdpa.params.get("dropout_p", 0) != 0 or sdpa.params.get("enable_gqa"):
        return None
    heads, lq, d = q.shape[-3:]
    hk, lk, dk = k.shape[-3:]
    hv, lv, dv = v.shape[-3:]
    if (hk, hv) != (heads, heads) or dk != d or dv != d or lv != lk:
        return None
    if any(math.prod(t.shape[:-3]) != 1 for t in (q, k, v)):
        return None
    region = _Region(sdpa)
    for t, length, name in ((q, lq, "q"), (k, lk, "k"), (v, lk, "v")):
        if not _head_input(region, t, heads, length, d, name):
            return None
    if not _output_side(region, heads, lq, d):
        return None
    region.params.update(embed_dim=heads * d, num_heads=heads, scale=sdpa.params.get("scale"))
    return region


def _closed(region: _Region) -> bool:
    inside = set(map(id, region.ops))
    for op in region.ops:
        for o in op.outputs:
            if o is region.output:
                continue
            if any(id(c) not in inside for c in o.consumers):
                return False
    return True


def _mask(graph: Graph, region: _Region) -> Operand | None:
    sdpa = region.sdpa
    if sdpa.params.get("is_causal"):
        q, k = sdpa.inputs[0], sdpa.inputs[1]
        value = causal_mask(q.shape[-2], k.shape[-2])
        out = graph.new_operand(graph.unique_operand_name(f"{sdpa.name}_causal"), dtype="f32", shape=list(value.shape))
        graph.add_op("pnnx.Attribute", graph.unique_op_name(f"{sdpa.name}_causal"), [], [out],
                     attrs={"data": Attribute(value)}, before=sdpa)
        return out
    mask = sdpa.named_input("attn_mask")
    if mask is None:
        return None
    return _unbroadcast_mask(mask)


def _fold_constant_mask(graph: Graph, sdpa: Operator) -> None:
    """An attn_mask made only of creation ops (``triu(full(-inf), 1)``) becomes a constant."""
    mask = sdpa.named_input("attn_mask")
    evaluated = constant_mask(mask) if mask is not None else None
    if evaluated is not None:
        graph.set_input(sdpa, sdpa.inputs.index(mask), add_constant(graph, evaluated[0], sdpa, f"{sdpa.name}_mask"))


def _unbroadcast_mask(mask: Operand) -> Operand:
    """The tensor ``mask`` was viewed/broadcast from when every head reads the same values in the
    same order — one row for every query (``key_padding_mask.view(N, 1, 1, S).expand(-1, H, -1,
    -1)``) or the whole ``(L, S)`` matrix; otherwise ``mask`` itself. (The views are left to dead-code
    elimination: a mask is often shared by every layer.)"""
    chain, src = _chain_back(mask, lambda op: False)
    idx = _indices(src, chain, broadcast=True)
    if not chain or idx is None or idx.ndim < 2:
        return mask
    per_head = idx.reshape((-1,) + idx.shape[-2:])
    first = per_head[0]
    if not all(np.array_equal(h, first) for h in per_head[1:]):
        return mask
    n = math.prod(src.shape)
    row = first.shape[-1] == n and all(np.array_equal(r, _iota(n)) for r in first)
    whole = first.size == n and np.array_equal(first, _iota(n).reshape(first.shape))
    return src if row or whole else mask


def _fuse(graph: Graph, region: _Region) -> Operator:
    mask = _mask(graph, region)
    inputs = list(region.inputs) + ([mask] if mask is not None else [])
    root = region.output.producer
    new = replace_chain(graph, root, [op for op in region.ops if op is not root], "nn.MultiheadAttention", inputs,
                        params=dict(region.params), attrs=dict(region.weights),
                        input_names=["query", "key", "value", "attn_mask"][:len(inputs)])
    for key in ("source", "module_stack"):
        if key in region.sdpa.meta:
            new.meta[key] = region.sdpa.meta[key]
    return new


@graph_pass("fuse_multihead_attention", "fuse projections + head split + SDPA + head merge + output projection "
            "into one multi-head attention")
def run(graph: Graph, cx) -> None:
    try:
        _fuse_all(graph)
    finally:
        _IOTA.clear()


def _fuse_all(graph: Graph) -> None:
    for sdpa in [op for op in graph.ops if op.type == SDPA]:
        read = list(sdpa.inputs)
        _fold_constant_mask(graph, sdpa)
        region = _match(sdpa)
        if region is None or region.output is None or not _closed(region):
            log.debug("no multi-head attention around %s", sdpa.name)
            graph.prune(read)  # a mask folded to a constant
            continue
        read += [i for op in region.ops for i in op.inputs]
        new = _fuse(graph, region)
        log.debug("fused multi-head attention %s", new.name)
        # the views of inputs and masks the fused op no longer reads (before lowering tries them)
        graph.prune(read)
