"""Fold values computed from run-time positions ``past + arange(n)``: computed over every
position, cut to the run-time window by ncnn (ATen level, after ``fold_dynamic_constants``).

A decoder's decode step numbers its new tokens after the cached ones — ``arange(past, past + n)``
or ``arange(n) + past``, ``past`` a cache tensor's run-time length — and computes its rotary
tables (``cos``/``sin`` of the positions times the inverse frequencies) and masks from them.
Their shapes are static (``n`` tokens) but their values depend on a size, so neither
``fold_constants`` nor ``fold_dynamic_constants`` can compute them, and ncnn has no ``arange``.

A *position source* is an operator making a 1-D integer shape value of static length from a
scalar size; it must hold ``n`` consecutive integers starting at ``s + c`` (``s`` the one symbol
it depends on, ``c`` a constant), checked at the largest, smallest, traced and middle sizes.
Each value ``v`` computed from it and read by a run-time operator is computed once more with the
source widened to ``arange(0, E)`` (``E`` its largest end), giving a table ``T`` one axis longer;
``v`` becomes ``T[s + c : s + c + n]`` along that axis (an ``aten.slice.Tensor`` with run-time
bounds: an ncnn ``Crop`` measuring the cache). That is exact when every operator on the way is
position-wise along that axis; it is checked at the same sizes, and a value that fails stays
unfolded (and is reported by the lowering as before).
"""
from __future__ import annotations

import logging

import numpy as np

from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
from .fold_constants import FOLD_BUDGET
from .fold_dynamic_constants import _SYMBOL, _Evaluator, _Shapes, offset_size_operand, symbol_ranges
from .manager import graph_pass

log = logging.getLogger(__name__)

_INT = ("i64", "i32", "i16", "i8", "u8")


def _sources(graph: Graph, shapes: _Shapes) -> list[Operator]:
    """Operators making a static-length integer vector from a scalar run-time size."""
    out = []
    for op in graph.ops:
        if len(op.outputs) != 1 or id(op.outputs[0]) not in shapes.values:
            continue
        o = op.outputs[0]
        if o.dtype not in _INT or o.shape is None or len(o.shape) != 1 or not isinstance(o.shape[0], int):
            continue
        if any(i.shape == [] and "const" not in i.meta and id(i) in shapes.values for i in op.inputs):
            out.append(op)
    return out


