"""Fold values computed from ``arange(start, end)`` with a run-time ``start``: computed over every
position, cut to the run-time window by ncnn (ATen level, after ``fold_dynamic_constants``).

A decoder's decode step numbers its new tokens after the cached ones: ``arange(past, past + n)``
with ``past`` a cache tensor's run-time length, and its rotary tables (``cos``/``sin`` of the
positions times the inverse frequencies) are computed from those positions. Their shapes are
static (``n`` tokens) but their values depend on a size, so neither ``fold_constants`` nor
``fold_dynamic_constants`` can compute them, and ncnn has no ``arange``.

Such a value ``v`` (a shape value made of one window ``arange`` and constants) is computed once
with the ``arange`` widened to ``arange(0, E)``, ``E`` the largest ``end``, giving a table ``T``
with one more axis length; ``v`` becomes ``T[start:end]`` along the one axis that grew (an
``aten.slice.Tensor`` with the ``arange``'s own run-time bounds: an ncnn ``Crop`` measuring the
cache). That is exact when every operator on the way is position-wise along that axis; it is
checked numerically at the smallest, a middle and the largest sizes, and a value that fails stays
unfolded (and is reported by the lowering as before).
"""
from __future__ import annotations

import logging

import numpy as np

from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
from .fold_constants import FOLD_BUDGET
from .fold_dynamic_constants import _Evaluator, _Shapes
from .manager import graph_pass

log = logging.getLogger(__name__)

_ARANGES = ("aten.arange.start", "aten.arange.start_step")


def _window_arange(op: Operator) -> bool:
    """``arange(start, end)`` of a run-time start, step 1 and a static length."""
    if op.type not in _ARANGES:
        return False
    out = op.outputs[0]
    return (op.named_input("start") is not None and op.named_input("step") is None
            and op.params.get("step", 1) == 1 and out.shape is not None and len(out.shape) == 1
            and isinstance(out.shape[0], int))


def _bindings(shapes: _Shapes, symbols: dict) -> list[dict[str, int]] | None:
    """Every unbound symbol at its largest, then its smallest, traced and middle sizes."""
    hi, others = {}, [{}, {}, {}]
    for n, (lo, top) in shapes.ranges.items():
        if lo is None or top is None:
            return None
        hint = symbols.get(n, {}).get("hint")
        hi[n], others[0][n], others[2][n] = int(top), int(lo), (int(lo) + int(top)) // 2
        others[1][n] = int(hint) if isinstance(hint, int) and lo <= hint <= top else (int(lo) + int(top)) // 2
    return [hi] + others


