"""Scaled dot-product attention.

ATen → pnnx: ``aten.scaled_dot_product_attention.default`` and
``aten._scaled_dot_product_flash_attention_for_cpu.default`` (multi-output: only the attention
output may be used) → ``F.scaled_dot_product_attention`` (inputs ``query, key, value`` and
``attn_mask`` when there is one; params ``dropout_p, is_causal, scale, enable_gqa``). Core ATen's
math decomposition is put back together by the ``recompose_attention`` pass first.

* ``is_causal`` becomes a constant ``(L, S)`` additive mask (0 on and below the diagonal,
  :data:`MASKED` above; PyTorch's top-left alignment), added to nothing else (PyTorch refuses both);
* a constant boolean mask becomes the additive ``0``/:data:`MASKED` mask (a run-time one was made
  additive by the ``legalize_attention_masks`` pass); a float mask is used as given;
* ``dropout_p`` must be 0 (PyTorch applies it even in eval mode).

pnnx → ncnn: ``SDPA`` (``sdpa.cpp``): q ``(heads, L, E)``, k ``(groups, S, E)``, v
``(groups, S, Ev)``, ``heads % groups == 0`` (grouped-query attention as ``enable_gqa``), mask
``(L, S)`` or ``(1|heads, L, S)``; ``scale`` 0 means ``1/sqrt(E)`` (PyTorch's default). A mask
that broadcasts along L (a key padding mask ``(N, 1, 1, S)``) is expanded by adding a zero
``(…, L, S)`` constant; q/k/v of two batch-less dims (a single head) are viewed as one head.
Query heads over several ncnn axes (5-D attention, e.g. batch × windows × heads, as MaxViT's
re-exported Python spells it) cost SDPA a Reshape of q, k, v and the result to merge them (and
a Tile to spread a per-head bias over the windows); when that is more layers than the unfused
``MatMul`` (``transB``) → scale / mask ``BinaryOp`` → ``Softmax`` → ``MatMul``, which
broadcast over every leading axis as they are, the unfused chain is emitted instead (the layers
the same model written with ``matmul`` / ``einsum`` converts to).
"""
from __future__ import annotations

import logging
import math
from numbers import Number

import numpy as np

from ..convert.context import Unsupported
from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import batch_dim, ncnn_axis, ncnn_shape
from ..ir import Operand
from ..ncnn.enums import BinaryOpType
from ._broadcast import Value, align_operands, result_value
from .shape import intermediate, reshape_to

log = logging.getLogger(__name__)

SDPA_OPS = ("aten.scaled_dot_product_attention.default", "aten._scaled_dot_product_flash_attention_for_cpu.default")


#: the additive mask value of a masked position: finite, so that a row masked entirely stays
#: finite in ncnn's softmax (and can be zeroed, as PyTorch does), yet ``exp(x - 1e30 - max)`` is
#: exactly 0 like ``exp(-inf)`` for every other row
MASKED = -1e30


def causal_mask(rows: int, cols: int) -> np.ndarray:
    """PyTorch's ``is_causal`` mask as an additive float mask (top-left aligned)."""
    keep = np.tril(np.ones((rows, cols), dtype=bool))
    return np.where(keep, np.float32(0.0), np.float32(MASKED)).astype(np.float32)


def is_causal_mask(value: np.ndarray) -> bool:
    """Whether a mask (bool: True = attend; or additive) is PyTorch's causal mask, its last two
    dims square or not, its leading dims all 1."""
    v = np.asarray(value)
    if v.ndim < 2 or any(d != 1 for d in v.shape[:-2]):
        return False
    v = v.reshape(v.shape[-2:])
    keep = np.tril(np.ones(v.shape, dtype=bool))
    if v.dtype == np.bool_:
        return bool(np.array_equal(v, keep))
    return bool((v[keep] == 0).all() and (v[~keep] <= MASKED).all())


# ---------------------------------------------------------------------------- ATen → pnnx
def _base(op) -> str:
    """The op's own name while a rule lowers it (for naming what the rule emits)."""
    return op.meta.get("lowering_name", op.name)


def _mask_operand(ctx, op, q: Operand, k: Operand) -> Operand | None:
    mask = op.named_input("attn_mask")
    causal = bool(op.params.get("is_causal"))
    if causal:
        if mask is not None:
            ctx.unsupported("is_causal together with attn_mask")
        rows, cols = q.shape[-2], k.shape[-2]
        if isinstance(rows, int) and isinstance(cols, int):
            return ctx.constant(causal_mask(rows, cols), name=f"{_base(op)}_causal")
        return _dynamic_causal(ctx, op, q, k)
    if mask is None:
        return None
    if mask.dtype == "bool":
        attr = ctx.attribute(mask)
        if attr is None:  # legalize_attention_masks made every run-time one additive
            ctx.unsupported(f"boolean attn_mask {mask.name} computed in the graph")
        return ctx.constant(np.where(np.asarray(attr.data, bool), np.float32(0.0), np.float32(MASKED)),
                            name=f"{_base(op)}_mask")
    return mask


