"""Put decomposed normalisations back together (ATen level, before lowering).

=====================================================================  =============================
chain (``x`` the input)                                                 becomes
=====================================================================  =============================
``x * rsqrt(mean(pow(x, 2), dims, keepdim) + eps)`` [``* weight``]      ``aten.rms_norm.default``
(core ATen's ``rms_norm``; ``dims`` the trailing dims, ``weight`` a
constant over them)
``(x - u) / sqrt(v + eps)`` [``* w + b``], ``u = mean(x, dims, keepdim)``,  ``aten.layer_norm.default``
``v = mean((x - u) ** 2, dims, keepdim)`` (hand-written; also ``* rsqrt``; (channel dim of NCHW:
``dims`` trailing, or the channel dim 1 of a 4-D tensor as in ConvNeXt's  between permutes to NHWC
``LayerNorm2d``; ``w``/``b`` constants over those dims)                  and back)
``_native_batch_norm_legit.no_stats(x, repeat(w, [1]), ...)`` (and      the same op reading ``w``
``_no_training``): core ATen's ``instance_norm``, weights and running   (the repeat is dropped)
statistics repeated once per batch item, a no-op for batch 1
=====================================================================  =============================

Every intermediate value must have no other user; the new op takes over the chain's output
operand and the union of its provenance.
"""
from __future__ import annotations

import logging
import math

from ..ir import Graph, Operand, Operator
from ..ir.vocab import is_aten
from ._match import Match, arg, commuted, number
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

_MULS = ("aten.mul.Tensor",)
#: what core ATen's instance_norm calls (input statistics / running statistics)
_INSTANCE_NORM_CORE = ("aten._native_batch_norm_legit.no_stats", "aten._native_batch_norm_legit_no_training.default")
_REPEATED = ("weight", "bias", "running_mean", "running_var")


def _trailing_dims(dims, rank: int) -> int | None:
    """How many trailing dims ``dims`` names (None unless they are exactly the last k)."""
    if not isinstance(dims, (list, tuple)) or not dims or not all(isinstance(d, int) for d in dims):
        return None
    norm = sorted(d % rank for d in dims)
    return len(norm) if norm == list(range(rank - len(norm), rank)) else None


def _rms_of(m: Match, x: Operand, r: Operand | None) -> tuple[list, float] | None:
    """``(normalized_shape, eps)`` when ``r`` is ``rsqrt(mean(x ** 2, trailing, keepdim) + eps)``."""
    rsqrt = m.take(r, "aten.rsqrt.default")
    add = m.take(rsqrt.inputs[0] if rsqrt else None, "aten.add.Scalar", "aten.add.Tensor")
    if add is None or add.params.get("alpha", 1) != 1:
        return None
    eps = number(add, "other")
    mean = m.take(arg(add, "self"), "aten.mean.dim")
    if eps is None or mean is None or not mean.params.get("keepdim"):
        return None
    sq = m.take(mean.inputs[0], "aten.pow.Tensor_Scalar")
    if sq is None or sq.inputs[0] is not x or number(sq, "exponent") != 2 or x.shape is None:
        return None
    k = _trailing_dims(mean.params.get("dim"), len(x.shape))
    if k is None:
        return None
    shape = list(x.shape[len(x.shape) - k:])
    return (shape, float(eps)) if all(isinstance(d, int) for d in shape) else None


def _rms_norm(graph: Graph, root: Operator) -> bool:
    """Replace the rms-norm chain ending at ``root`` (a ``mul``); True if it did."""
    for a, b in commuted(root):
        m = Match()
        weight = None
        inner = m.take(a, *_MULS) if b is not None and _is_const(b) else None
        if inner is not None:
            weight = b
            pairs = commuted(inner)
        else:
            m = Match()
            pairs = [(a, b)]
        for x, r in pairs:
            if x is None:
                continue
            sub = Match()
            sub.ops = list(m.ops)
            found = _rms_of(sub, x, r)
            if found is None:
                continue
            shape, eps = found
            if weight is not None and (weight.shape is None or math.prod(weight.shape) != math.prod(shape)
                                       or len(weight.shape) > len(shape)):
                continue
            inputs = [x] + ([weight] if weight is not None else [])
            new = replace_chain(graph, root, sub.ops, "aten.rms_norm.default", inputs,
                                params={"normalized_shape": shape, "eps": eps},
                                input_names=["input", "weight"][:len(inputs)])
            new.meta["target"] = "aten.rms_norm.default"
            new.meta["recomposed_from"] = [o.name for o in sub.ops] + [new.name]
            return True
    return False