class _Window:
    """The values one window ``arange`` feeds, and their folding."""

    def __init__(self, graph: Graph, shapes: _Shapes, arange: Operator, budget: int):
        self.graph, self.shapes, self.arange = graph, shapes, arange
        self.eval = _Evaluator(graph, budget)

    def frontier(self) -> tuple[list[Operand], set[int]]:
        """The shape values computed from the arange and read by run-time operators, and the ids
        of every operand on the way."""
        out, inside, stack = [], set(), [self.arange.outputs[0]]
        while stack:
            v = stack.pop()
            if id(v) in inside:
                continue
            inside.add(id(v))
            runtime = False
            for c in v.consumers:
                if c.outputs and all(id(o) in self.shapes.values for o in c.outputs):
                    stack.extend(c.outputs)
                else:
                    runtime = True
            if runtime and v.shape is not None and all(isinstance(d, int) for d in v.shape):
                out.append(v)
        return out, inside

    def _widen(self, names: set[str], end: int):
        """A ``prepare`` hook for the evaluator: the arange becomes ``arange(0, end)`` and the
        shapes after it unknown (so they are computed, not checked)."""
        a_name = self.arange.outputs[0].name

        def prepare(g: Graph) -> None:
            old = g.operands[a_name]
            em = AtenEmitter(g, old.producer)
            wide = em.constant(np.arange(end, dtype=np.int64), name=f"{a_name}_wide")
            g.replace_all_uses(old, wide)
            for n in names:
                if n in g.operands and n != a_name:
                    g.operands[n].shape = None

        return prepare

    def fold(self, binds: list[dict[str, int]]) -> int:
        values, inside = self.frontier()
        if not values:
            return 0
        a = self.arange.outputs[0]
        names = [v.name for v in values]
        try:
            at = [self.eval.values(names + [a.name], b) for b in binds]
        except Exception as e:  # noqa: BLE001 - a value numpy cannot compute stays unfolded
            log.debug("window values of %s not computable: %s", self.arange.name, e)
            return 0
        starts = [b.get(a.name) for b in at]
        if any(s is None or s.size == 0 or s[0] < 0 for s in starts):
            return 0
        end = int(starts[0][-1]) + 1
        inside_names = {o.name for op in self.graph.ops for o in op.outputs if id(o) in inside}
        try:
            wide = self.eval.values(names, binds[0], prepare=self._widen(inside_names, end))
        except Exception as e:  # noqa: BLE001
            log.debug("window values of %s not computable over every position: %s", self.arange.name, e)
            return 0
        folded = 0
        for v in values:
            axis = self._axis(v, wide.get(v.name), [(int(s[0]), b.get(v.name)) for s, b in zip(starts, at)])
            if axis is not None:
                self._replace(v, wide[v.name], axis)
                folded += 1
        return folded

    @staticmethod
    def _axis(v: Operand, table: np.ndarray | None, samples: list[tuple[int, np.ndarray | None]]) -> int | None:
        """The axis along which ``v`` is the window ``table[start:start+n]`` at every sample."""
        if table is None or table.ndim != len(v.shape):
            return None
        grown = [k for k, (t, d) in enumerate(zip(table.shape, v.shape)) if t != d]
        if len(grown) != 1:
            return None
        axis, n = grown[0], v.shape[grown[0]]
        for start, value in samples:
            if value is None or start + n > table.shape[axis]:
                return None
            cut = np.take(table, np.arange(start, start + n), axis=axis)
            if cut.shape != value.shape or not np.array_equal(cut, value, equal_nan=value.dtype.kind == "f"):
                log.debug("%s is not a window of its table along axis %d", v.name, axis)
                return None
        return axis

    def _replace(self, v: Operand, table: np.ndarray, axis: int) -> None:
        first = min(v.consumers, key=self.graph.ops.index)
        em = AtenEmitter(self.graph, first)
        em.base = f"{v.name}_table"
        const = em.constant(np.ascontiguousarray(table.astype(table.dtype, copy=False)), name=f"{v.name}_table")
        const.producer.provenance = v.producer.provenance
        const.producer.meta["folded_from"] = v.producer.type
        start, end = self.arange.named_input("start"), self.arange.named_input("end")
        bounds = [("self", const), ("start", start)] + ([("end", end)] if end is not None else [])
        end_param = f"%{end.name}" if end is not None else self.arange.params.get("end")
        cut = em.op("aten.slice.Tensor", bounds, shape=list(v.shape), dtype=v.dtype, name=f"{v.name}_window",
                    dim=axis, start=f"%{start.name}", end=end_param, step=1)
        self.graph.replace_all_uses(v, cut)
        self.graph.prune([v])
        log.debug("folded %s as a window of its %s table", v.name, list(table.shape))


@graph_pass("fold_window_constants", "values made from arange(start, end) of a run-time start: fold over every "
                                     "position, cut to the window at run time")
def run(graph: Graph, cx) -> None:
    aranges = [op for op in graph.ops if _window_arange(op)]
    if not aranges:
        return
    shapes = _Shapes(graph)
    binds = _bindings(shapes, graph.meta.get("symbols", {}))
    if binds is None:
        return
    budget = getattr(getattr(cx, "options", None), "fold_budget", None) or FOLD_BUDGET
    folded = sum(_Window(graph, shapes, a, budget).fold(binds) for a in aranges)
    if folded:
        graph.remove_dead(keep=lambda op: op.type == "pnnx.Input")
