"""Structural snapshots of a graph: what the pass manager keeps after every pass.

A :class:`Snapshot` is the graph's operators at one moment, in order, as :class:`OpState`
objects (the operator's name and its line of the text form, :func:`engine.ir.text.format_op`).
An operator that has not changed since it was last snapshotted keeps its state object, so
successive snapshots share every unchanged operator and taking one costs a walk over the
order plus formatting the operators that changed. Whether an operator changed is read from
its change counts (see :class:`engine.ir.graph.Operator`): its own count, and the
:class:`~engine.ir.graph.TrackedDict` versions of its ``params`` and ``attrs``; an operator
whose dicts are plain ones (assigned by a pass) is formatted every time. When nothing at all
changed since the graph's last snapshot — the same order list, the same header, no operator
with plain dicts, and no counted change anywhere (:data:`engine.ir.graph.change_tick`) — that
snapshot is returned again without a walk: most passes change nothing on most models.

:attr:`Snapshot.text` is exactly :func:`engine.ir.text.format_graph` of the graph at that
moment, built (joined) only when asked; ``take_snapshot(..., verify=True)`` (lint mode)
checks that against a full format and names the operator whose change went uncounted.
"""
from __future__ import annotations

from typing import NamedTuple

from .graph import Graph, IRError, TrackedDict, change_tick
from .text import format_graph, format_header, format_op


class OpState:
    """One operator as a snapshot saw it."""

    __slots__ = ("name", "line", "_params", "_attrs", "_count")

    def __init__(self, name: str, line: str, params, attrs, count: int) -> None:
        self.name = name  #: operator name
        self.line = line  #: its line of the text form
        self._params = params  #: the params dict it was formatted from (identity check)
        self._attrs = attrs
        self._count = count  #: operator count + dict versions when formatted (-1: always reformat)

    def __repr__(self) -> str:
        return f"OpState({self.line!r})"


class Snapshot:
    """The graph's operators at one moment (see the module docstring)."""

    __slots__ = ("header", "states", "_by_name")

    def __init__(self, header: str, states: list[OpState]) -> None:
        self.header = header  #: magic + operator and operand counts (two lines, no newline)
        self.states = states  #: one per operator, in order
        self._by_name: dict[str, OpState] | None = None

    @property
    def text(self) -> str:
        """The text form (:func:`engine.ir.text.format_graph`) of the graph at that moment."""
        return "\n".join([self.header] + [st.line for st in self.states]) + "\n"

    def by_name(self) -> dict[str, OpState]:
        """Operator name → state (for a repeated name: the last one, at the first's place)."""
        if self._by_name is None:
            self._by_name = {st.name: st for st in self.states}
        return self._by_name

    def __len__(self) -> int:
        return len(self.states)


class _Last(NamedTuple):
    """A graph's last snapshot and what it was taken at (``graph._last_snapshot``)."""

    snapshot: Snapshot
    order: list  #: the graph's order list then (a change of order makes a new one)
    tick: int  #: the change tick drawn then
    tracked: bool  #: every operator's dicts were tracked ones


def take_snapshot(graph: Graph, *, verify: bool = False) -> Snapshot:
    """Snapshot ``graph``, reusing the state of every operator unchanged since its last
    snapshot. With ``verify`` the result is compared with a full :func:`format_graph`, and an
    :class:`~engine.ir.graph.IRError` names an operator changed without being counted."""
    order = graph._ordered()
    header = format_header(graph)
    last: _Last | None = graph.__dict__.get("_last_snapshot")
    tick = change_tick()
    if (last is not None and last.order is order and last.tick + 1 == tick and last.tracked
            and last.snapshot.header == header):
        graph.__dict__["_last_snapshot"] = last._replace(tick=tick)
        if verify:
            _verify(graph, last.snapshot)
        return last.snapshot
    tracked = True
    states: list[OpState] = []
    append = states.append
    for op in order:
        d = op.__dict__
        st = d.get("_snap")
        params, attrs = d["params"], d["attrs"]
        if type(params) is TrackedDict and type(attrs) is TrackedDict:
            count = d["_v"] + params.version + attrs.version
            if st is not None and st._count == count and st._params is params and st._attrs is attrs:
                append(st)
                continue
        else:
            count = -1
            tracked = False
        line = format_op(op)
        if st is None or st.line != line or st.name != op.name:
            st = OpState(op.name, line, params, attrs, count)
        else:  # counted as changed but the line is the same: keep sharing the state
            st._params, st._attrs, st._count = params, attrs, count
        d["_snap"] = st
        append(st)
    snap = Snapshot(header, states)
    graph.__dict__["_last_snapshot"] = _Last(snap, order, change_tick(), tracked)
    if verify:
        _verify(graph, snap)
    return snap


def _verify(graph: Graph, snap: Snapshot) -> None:
    full = format_graph(graph)
    if snap.text == full:
        return
    for op, st in zip(graph.ops, snap.states):
        line = format_op(op)
        if line != st.line:
            raise IRError(f"operator {op.name!r} changed without being counted (a list changed in place? "
                          f"assign a new value or call engine.ir.graph.touch):\n  snapshot: {st.line}\n  "
                          f"graph:    {line}")
    raise IRError("snapshot text differs from the graph's text form")
