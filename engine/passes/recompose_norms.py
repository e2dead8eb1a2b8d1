"""Put decomposed normalisations back together (ATen level, before lowering).

=====================================================================  =============================
chain (``x`` the input)                                                 becomes
=====================================================================  =============================
``x * rsqrt(mean(pow(x, 2), dims, keepdim) + eps)`` [``* weight``]      ``aten.rms_norm.default``
(core ATen's ``rms_norm``; ``dims`` the trailing dims, ``weight`` a
constant over them)
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
from ._rewrite import replace_chain
from .manager import graph_pass
from .recompose_activations import _arg, _commuted, _Match, _number

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


def _rms_of(m: _Match, x: Operand, r: Operand | None) -> tuple[list, float] | None:
    """``(normalized_shape, eps)`` when ``r`` is ``rsqrt(mean(x ** 2, trailing, keepdim) + eps)``."""
    rsqrt = m.take(r, "aten.rsqrt.default")
    add = m.take(rsqrt.inputs[0] if rsqrt else None, "aten.add.Scalar", "aten.add.Tensor")
    if add is None or add.params.get("alpha", 1) != 1:
        return None
    eps = _number(add, "other")
    mean = m.take(_arg(add, "self"), "aten.mean.dim")
    if eps is None or mean is None or not mean.params.get("keepdim"):
        return None
    sq = m.take(mean.inputs[0], "aten.pow.Tensor_Scalar")
    if sq is None or sq.inputs[0] is not x or _number(sq, "exponent") != 2 or x.shape is None:
        return None
    k = _trailing_dims(mean.params.get("dim"), len(x.shape))
    if k is None:
        return None
    shape = list(x.shape[len(x.shape) - k:])
    return (shape, float(eps)) if all(isinstance(d, int) for d in shape) else None


def _rms_norm(graph: Graph, root: Operator) -> bool:
    """Replace the rms-norm chain ending at ``root`` (a ``mul``); True if it did."""
    for a, b in _commuted(root):
        m = _Match()
        weight = None
        inner = m.take(a, *_MULS) if b is not None and _is_const(b) else None
        if inner is not None:
            weight = b
            pairs = _commuted(inner)
        else:
            m = _Match()
            pairs = [(a, b)]
        for x, r in pairs:
            if x is None:
                continue
            sub = _Match()
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


@graph_pass("recompose_norms", "turn decomposed rms_norm chains back into one op; drop instance norm's weight repeats")
def run(graph: Graph, cx) -> None:
    for op in list(graph.ops):
        if op.type in _INSTANCE_NORM_CORE:
            _unrepeat_weights(graph, op)
    alive = set(map(id, graph.ops))
    for root in reversed(list(graph.ops)):  # outermost mul first: it may carry the weight
        if id(root) not in alive or root.type not in _MULS or not is_aten(root) or len(root.outputs) != 1:
            continue
        if _rms_norm(graph, root):
            log.debug("recomposed rms_norm at %s", root.name)
            alive = set(map(id, graph.ops))