def _largest(ctx, d) -> int:
    if isinstance(d, int):
        return d
    top = ctx.graph.meta.get("symbols", {}).get(str(d), {}).get("max")
    if not isinstance(top, int):
        ctx.unsupported(f"is_causal with the sequence length {d}, which has no upper bound")
    return top


def _dynamic_causal(ctx, op, q: Operand, k: Operand) -> Operand:
    """The causal mask of a dynamic length: the largest one, cut to the query and key lengths at
    run time (ncnn Crops measuring q and k; the top-left corner of a causal mask is causal)."""
    from .shape import INT64_MAX

    rows, cols = q.shape[-2], k.shape[-2]
    cur = ctx.constant(causal_mask(_largest(ctx, rows), _largest(ctx, cols)), name=f"{_base(op)}_causal")
    shape = list(cur.shape)
    for axis, (ref, size) in enumerate(((q, rows), (k, cols))):
        if isinstance(size, int):
            continue
        shape[axis] = size
        cur = ctx.emit("Tensor.slice", [cur, ref], shape=list(shape), dtype="f32", name=f"{_base(op)}_causal_cut",
                       params={"dim": axis, "start": 0, "end": INT64_MAX, "step": 1,
                               "end_expr": f"size(@1,{len(ref.shape) - 2})"})
    return cur


def _broadcast_batch_dims(ctx, q: Operand, k: Operand, v: Operand) -> tuple[Operand, Operand, Operand]:
    """q, k and v with their leading (batch) dims broadcast together as PyTorch does — a 3-D key
    for a 4-D query, a single batch for two — so ncnn's SDPA sees one set of heads. Grouped
    key/value heads (fewer than the query's, ``enable_gqa``) do not broadcast and stay as they are."""
    leads = [list(t.shape[:-2]) for t in (q, k, v)]
    if all(lead == leads[0] for lead in leads) or not all(isinstance(d, int) for lead in leads for d in lead):
        return q, k, v
    try:
        common = list(np.broadcast_shapes(*[tuple(lead) for lead in leads]))
    except ValueError:  # grouped heads: the converter's GQA path
        return q, k, v
    out = []
    for t, lead in zip((q, k, v), leads):
        if lead != common:
            shape = common + list(t.shape[-2:])
            t = ctx.emit("Tensor.expand", [t], params={"sizes": shape}, shape=shape, dtype=t.dtype,
                         name=f"{_base(ctx.current)}_{t.name}_expand")
        out.append(t)
    return tuple(out)


@aten_converter(*SDPA_OPS)
def scaled_dot_product_attention(ctx, op):
    q, k, v = op.inputs[:3]
    for t in (q, k, v):
        if t.shape is None or len(t.shape) < 2:
            ctx.unsupported(f"attention operand {t.name} of shape {t.shape}")
    dropout = op.params.get("dropout_p", 0.0)
    if not isinstance(dropout, Number) or dropout != 0:
        ctx.unsupported(f"dropout_p={dropout!r} (PyTorch applies attention dropout even in eval mode)")
    scale = op.params.get("scale")
    if scale is not None and not isinstance(scale, Number):
        ctx.unsupported(f"scale={scale!r} is not a constant number")
    q, k, v = _broadcast_batch_dims(ctx, q, k, v)
    mask = _mask_operand(ctx, op, q, k)
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    out = ctx.emit("F.scaled_dot_product_attention", inputs,
                   input_names=["query", "key", "value", "attn_mask"][:len(inputs)],
                   params={"dropout_p": 0.0, "is_causal": False, "scale": None if scale is None else float(scale),
                           "enable_gqa": bool(op.params.get("enable_gqa", False))})
    return [out] + [None] * (len(op.outputs) - 1)


# ---------------------------------------------------------------------------- pnnx → ncnn
def _heads_shape(t: Operand) -> list | None:
    """``t``'s batch-less shape as ``(heads, L, E)``: dims before the last two are merged into one
    (batches of sequences are just more heads to ncnn's SDPA), or None."""
    s = ncnn_shape(t)
    if s is None or len(s) <= 3:
        return s
    lead = s[:-2]
    if not all(isinstance(d, int) for d in lead):
        return None
    return [math.prod(lead)] + list(s[-2:])


