"""Put core ATen's math decomposition of ``scaled_dot_product_attention`` back together (ATen
level, after ``recompose_matmul``).

``run_decompositions()`` spells ``F.scaled_dot_product_attention(q, k, v, mask, scale=s)`` as::

    a = matmul(mul(q, sqrt(s)), mul(permute(k, swap last two), sqrt(s)))   # [+ mask]
    p = _softmax(a, -1)
    p = where(logical_not(any(logical_not(eq(a, -inf)), -1, True)), full_like(p, 0), p)  # safe softmax
    out = matmul(p, v)                      # [then permute(out, P), clone, permute(.., P⁻¹)]

(``nn.MultiheadAttention`` with ``need_weights=True`` and hand-written attention give the same
with ``bmm``, ``softmax.int`` and the scale on ``q`` only, as a ``mul`` or a ``div``.)
(``is_causal`` adds a mask built from ``arange``/``le``/``logical_and``/``where``.) The chain
becomes one ``aten.scaled_dot_product_attention.default``. The mask is kept as an input when it
is computed from graph inputs; a mask built only from creation ops is evaluated here — PyTorch's
causal mask turns into ``is_causal=True``, any other into a constant float mask. The safe-softmax
guard only differs for rows masked entirely (PyTorch gives zeros, ncnn's SDPA NaN). A trailing
permute pair that cancels out is dropped.
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ..converters.attention import is_causal_mask
from ..ir import Attribute, Graph, Operand, Operator
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

_MATMULS = ("aten.matmul.default", "aten.bmm.default")
_SOFTMAX = ("aten._softmax.default", "aten.softmax.int")


def _producer(opd: Operand | None, *types: str) -> Operator | None:
    p = None if opd is None else opd.producer
    return p if p is not None and p.type in types else None


def _arg(op: Operator, name: str) -> Operand | None:
    return op.inputs[op.input_names.index(name)] if name in op.input_names else None


def _scalar_mul(opd: Operand) -> tuple[Operand, float, Operator | None]:
    """``(x, s, op)`` when ``opd`` is ``x * s`` or ``x / (1/s)`` for a number ``s``, else ``(opd, 1, None)``."""
    m = _producer(opd, "aten.mul.Scalar", "aten.mul.Tensor", "aten.div.Scalar", "aten.div.Tensor")
    other = None if m is None else m.params.get("other")
    if m is None or not isinstance(other, (int, float)) or isinstance(other, bool) or len(m.inputs) != 1:
        return opd, 1.0, None
    if m.type.startswith("aten.div"):
        return (m.inputs[0], 1.0 / float(other), m) if other and m.params.get("rounding_mode") is None else (opd, 1.0, None)
    return m.inputs[0], float(other), m


def _swaps_last_two(op: Operator | None) -> bool:
    if op is None:
        return False
    rank = len(op.inputs[0].shape or [])
    if op.type == "aten.permute.default":
        dims = [d % rank for d in op.params["dims"]]
        want = list(range(rank))
        want[-2:] = want[-1], want[-2]
        return rank >= 2 and dims == want
    if op.type == "aten.transpose.int":
        return rank >= 2 and {op.params["dim0"] % rank, op.params["dim1"] % rank} == {rank - 2, rank - 1}
    return False


# ---------------------------------------------------------------------------- mask evaluation
def _arange(a: dict) -> np.ndarray:
    return np.arange(a.get("start", 0), a["end"], a.get("step", 1))


#: creation-only ops a mask may be built from, evaluated with numpy
_EVAL = {
    "aten.arange.start_step": _arange, "aten.arange.start": _arange, "aten.arange.default": _arange,
    "aten.full.default": lambda a: np.full(a["size"], a["fill_value"]),
    "aten.ones.default": lambda a: np.ones(a["size"]), "aten.zeros.default": lambda a: np.zeros(a["size"]),
    "aten.scalar_tensor.default": lambda a: np.asarray(a["s"], np.float32),
    "aten.unsqueeze.default": lambda a: np.expand_dims(a["self"], a["dim"] % (np.ndim(a["self"]) + 1)),
    "aten.sub.Tensor": lambda a: a["self"] - a["other"], "aten.add.Tensor": lambda a: a["self"] + a["other"],
    "aten.le.Scalar": lambda a: a["self"] <= a["other"], "aten.ge.Scalar": lambda a: a["self"] >= a["other"],
    "aten.lt.Scalar": lambda a: a["self"] < a["other"], "aten.gt.Scalar": lambda a: a["self"] > a["other"],
    "aten.logical_and.default": lambda a: np.logical_and(a["self"], a["other"]),
    "aten.logical_not.default": lambda a: np.logical_not(a["self"]),
    "aten.where.self": lambda a: np.where(a["condition"], a["self"], a["other"]),
    "aten.eq.Scalar": lambda a: a["self"] == a["other"], "aten.ne.Scalar": lambda a: a["self"] != a["other"],
    "aten.masked_fill.Scalar": lambda a: np.where(a["mask"], a["value"], a["self"]),
    "aten.tril.default": lambda a: np.tril(a["self"], a.get("diagonal", 0)),
    "aten.triu.default": lambda a: np.triu(a["self"], a.get("diagonal", 0)),
}


def _evaluate(opd: Operand, ops: list[Operator], depth: int = 0) -> Any:
    """The value of ``opd`` when it is computed only from creation ops (the ops read are added to
    ``ops``), else None."""
    p = opd.producer
    if p is None or depth > 24:
        return None
    if p.type == "pnnx.Attribute" and "data" in p.attrs:
        return np.asarray(p.attrs["data"].data)
    fn = _EVAL.get(p.type)
    if fn is None or len(p.outputs) != 1:
        return None
    args = {k: v for k, v in p.params.items()}
    for name, i in zip(p.input_names, p.inputs):
        val = _evaluate(i, ops, depth + 1)
        if val is None:
            return None
        args[name] = val
    try:
        value = fn(args)
    except (KeyError, TypeError, ValueError):
        return None
    if p not in ops:
        ops.append(p)
    return value


# ---------------------------------------------------------------------------- the match
class _Found:
    def __init__(self) -> None:
        self.ops: list[Operator] = []
        self.q = self.k = self.v = self.mask = None
        self.mask_value: np.ndarray | None = None  #: a constant additive mask (from a masked_fill)
        self.scale: float | None = None
        self.causal = False
        self.root: Operator | None = None


def _zeros(op: Operator) -> bool:
    """``full_like(x, 0)``, or what constant folding made of it."""
    if op.type == "pnnx.Attribute":
        return op.meta.get("folded_from") == "aten.full_like.default" and not np.any(op.attrs["data"].data)
    return op.params.get("fill_value") == 0


def _softmax_input(p: Operand, found: _Found) -> Operand | None:
    """The softmax's input ``a``, through the safe-softmax ``where`` guard when present."""
    where = _producer(p, "aten.where.self")
    if where is not None:
        full_like = _producer(_arg(where, "self"), "aten.full_like.default", "pnnx.Attribute")
        soft = _producer(_arg(where, "other"), *_SOFTMAX)
        cond = _producer(_arg(where, "condition"), "aten.logical_not.default")
        anyop = _producer(cond.inputs[0] if cond else None, "aten.any.dim")
        not1 = _producer(anyop.inputs[0] if anyop else None, "aten.logical_not.default")
        eq = _producer(not1.inputs[0] if not1 else None, "aten.eq.Scalar")
        if None in (full_like, soft, eq) or not _zeros(full_like):
            return None
        if eq.inputs[0] is not soft.inputs[0] or eq.params.get("other") != -math.inf:
            return None
        found.ops += [where, full_like, cond, anyop, not1, eq]
    else:
        soft = _producer(p, *_SOFTMAX)
        if soft is None:
            return None
    a = soft.inputs[0]
    if soft.params.get("dim") not in (-1, len(a.shape or []) - 1):
        return None
    found.ops.append(soft)
    return a