def _is_const(opd: Operand) -> bool:
    p = opd.producer
    return p is not None and p.type == "pnnx.Attribute"


def _unrepeat_weights(graph: Graph, op: Operator) -> bool:
    changed = False
    for k, (name, opd) in enumerate(zip(op.input_names, op.inputs)):
        rep = opd.producer
        if name not in _REPEATED or rep is None or rep.type != "aten.repeat.default":
            continue
        repeats = rep.params.get("repeats")
        if not isinstance(repeats, (list, tuple)) or any(r != 1 for r in repeats) or not _is_const(rep.inputs[0]):
            continue
        if rep.inputs[0].shape != opd.shape:
            continue
        graph.set_input(op, k, rep.inputs[0])
        if not opd.consumers:
            graph.remove_op(rep)
        changed = True
    return changed


# ---------------------------------------------------------------------------- hand-written layer norm
def _sub_mean(m: Match, d: Operand | None, sole: bool = True) -> tuple[Operand, Operator] | None:
    """``(x, mean_op)`` when ``d`` is ``x - mean(x, dims, keepdim=True)``."""
    sub = m.take(d, "aten.sub.Tensor", sole=sole)
    if sub is None or sub.params.get("alpha", 1) != 1:
        return None
    x, u = arg(sub, "self"), arg(sub, "other")
    mean = m.take(u, "aten.mean.dim", sole=False)
    if mean is None or mean.inputs[0] is not x or not mean.params.get("keepdim"):
        return None
    return x, mean


def _inv_std(m: Match, s: Operand | None, divides: bool) -> tuple[Operand, float] | None:
    """``(d2, eps)`` when ``s`` is ``sqrt(mean(d2 ** 2) + eps)`` (``rsqrt`` when multiplying)."""
    root = m.take(s, "aten.sqrt.default" if divides else "aten.rsqrt.default")
    add = m.take(root.inputs[0] if root else None, "aten.add.Scalar", "aten.add.Tensor")
    if add is None or add.params.get("alpha", 1) != 1 or number(add, "other") is None:
        return None
    var = m.take(arg(add, "self"), "aten.mean.dim")
    sq = m.take(var.inputs[0] if var else None, "aten.pow.Tensor_Scalar")
    if sq is None or number(sq, "exponent") != 2 or not var.params.get("keepdim"):
        return None
    return sq.inputs[0], float(number(add, "other")), var


def _normalized(m: Match, y: Operand | None):
    """``(x, dims, eps)`` when ``y`` is a hand-written ``(x - mean) / std`` over ``dims``."""
    op = m.take(y, "aten.div.Tensor", "aten.mul.Tensor")
    if op is None:
        return None
    d1, s = arg(op, "self"), arg(op, "other")
    found = _inv_std(m, s, op.type == "aten.div.Tensor")
    if found is None:
        return None
    d2, eps, var = found
    first = _sub_mean(m, d1, sole=d1 is not d2)
    if first is None or (d2 is not d1 and _sub_mean(m, d2) is None):
        return None
    x, mean = first
    if d2 is not d1 and (d2.producer.inputs[0] is not x or arg(d2.producer, "other") is not mean.outputs[0]):
        return None
    dims = mean.params.get("dim")
    if var.params.get("dim") != dims or x.shape is None:
        return None
    return x, [d % len(x.shape) for d in dims], eps