def _check_sdpa(op, ctx):
    q, k, v = op.inputs[:3]
    shapes = [_heads_shape(t) for t in (q, k, v)]
    if any(s is None or len(s) not in (2, 3) for s in shapes):
        return ("unsupported: scaled_dot_product_attention needs (heads, L, E) q/k/v without the batch axis; got "
                + ", ".join(f"{t.name}{t.shape}" for t in (q, k, v)))
    if len({len(s) for s in shapes}) != 1:
        return "unsupported: q, k and v of different ranks"
    if len(shapes[0]) == 3:
        hq, hk, hv = shapes[0][0], shapes[1][0], shapes[2][0]
        if not all(isinstance(h, int) for h in (hq, hk, hv)) or hk != hv or hq % hk:
            return f"unsupported: {hq} query heads over {hk} key / {hv} value heads"
    return None


def _as_heads(ctx, t: Operand) -> Operand:
    """``t`` as a 3-D ``(heads, L, E)`` blob (a single head when it has none)."""
    shape = _heads_shape(t)
    return reshape_to(ctx, t, shape if len(shape) == 3 else [1] + shape)


def _broadcast_runs(mask: list, target: list) -> tuple[list, list] | None:
    """Group the axes of ``mask`` (right-aligned to ``target``, every dim 1 or equal) into runs
    that are all kept or all broadcast: the ``(shape, repeats)`` of one numpy-style tile of
    ``mask`` that gives ``target`` in row-major order, or None when it needs more than 4 dims."""
    shape, repeats, kinds = [], [], []
    for m, t in zip(mask, target):
        kind = "keep" if m == t else "tile"
        if t == 1:
            continue
        if kinds and kinds[-1] == kind:
            shape[-1], repeats[-1] = shape[-1] * m, repeats[-1] * (t // m)
        else:
            shape.append(m), repeats.append(t // m), kinds.append(kind)
    return (shape or [1], repeats or [1]) if len(shape) <= 4 else None


def _mask_layout(mask: Operand, lead: list, rows, cols) -> tuple[list, list, list]:
    """``(shape, target, want)``: ``mask``'s ncnn shape right-aligned to ``target`` (the query's
    leading dims, L, S) and the shape ncnn's attention layers read it in (raises Unsupported when
    it does not broadcast)."""
    shape = ncnn_shape(mask)
    if shape is None:
        raise Unsupported(f"unsupported: attn_mask {mask.name} of unknown shape")
    target = [*lead, rows, cols]
    shape = [1] * (len(target) - len(shape)) + list(shape)
    while len(shape) > len(target) and shape[0] == 1:
        shape = shape[1:]
    if len(shape) != len(target) or any(m not in (1, t) for m, t in zip(shape, target)):
        raise Unsupported(f"unsupported: attn_mask {mask.name} {mask.shape} does not broadcast to {tuple(target)}")
    heads = math.prod(shape[:-2])
    want = [rows, cols] if heads == 1 else [math.prod(lead), rows, cols]
    return shape, target, want


def _mask_tiled(shape: list, target: list) -> bool:
    """Whether a mask of (right-aligned) ``shape`` must be tiled out to its ``target``'s heads."""
    heads = math.prod(shape[:-2])
    return shape[-2:] != target[-2:] or heads not in (1, math.prod(target[:-2]))


def _mask_input(ctx, op, mask: Operand, lead: list, rows, cols) -> Operand:
    """``mask`` as ncnn's SDPA / MultiHeadAttention read it: ``(L, S)``, or one ``(L, S)`` plane
    per head of the ``prod(lead)`` heads (the query's leading dims merged, e.g. windows × heads
    in Swin). A mask that broadcasts over some of those dims or along L (a key padding mask
    ``(N, 1, 1, S)``, a relative position bias ``(1, heads, L, S)`` for every window) is tiled
    out with one ncnn ``Tile``."""
    shape, target, want = _mask_layout(mask, lead, rows, cols)
    if not _mask_tiled(shape, target):
        return reshape_to(ctx, mask, want)
    heads = math.prod(shape[:-2])
    if not all(isinstance(d, int) for d in [*shape, *target]):
        ctx.unsupported(f"attn_mask {mask.name} {mask.shape} would be tiled to {tuple(target)}, which is dynamic")
    runs = _broadcast_runs(shape if heads > 1 else shape[-2:], target if heads > 1 else [rows, cols])
    if runs is None:
        ctx.unsupported(f"attn_mask {mask.name} {mask.shape} broadcasts to {tuple(target)} over more than 4 runs "
                        "of axes")
    grouped, repeats = runs
    tiled = ctx.layer("Tile", [reshape_to(ctx, mask, grouped)], name=f"{_base(op)}_masktile", repeats=repeats)
    tiled = intermediate(tiled, [g * r for g, r in zip(grouped, repeats)])
    return reshape_to(ctx, tiled, want)


# ---------------------------------------------------------------------------- heads over several axes
def _merged_by_producer(t: Operand) -> bool:
    """Whether a Reshape of ``t`` would merge into the Reshape producing it
    (``eliminate_noop_reshape``)."""
    p = t.producer
    return p is not None and p.type in ("Reshape", "Flatten") and len(t.consumers) == 1


def _fused_layers(op) -> float:
    """How many ncnn layers the fused lowering (one ``SDPA``) emits for ``op``: the SDPA, a
    Reshape of each of q/k/v that is not already ``(heads, L, E)`` (unless it merges into the
    Reshape making it), the mask's Reshape / Tile, the Reshape of the result (infinite when SDPA
    cannot read the mask)."""
    q, k, v = op.inputs[:3]
    n = 1 + sum(ncnn_shape(t) != _heads_shape(t) and not _merged_by_producer(t) for t in (q, k, v))
    heads, rows, _ = _heads_shape(q)
    if len(op.inputs) > 3:
        try:
            shape, target, want = _mask_layout(op.inputs[3], ncnn_shape(q)[:-2], rows, _heads_shape(k)[-2])
        except Unsupported:
            return math.inf
        n += 3 if _mask_tiled(shape, target) else int(ncnn_shape(op.inputs[3]) != want)
    return n + int(ncnn_shape(op.outputs[0]) != [heads, rows, ncnn_shape(v)[-1]])


def _scores(q: Operand, k: Operand) -> tuple[list, int | None]:
    """The PyTorch shape and batch dim of the attention scores ``q @ kᵀ``."""
    return list(q.shape[:-1]) + [k.shape[-2]], batch_dim(q)


def _unfused_layers(op) -> int | None:
    """How many ncnn layers the unfused lowering (:func:`_unfused_attention`) emits for ``op``, or
    None when it does not apply: query heads over one ncnn axis at most (SDPA takes them as
    they are), grouped key/value heads, q/k/v whose leading dims or batch axes differ, or a
    mask that would widen the scores."""
    q, k, v = op.inputs[:3]
    lead = ncnn_shape(q)[:-2]
    if len(lead) < 2 or any(ncnn_shape(t)[:-2] != lead or batch_dim(t) != batch_dim(q) for t in (k, v)):
        return None
    scores, b = _scores(q, k)
    if b is not None and b >= len(scores) - 2:
        return None
    n = 3 + int(sdpa_scale(op) != 1.0)
    if len(op.inputs) > 3:
        mask = op.inputs[3]
        if mask.shape is None or len(mask.shape) > len(scores) or any(
                m not in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores))):
            return None
        n += 1
    natural = lead + [ncnn_shape(q)[-2], ncnn_shape(v)[-1]]
    return n + int(ncnn_shape(op.outputs[0]) != natural)