def _masked_fill(a: Operand) -> tuple[Operand, np.ndarray, list[Operator]] | None:
    """``(scores, additive mask, ops)`` when ``a`` is ``scores`` with a constant condition filled by
    a number: ``masked_fill(scores, cond, v)`` or core ATen's ``where(cond, v, scores)``."""
    op = a.producer
    ops: list[Operator] = [op]
    if op.type == "aten.masked_fill.Scalar":
        cond_opd, scores, fill = _arg(op, "mask"), _arg(op, "self"), op.params.get("value")
    else:
        cond_opd, fill_opd, scores = _arg(op, "condition"), _arg(op, "self"), _arg(op, "other")
        fill = _evaluate(fill_opd, ops) if fill_opd is not None else None
        if fill is None or np.size(fill) != 1:
            return None
        fill = float(np.asarray(fill).reshape(-1)[0])
    if not isinstance(fill, (int, float)) or cond_opd is None or scores is None:
        return None
    cond = _evaluate(cond_opd, ops)
    if cond is None:
        return None
    return scores, np.where(np.asarray(cond, bool), np.float32(fill), np.float32(0)), ops


def _match(root: Operator) -> _Found | None:
    found = _Found()
    found.root = root
    p, found.v = root.inputs[0], root.inputs[1]
    a = _softmax_input(p, found)
    if a is None:
        return None
    add = _producer(a, "aten.add.Tensor")
    fill = _producer(a, "aten.masked_fill.Scalar")
    scores = a
    if add is not None and add.params.get("alpha", 1) == 1:
        scores, found.mask = add.inputs[0], add.inputs[1]
        found.ops.append(add)
    elif fill is not None or _producer(a, "aten.where.self") is not None:
        filled = _masked_fill(a)  # masked_fill(scores, cond, v) / core's where(cond, v, scores)
        if filled is None:
            return None
        scores, found.mask_value, mask_ops = filled
        found.ops += mask_ops
    scores, post, post_op = _scalar_mul(scores)  # (q @ k^T) * scale
    if post_op is not None:
        found.ops.append(post_op)
    mm = _producer(scores, *_MATMULS)
    if mm is None:
        return None
    found.ops.append(mm)
    q, sq, mq = _scalar_mul(mm.inputs[0])
    kt, sk, mk = _scalar_mul(mm.inputs[1])
    found.ops += [m for m in (mq, mk) if m is not None]
    perm = kt.producer
    if not _swaps_last_two(perm):
        return None
    found.ops.append(perm)
    found.q, found.k = q, perm.inputs[0]
    found.scale = sq * sk * post
    if found.q.shape is None or found.k.shape is None or len(found.q.shape) < 2:
        return None
    return found


