"""Fuse rotary position embeddings into ncnn's ``RotaryEmbed`` (ATen level, before lowering).

The rotation Hugging Face's LLaMA-family models (and most RoPE code) apply to queries and keys::

    y = x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x[..., E/2:], x[..., :E/2], -1)

(``mul``/``add`` in either operand order) becomes one pnnx ``nn.RotaryEmbed`` op reading ``x``
and the first halves of ``cos`` and ``sin`` as ``(L, E/2)`` constants (ncnn's ``RotaryEmbed``,
non-interleaved: ``y1 = x1*cos - x2*sin``, ``y2 = x1*sin + x2*cos``, the same arithmetic). It
applies when ``x`` is ``(.., heads, L, E)``, ``cos``/``sin`` are constants broadcasting as
``(L, E)`` whose two halves are equal (``cat(freqs, freqs)``), so they hold what ncnn needs —
or such constants cut along ``L`` at run time: folded at the largest length and cut to the
run-time one (a dynamic length), or folded over every position and cut to the run-time window
(a decode step's positions after its cache); the half tables are cut the same way.
"""
from __future__ import annotations

import logging

import numpy as np

from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
from ._match import const_array
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

_MUL, _ADD = "aten.mul.Tensor", "aten.add.Tensor"


def _slice(opd: Operand, x: Operand, start: int, half: int) -> Operator | None:
    p = opd.producer
    if p is None or p.type != "aten.slice.Tensor" or p.inputs[0] is not x or p.params.get("step", 1) != 1:
        return None
    rank = len(x.shape)
    if p.params.get("dim", 0) % rank != rank - 1 or (p.params.get("start") or 0) != start:
        return None
    end = p.params.get("end")
    if start == 0 and end != half:
        return None
    if start == half and not (end is None or (isinstance(end, int) and end >= 2 * half)):
        return None
    return p


def _rotate_half(opd: Operand) -> tuple[Operand, list[Operator]] | None:
    """``(x, ops)`` when ``opd`` is ``cat(-x[..., E/2:], x[..., :E/2], -1)``."""
    cat = opd.producer
    if cat is None or cat.type != "aten.cat.default" or len(cat.inputs) != 2:
        return None
    neg, low = cat.inputs
    n = neg.producer
    if n is None or n.type != "aten.neg.default":
        return None
    hi = n.inputs[0].producer
    x = hi.inputs[0] if hi is not None and hi.inputs else None
    if x is None or x.shape is None or not isinstance(x.shape[-1], int) or x.shape[-1] % 2:
        return None
    rank, half = len(x.shape), x.shape[-1] // 2
    if cat.params.get("dim", 0) % rank != rank - 1:
        return None
    a, b = _slice(n.inputs[0], x, half, half), _slice(low, x, 0, half)
    if a is None or b is None:
        return None
    return x, [cat, n, a, b]


def _table(opd: Operand) -> tuple[np.ndarray, Operator | None] | None:
    """A cos/sin table: a constant, or a constant cut along the length axis at run time —
    folded at the largest length and cut to the run-time one, or folded over every position
    and cut to the run-time window (``(table, the slice cutting it)``)."""
    value = const_array(opd)
    if value is not None:
        return value, None
    p = opd.producer
    if p is None or p.type != "aten.slice.Tensor" or opd.shape is None or p.params.get("step", 1) != 1 or \
            p.params.get("dim", 0) % len(opd.shape) != len(opd.shape) - 2:
        return None
    value = const_array(p.inputs[0])
    return (value, p) if value is not None else None


def _half_table(value: np.ndarray, x: Operand, dynamic: bool) -> np.ndarray | None:
    """``value`` broadcast as ``(L, E)`` over ``x`` → its first half ``(L, E/2)``, when the two
    halves are equal; else None (with ``dynamic``, L is the table's own, largest length)."""
    L, E = x.shape[-2], x.shape[-1]
    v = np.asarray(value, np.float32)
    if v.ndim < 2 or (not dynamic and v.shape[-2] != L) or v.shape[-1] != E or any(d != 1 for d in v.shape[:-2]) \
            or len(v.shape) > len(x.shape):
        return None
    v = v.reshape(v.shape[-2], E)
    if not np.array_equal(v[:, : E // 2], v[:, E // 2:]):
        return None
    return np.ascontiguousarray(v[:, : E // 2])


def _products(add: Operator) -> tuple | None:
    """``(x, cos, rotated, sin, [mul ops])`` for ``x * cos + rotated * sin`` in any order."""
    if add.params.get("alpha", 1) != 1 or len(add.inputs) != 2:
        return None
    muls = [i.producer for i in add.inputs]
    if any(m is None or m.type != _MUL or len(m.inputs) != 2 for m in muls):
        return None
    for first, second in (muls, muls[::-1]):
        for x, cos in (first.inputs, first.inputs[::-1]):
            for rot, sin in (second.inputs, second.inputs[::-1]):
                found = _rotate_half(rot)
                if found is not None and found[0] is x and _table(cos) is not None and _table(sin) is not None:
                    return x, cos, sin, [first, second] + found[1]
    return None


def _closed(ops: list[Operator], root: Operator) -> bool:
    inside = {id(o) for o in ops} | {id(root)}
    return all(all(id(c) in inside for o in op.outputs for c in o.consumers) for op in ops)


@graph_pass("fuse_rotary_embedding", "x*cos + rotate_half(x)*sin becomes ncnn's RotaryEmbed")
def run(graph: Graph, cx) -> None:
    shared: dict[int, Operand] = {}
    replaced: list[Operand] = []
    for add in graph.ops_of_type(_ADD):
        found = _products(add)
        if found is None:
            continue
        x, cos, sin, ops = found
        if x.shape is None or len(x.shape) < 3 or not isinstance(x.shape[-1], int):
            continue
        sources = [_table(t) for t in (cos, sin)]
        cut = [c is not None for _, c in sources]
        if any(cut) != all(cut) or (not isinstance(x.shape[-2], int) and not all(cut)):
            continue
        tables = [_half_table(value, x, all(cut)) for value, _ in sources]
        if any(t is None for t in tables) or not _closed(ops, add):
            continue
        consts = []
        for name, source, table, (_, cutter) in zip(("cos", "sin"), (cos, sin), tables, sources):
            if id(source) not in shared:  # queries and keys share the tables
                em = AtenEmitter(graph, min(source.consumers, key=graph.ops.index))
                opd = em.constant(table, name=f"{add.name}_{name}")
                if cutter is not None:  # cut at run time like the table it replaces
                    bounds = list(zip(cutter.input_names[1:], cutter.inputs[1:]))
                    opd = em.op("aten.slice.Tensor", [("self", opd)] + bounds, shape=[x.shape[-2], table.shape[1]],
                                dtype="f32", name=f"{add.name}_{name}_cut", dim=0,
                                start=cutter.params.get("start"), end=cutter.params.get("end"), step=1)
                shared[id(source)] = opd
            consts.append(shared[id(source)])
        new = replace_chain(graph, add, ops, "nn.RotaryEmbed", [x] + consts, params={"interleaved": False})
        replaced += [cos, sin]
        log.debug("fused rotary embedding at %s", new.name)
    graph.prune([o for o in replaced if not o.consumers])