def _unfused_attention(ctx, op) -> Operand:
    """``softmax(q @ kᵀ · scale + mask) @ v`` as ncnn ``MatMul`` (``transB``), ``BinaryOp`` layers,
    ``Softmax`` and ``MatMul``, which broadcast over every leading axis: no Reshape merges the
    query's leading axes into SDPA's heads, no Tile spreads the mask over them."""
    q, k, v = op.inputs[:3]
    shape, b = _scores(q, k)
    dtype = op.outputs[0].dtype
    s = result_value(ctx.layer("MatMul", [q, k], transB=1), shape, b, dtype)
    scale = sdpa_scale(op)
    if scale != 1.0:
        s = result_value(ctx.layer("BinaryOp", [s.operand], op_type=BinaryOpType.MUL, with_scalar=1, b=scale),
                         shape, b, dtype)
    if len(op.inputs) > 3:
        mask = Value.of(op.inputs[3])
        aligned = align_operands(ctx, s, mask, f"attention scores {shape} + attn_mask {mask.shape}")
        s = result_value(ctx.layer("BinaryOp", list(aligned[:2]), op_type=BinaryOpType.ADD), aligned.shape,
                         aligned.batch_dim, dtype)
    p = result_value(ctx.layer("Softmax", [s.operand], axis=ncnn_axis(s.operand, -1), fixbug0=1), s.shape, s.bdim,
                     dtype)
    y = ctx.layer("MatMul", [p.operand, v])
    natural = p.ncnn_shape[:-1] + [ncnn_shape(v)[-1]]
    if ncnn_shape(op.outputs[0]) == natural:
        return y
    return reshape_to(ctx, intermediate(y, natural), ncnn_shape(op.outputs[0]), final=True)