def _closed(found: _Found) -> bool:
    """Every value the chain makes is read only inside the chain."""
    inside = set(map(id, found.ops)) | {id(found.root)}
    return all(all(id(c) in inside for o in op.outputs for c in o.consumers) for op in found.ops)


def add_constant(graph: Graph, value: np.ndarray, before: Operator, name: str) -> Operand:
    """A float32 ``pnnx.Attribute`` holding ``value``, inserted before ``before``."""
    value = np.asarray(value, np.float32)
    out = graph.new_operand(graph.unique_operand_name(name), dtype="f32", shape=list(value.shape))
    graph.add_op("pnnx.Attribute", graph.unique_op_name(name), [], [out], attrs={"data": Attribute(value)},
                 before=before)
    return out


def constant_mask(opd: Operand) -> tuple[np.ndarray, list[Operator]] | None:
    """An attention mask computed only from creation ops (``triu(full(-inf))``, ``arange`` + ``le``...)
    as an additive float mask (a boolean one: True = attend), with the ops that compute it."""
    ops: list[Operator] = []
    value = _evaluate(opd, ops)
    if value is None or not ops:  # computed from inputs, or already a constant
        return None
    value = np.asarray(value)
    if value.dtype == np.bool_:
        value = np.where(value, np.float32(0.0), np.float32(-np.inf))
    return value.astype(np.float32), ops