def _affine_of(m: Match, root: Operator) -> tuple[Operand, Operand | None, Operand] | None:
    """``(w, b, y)`` when ``root`` is ``y * w + b`` or ``y * w`` (either operand order) with
    constant ``w``, ``b`` and ``y`` a division/product (the normalisation)."""
    b, top = None, root
    if root.type == "aten.add.Tensor":
        if root.params.get("alpha", 1) != 1:
            return None
        for a, c in commuted(root):
            if c is not None and _is_const(c) and m.take(a, "aten.mul.Tensor") is not None:
                b, top = c, a.producer
                break
        else:
            return None
    if top.type != "aten.mul.Tensor":
        return None
    for a, c in commuted(top):
        if c is not None and _is_const(c) and a is not None and a.producer is not None \
                and a.producer.type in ("aten.div.Tensor", "aten.mul.Tensor"):
            return c, b, a
    return None


def _layer_norm(graph: Graph, root: Operator) -> bool:
    m = Match()
    affine = _affine_of(m, root)
    if affine is None:
        return False
    w, b, y = affine
    found = _normalized(m, y)
    if found is None:
        return False
    x, dims, eps = found
    rank = len(x.shape)
    trailing = sorted(dims) == list(range(rank - len(dims), rank))
    channel = rank == 4 and dims == [1]
    if not (trailing or channel) or not all(isinstance(x.shape[d], int) for d in dims):
        return False
    size = math.prod(x.shape[d] for d in dims)
    for c in (w, b):
        if c is not None and (c.shape is None or math.prod(c.shape) != size):
            return False
        if c is not None and channel and [d for d in c.shape if d != 1] and list(c.shape)[-3:] != [size, 1, 1]:
            return False
        if c is not None and trailing and _strip_ones(c.shape) != _strip_ones([x.shape[d] for d in sorted(dims)]):
            return False
    inputs = [x, w] + ([b] if b is not None else [])
    names = ["input", "weight", "bias"][:len(inputs)]
    params = {"normalized_shape": [x.shape[d] for d in sorted(dims)], "eps": eps}
    if trailing:
        new = replace_chain(graph, root, m.ops, "aten.layer_norm.default", inputs, params=params, input_names=names)
        new.meta["target"] = "aten.layer_norm.default"
        return True
    nhwc = [x.shape[0], x.shape[2], x.shape[3], x.shape[1]]
    to_nhwc = _aten_op(graph, root, "aten.permute.default", [x], {"dims": [0, 2, 3, 1]}, nhwc, ["self"], "nhwc")
    ln = _aten_op(graph, root, "aten.layer_norm.default", [to_nhwc] + inputs[1:], params, nhwc, names, "ln")
    new = replace_chain(graph, root, m.ops, "aten.permute.default", [ln], params={"dims": [0, 3, 1, 2]},
                        input_names=["self"])
    new.meta["target"] = "aten.permute.default"
    return True


def _strip_ones(shape) -> list:
    """``shape`` without its leading 1s."""
    shape = list(shape)
    while shape and shape[0] == 1:
        shape.pop(0)
    return shape


def _aten_op(graph: Graph, before: Operator, type_: str, inputs, params, shape, names, suffix) -> Operand:
    """An ATen op (lowered like exported ones) inserted before ``before``; returns its output."""
    out = graph.new_operand(graph.unique_operand_name(f"{before.name}_{suffix}"), dtype=before.outputs[0].dtype,
                            shape=list(shape))
    op = graph.add_op(type_, f"{before.name}_{suffix}", list(inputs), [out], params=params, input_names=names,
                      provenance=before.provenance, before=before)
    op.meta["target"] = type_
    for k in ("source", "module_stack"):
        if k in before.meta:
            op.meta[k] = before.meta[k]
    return out


@graph_pass("recompose_norms", "turn decomposed rms_norm chains back into one op; drop instance norm's weight repeats")
def run(graph: Graph, cx) -> None:
    for op in list(graph.ops):
        if op.type in _INSTANCE_NORM_CORE:
            _unrepeat_weights(graph, op)
    for root in reversed(list(graph.ops)):  # outermost mul first: it may carry the weight
        if root.type not in _MULS or root not in graph.ops or not is_aten(root) or len(root.outputs) != 1:
            continue
        if _rms_norm(graph, root):
            log.debug("recomposed rms_norm at %s", root.name)
    for root in reversed(list(graph.ops)):
        if root.type in ("aten.add.Tensor", "aten.mul.Tensor") and root in graph.ops and is_aten(root) \
                and _layer_norm(graph, root):
            log.debug("recomposed layer_norm at %s", root.name)