@ncnn_rule("F.scaled_dot_product_attention", validator=_check_sdpa)
def sdpa_layer(ctx, op):
    unfused = _unfused_layers(op)
    if unfused is not None and unfused < _fused_layers(op):
        return _unfused_attention(ctx, op)
    q, k, v = (_as_heads(ctx, t) for t in op.inputs[:3])
    heads, rows, _ = ncnn_shape(q)
    cols = ncnn_shape(k)[1]
    inputs = [q, k, v]
    if len(op.inputs) > 3:
        lead = ncnn_shape(op.inputs[0])[:-2] or [1]
        inputs.append(_mask_input(ctx, op, op.inputs[3], list(lead), rows, cols))
    scale = op.params.get("scale")
    y = ctx.layer("SDPA", inputs, attn_mask=int(len(inputs) > 3), scale=float(scale) if scale is not None else None)
    out_shape = ncnn_shape(op.outputs[0])
    natural = [heads, rows, ncnn_shape(v)[2]]
    if out_shape == natural:
        return y
    return reshape_to(ctx, intermediate(y, natural), out_shape, final=True)


def sdpa_scale(op) -> float:
    """The scale an ``F.scaled_dot_product_attention`` op applies (PyTorch's default resolved)."""
    s = op.params.get("scale")
    return float(s) if s is not None else 1.0 / math.sqrt(float(op.inputs[0].shape[-1]))

# ---------------------------------------------------------------------------- fused multi-head attention
def _check_mha(op, ctx):
    p = op.params
    if int(p["out_dim"]) != int(p["qdim"]):
        return (f"unsupported: multi-head attention whose output projection gives {p['out_dim']} features for "
                f"{p['qdim']} query features (ncnn's MultiHeadAttention maps back to the query width)")
    for x in op.inputs[:3]:
        s = ncnn_shape(x)
        if s is None or not all(isinstance(d, int) for d in s):
            return f"unsupported: multi-head attention input {x.name} of dynamic or unknown shape {x.shape}"
    return None


def _tokens(ctx, x: Operand, width: int) -> Operand:
    """``x`` as ncnn's MultiHeadAttention reads it: a 2-D ``(L, width)`` blob."""
    return reshape_to(ctx, x, [math.prod(ncnn_shape(x)) // width, width])


@ncnn_rule("nn.MultiheadAttention", validator=_check_mha)
def multihead_attention_layer(ctx, op):
    """The ``nn.MultiheadAttention`` the ``fuse_multihead_attention`` pass makes → ncnn
    MultiHeadAttention (one input for self-attention, two when key is value)."""
    p, a = op.params, op.attrs
    q, k, v = op.inputs[:3]
    embed, heads = int(p["embed_dim"]), int(p["num_heads"])
    qdim, kdim, vdim = int(p["qdim"]), int(p["kdim"]), int(p["vdim"])
    tq = _tokens(ctx, q, qdim)
    inputs = [tq]
    if k is not q or v is not q:
        inputs.append(_tokens(ctx, k, kdim))
        if v is not k:
            inputs.append(_tokens(ctx, v, vdim))
    rows, cols = ncnn_shape(tq)[0], math.prod(ncnn_shape(k)) // kdim
    if len(op.inputs) > 3:
        inputs.append(_mask_input(ctx, op, op.inputs[3], [heads], rows, cols))
    weights = {"q_weight_data": a["q_weight"], "q_bias_data": a["q_bias"], "k_weight_data": a["k_weight"],
               "k_bias_data": a["k_bias"], "v_weight_data": a["v_weight"], "v_bias_data": a["v_bias"],
               "out_weight_data": a["out_weight"], "out_bias_data": a["out_bias"]}
    scale = p.get("scale")
    y = ctx.layer("MultiHeadAttention", inputs, weights=weights, embed_dim=embed, num_heads=heads,
                  weight_data_size=embed * qdim, kdim=kdim, vdim=vdim, attn_mask=int(len(op.inputs) > 3),
                  scale=float(scale) if scale is not None else None)
    want = ncnn_shape(op.outputs[0])
    if want == [rows, qdim]:
        return y
    return reshape_to(ctx, intermediate(y, [rows, qdim]), want, final=True)