def _resolve_mask(graph: Graph, found: _Found) -> None:
    if found.mask is not None:
        evaluated = constant_mask(found.mask)
        if evaluated is None:
            return
        found.mask_value, mask_ops = evaluated
        found.ops += [o for o in mask_ops if o not in found.ops]
    if found.mask_value is None:
        return
    rows, cols = found.q.shape[-2], found.k.shape[-2]
    value = found.mask_value
    if value.shape == (rows, cols) and is_causal_mask(value):
        found.causal, found.mask = True, None
    else:
        found.mask = add_constant(graph, value, found.root, f"{found.root.name}_mask")


def _cancelling_permutes(graph: Graph, out: Operand) -> None:
    """Drop ``permute(permute(out, P), P⁻¹)`` after the attention (core ATen's contiguous copy)."""
    p1 = out.consumers[0] if len(out.consumers) == 1 else None
    if p1 is None or p1.type != "aten.permute.default" or len(p1.outputs[0].consumers) != 1:
        return
    p2 = p1.outputs[0].consumers[0]
    if p2.type != "aten.permute.default":
        return
    d1, d2 = p1.params["dims"], p2.params["dims"]
    if [d1[d] for d in d2] != list(range(len(d1))):
        return
    graph.replace_all_uses(p2.outputs[0], out)
    graph.remove_op(p2)
    graph.remove_op(p1)


def _replace(graph: Graph, found: _Found) -> Operator:
    q = found.q
    default = 1.0 / math.sqrt(float(q.shape[-1])) if isinstance(q.shape[-1], int) else None
    scale = None if default is not None and math.isclose(found.scale, default, rel_tol=1e-6) else found.scale
    inputs = [found.q, found.k, found.v] + ([found.mask] if found.mask is not None else [])
    absorbed = [o for o in found.ops if o is not found.root]
    new = replace_chain(graph, found.root, absorbed, "aten.scaled_dot_product_attention.default", inputs,
                        params={"dropout_p": 0.0, "is_causal": found.causal, "scale": scale, "enable_gqa": False},
                        input_names=["query", "key", "value", "attn_mask"][:len(inputs)])
    new.meta["target"] = "aten.scaled_dot_product_attention.default"
    new.meta["recomposed_from"] = [o.name for o in absorbed] + [new.name]
    return new


def _unread_branches(graph: Graph, depth: int = 4) -> list[Operand]:
    """Outputs nobody reads of the operators at most ``depth`` steps downstream of a softmax (a
    dead branch there, such as averaged attention weights nobody uses, would keep the chain from
    being recomposed)."""
    unread, seen = [], set()
    frontier = [op for op in graph.ops if op.type in _SOFTMAX]
    for _ in range(depth):
        frontier = list({id(c): c for op in frontier for o in op.outputs for c in o.consumers
                         if id(c) not in seen}.values())
        seen.update(id(c) for c in frontier)
        unread += [o for op in frontier for o in op.outputs if not o.consumers]
    return unread


@graph_pass("recompose_attention", "turn core ATen's decomposed scaled_dot_product_attention back into one op")
def run(graph: Graph, cx) -> None:
    graph.prune(_unread_branches(graph))  # e.g. nn.MultiheadAttention's unused averaged attention weights
    for root in list(graph.ops):
        if root.type not in _MATMULS or len(root.inputs) != 2:
            continue
        found = _match(root)
        if found is None or not _closed(found):
            continue
        _resolve_mask(graph, found)
        if not _closed(found):
            continue
        new = _replace(graph, found)
        _cancelling_permutes(graph, new.outputs[0])
        log.debug("recomposed scaled_dot_product_attention at %s", new.name)