def _symbol_of(op: Operator) -> str | None:
    """The one symbol ``op`` depends on through sizes (``sym_size`` of a dynamic dim)."""
    found, seen, stack = set(), set(), list(op.inputs)
    while stack:
        p = stack.pop().producer
        if p is None or id(p) in seen:
            continue
        seen.add(id(p))
        if p.type == "aten.sym_size.int":
            shape = p.inputs[0].shape or []
            d = shape[p.params["dim"]] if -len(shape) <= p.params["dim"] < len(shape) else None
            if not isinstance(d, str) or not _SYMBOL.fullmatch(d):
                return None
            found.add(d)
        else:
            stack.extend(p.inputs)
    return found.pop() if len(found) == 1 else None


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
    """The values one position source feeds, and their folding."""

    def __init__(self, graph: Graph, shapes: _Shapes, source: Operator, symbol: str, budget: int):
        self.graph, self.shapes, self.source, self.symbol = graph, shapes, source, symbol
        self.eval = _Evaluator(graph, budget)
        self.offset = 0
        self.bounds: dict[int, tuple[Operand, Operand]] = {}

    def frontier(self) -> tuple[list[Operand], set[str]]:
        """The shape values computed from the source and read by run-time operators, and the
        names of every operand on the way."""
        out, inside, stack = [], {}, [self.source.outputs[0]]
        while stack:
            v = stack.pop()
            if id(v) in inside:
                continue
            inside[id(v)] = v.name
            runtime = False
            for c in v.consumers:
                if c.outputs and all(id(o) in self.shapes.values for o in c.outputs):
                    stack.extend(c.outputs)
                else:
                    runtime = True
            if runtime and v.shape is not None and all(isinstance(d, int) for d in v.shape):
                out.append(v)
        return out, set(inside.values())

    def _widen(self, names: set[str], end: int):
        """A ``prepare`` hook for the evaluator: the source becomes ``arange(0, end)`` and the
        shapes after it unknown (so they are computed, not checked)."""
        src = self.source.outputs[0].name

        def prepare(g: Graph) -> None:
            old = g.operands[src]
            wide = AtenEmitter(g, old.producer).constant(np.arange(end, dtype=np.int64), name=f"{src}_wide")
            g.replace_all_uses(old, wide)
            for n in names:
                if n in g.operands and n != src:
                    g.operands[n].shape = None

        return prepare

    def _starts(self, binds: list[dict[str, int]], at: list[dict[str, np.ndarray]]) -> list[int] | None:
        """The source's first position at each size, when it holds consecutive positions
        ``symbol + offset + arange(n)`` (sets ``offset``)."""
        src = self.source.outputs[0]
        n, starts = src.shape[0], []
        for b, values in zip(binds, at):
            pos = values.get(src.name)
            if pos is None or pos.size != n or n == 0 or not np.array_equal(pos, np.arange(pos[0], pos[0] + n)):
                return None
            starts.append(int(pos[0]))
        offsets = {s - b[self.symbol] for s, b in zip(starts, binds)}
        if len(offsets) != 1 or min(starts) < 0:
            return None
        self.offset = offsets.pop()
        return starts

    def fold(self, binds: list[dict[str, int]]) -> int:
        values, inside = self.frontier()
        if not values:
            return 0
        src = self.source.outputs[0]
        names = [v.name for v in values]
        try:
            at = [self.eval.values(names + [src.name], b) for b in binds]
            starts = self._starts(binds, at)
            if starts is None:
                return 0
            wide = self.eval.values(names, binds[0], prepare=self._widen(inside, max(starts) + src.shape[0]))
        except Exception as e:  # noqa: BLE001 - a value numpy cannot compute stays unfolded
            log.debug("values of the positions %s not computable: %s", self.source.name, e)
            return 0
        folded = 0
        for v in values:
            axis = self._axis(v, wide.get(v.name), [(s, b.get(v.name)) for s, b in zip(starts, at)])
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

    def _window(self, n: int) -> tuple[Operand, Operand]:
        """The run-time bounds ``(s + c, s + c + n)`` as size operands."""
        if n not in self.bounds:
            c = self.offset
            self.bounds[n] = (offset_size_operand(self.graph, f"{self.symbol}{c:+d}"),
                              offset_size_operand(self.graph, f"{self.symbol}{c + n:+d}"))
        return self.bounds[n]

    def _replace(self, v: Operand, table: np.ndarray, axis: int) -> None:
        first = min(v.consumers, key=self.graph.ops.index)
        em = AtenEmitter(self.graph, first)
        em.base = f"{v.name}_table"
        const = em.constant(np.ascontiguousarray(table.astype(table.dtype, copy=False)), name=f"{v.name}_table")
        const.producer.provenance = v.producer.provenance
        const.producer.meta["folded_from"] = v.producer.type
        start, end = self._window(v.shape[axis])
        cut = em.op("aten.slice.Tensor", [("self", const), ("start", start), ("end", end)], shape=list(v.shape),
                    dtype=v.dtype, name=f"{v.name}_window", dim=axis, start=f"%{start.name}", end=f"%{end.name}",
                    step=1)
        self.graph.replace_all_uses(v, cut)
        self.graph.prune([v])
        log.debug("folded %s as a window of its %s table", v.name, list(table.shape))


@graph_pass("fold_window_constants", "values made from run-time positions past + arange(n): fold over every "
                                     "position, cut to the window at run time")
def run(graph: Graph, cx) -> None:
    if not symbol_ranges(graph):  # a static graph: no run-time position (before a scan of it)
        return
    shapes = _Shapes(graph)
    sources = [(op, sym) for op in _sources(graph, shapes) if (sym := _symbol_of(op)) is not None]
    binds = _bindings(shapes, graph.meta.get("symbols", {})) if sources else None
    if binds is None:
        return
    budget = getattr(getattr(cx, "options", None), "fold_budget", None) or FOLD_BUDGET
    folded = sum(_Window(graph, shapes, op, sym, budget).fold(binds) for op, sym in sources)
    if folded:
        graph.remove_dead(keep=lambda op: op.type == "pnnx.Input")
