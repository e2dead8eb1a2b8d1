"""The pass manager: runs named passes in order, snapshotting and diffing after each.

A pass is a function ``run(graph, cx) -> None`` that mutates ``graph`` in place, decorated with
:func:`graph_pass` to give it a name (``verb_noun``) and a one-line description. ``cx`` is the
:class:`PassContext` of the run (options, diagnostics, the source program).

After every pass the manager records a :class:`PassRecord`: the structural snapshot
(:mod:`engine.ir.snapshot`: operators unchanged by the pass are shared with the previous
snapshot, so a pass that changes little costs little; the text form is built only when asked,
:attr:`PassRecord.snapshot`), the diff against the previous snapshot computed from the
structure, and the pass's time. With ``lint=True`` (tests) the graph is linted after every
pass and each snapshot is checked against the full text form. A pass that raises is reported
as :class:`PassError` naming it and the passes that ran before it.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..diagnostics import DiagnosticList
from ..ir import Graph
from ..records import field, record
from .diff import GraphDiff, diff_states

if TYPE_CHECKING:
    from ..ir.snapshot import Snapshot

log = logging.getLogger(__name__)

PassFn = Callable[[Graph, "PassContext"], Any]


def graph_pass(name: str, description: str = ""):
    """Name a pass function: ``@graph_pass("fuse_conv_batchnorm", "fold BN into conv weights")``."""

    def wrap(fn: PassFn) -> PassFn:
        fn.pass_name = name  # type: ignore[attr-defined]
        fn.pass_description = description or (fn.__doc__ or "").strip().split("\n")[0]  # type: ignore[attr-defined]
        return fn

    return wrap


def pass_name(fn: PassFn) -> str:
    return getattr(fn, "pass_name", fn.__name__)


@record
class PassContext:
    """What every pass may use besides the graph."""

    options: Any = None
    diagnostics: DiagnosticList = field(default_factory=DiagnosticList)
    program: Any = None  #: the engine.ExportedProgram being converted (None for text-built graphs)
    state: dict[str, Any] = field(default_factory=dict)  #: scratch space shared between passes


@record
class PassRecord:
    """What the manager kept of one pass: its name, time, snapshot and diff."""

    index: int
    name: str
    description: str
    seconds: float
    state: Snapshot | None  #: the graph after the pass (None when snapshots are off)
    diff: GraphDiff
    num_ops: int

    @property
    def snapshot(self) -> str:
        """The graph after the pass in the text form (built on each access; "" without snapshots)."""
        return "" if self.state is None else self.state.text

    @property
    def changed_anything(self) -> bool:
        return not self.diff.empty

    def summary(self) -> dict:
        return {"name": self.name, **self.diff.counts(), "seconds": round(self.seconds, 6), "ops": self.num_ops}


class PassError(Exception):
    """A pass raised. ``str()`` names the pass and the passes before it."""

    def __init__(self, name: str, previous: Sequence[str], cause: BaseException):
        self.pass_name = name
        self.previous = list(previous)
        self.cause = cause
        after = ", ".join(self.previous) if self.previous else "(none)"
        super().__init__(f"pass {name} failed: {type(cause).__name__}: {cause} (after the passes: {after})")


class Cancelled(Exception):
    """The run was cancelled through the ``cancel`` callback."""


class PassManager:
    def __init__(self, passes: Sequence[PassFn], *, lint: bool = False, snapshots: bool = True,
                 progress: Callable[[int, int, str], None] | None = None,
                 cancel: Callable[[], bool] | None = None,
                 after_pass: Callable[[PassRecord, Graph, PassContext], None] | None = None):
        self.passes = list(passes)
        self.lint = lint
        self.snapshots = snapshots
        self.progress = progress
        self.cancel = cancel
        #: called after every pass with its record (a caller streaming results as they come)
        self.after_pass = after_pass
        self.records: list[PassRecord] = []

    @property
    def names(self) -> list[str]:
        return [pass_name(p) for p in self.passes]

    def run(self, graph: Graph, cx: PassContext, *, initial_name: str = "build_graph") -> list[PassRecord]:
        """Run every pass on ``graph`` (in place). Record 0 is the initial graph."""
        if self.snapshots:  # here: the text form is imported on first use (engine.ir)
            from ..ir.snapshot import take_snapshot
        prev = take_snapshot(graph, verify=self.lint) if self.snapshots else None
        self.records = [PassRecord(0, initial_name, "the graph as built from the program", 0.0, prev,
                                   GraphDiff(), len(graph.ops))]
        done: list[str] = []
        for i, p in enumerate(self.passes, start=1):
            name = pass_name(p)
            if self.cancel is not None and self.cancel():
                raise Cancelled(f"cancelled before pass {name}")
            if self.progress is not None:
                self.progress(i - 1, len(self.passes), name)
            t0 = time.perf_counter()
            try:
                p(graph, cx)
                if self.lint:
                    graph.lint()
                dt = time.perf_counter() - t0
                snap = take_snapshot(graph, verify=self.lint) if prev is not None else None
            except Cancelled:
                raise
            except Exception as e:
                raise PassError(name, done, e) from e
            diff = diff_states(prev, snap) if prev is not None and snap is not None else GraphDiff()
            self.records.append(PassRecord(i, name, getattr(p, "pass_description", ""), dt, snap, diff, len(graph.ops)))
            log.debug("pass %s: %s in %.3fs", name, diff.counts(), dt)
            if self.after_pass is not None:
                self.after_pass(self.records[-1], graph, cx)
            prev = snap
            done.append(name)
        if self.progress is not None:
            self.progress(len(self.passes), len(self.passes), "done")
        return self.records


def dump_records(records: Sequence[PassRecord], directory) -> list[str]:
    """Write ``NN_<pass>.txt`` (snapshot) and ``NN_<pass>.diff`` for every record."""
    from pathlib import Path

    from ..errors import WriteError
    from ..writers.atomic import write_text_atomic

    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError(str(d), f"cannot create the folder: {e.strerror or e}") from None
    written = []
    for r in records:
        stem = f"{r.index:02d}_{r.name}"
        write_text_atomic(d / f"{stem}.txt", r.snapshot)
        write_text_atomic(d / f"{stem}.diff", r.diff.to_text())
        written += [f"{stem}.txt", f"{stem}.diff"]
    return written
