"""What is open: :class:`Document` (a package, its program, the ATen graph) and
:class:`Conversion` (one run of the converter on it), and the functions that make them.

The ``open_document`` / ``convert_document`` / ``pass_snapshot`` functions run in worker
threads (see :mod:`gui.workers`): they read, build and convert through the engine's public API
and also prepare everything the views need (display graphs, provenance indices) so the GUI
thread only turns results into items. Nothing here imports Qt.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import engine
from engine.build import build_graph
from engine.convert import ConversionResult, ConvertOptions, convert
from engine.diagnostics import Diagnostic
from engine.errors import PT2Error
from engine.ir import Graph

from .graph.grouping import groups_of
from .graph.model import INPUT, OP, OUTPUT, PARAM, DisplayGraph, display_graph, kind_of_type, node_kind
from .provenance import ProvenanceIndex

log = logging.getLogger(__name__)

SAMPLES = Path(__file__).resolve().parent.parent / "resources" / "samples"


def sample_paths() -> list[Path]:
    """The bundled sample models."""
    return sorted(SAMPLES.glob("*.pt2"))


def default_sample() -> Path:
    p = SAMPLES / "tiny_cnn.pt2"
    return p if p.exists() else sample_paths()[0]


@dataclass
class Conversion:
    """One conversion of a document, with what the views need of it."""

    result: ConversionResult
    options: ConvertOptions
    aten_display: DisplayGraph  #: the ATen graph with unsupported nodes marked
    displays: dict[str, DisplayGraph]  #: "pnnx" / "ncnn" → display graph
    provenance: dict[str, ProvenanceIndex]  #: "pnnx" / "ncnn" → index against the ATen graph
    seconds: float
    snapshots: dict[int, Graph] = field(default_factory=dict)  #: parsed pass snapshots (cache)
    #: stored tensors that cannot be read (a CRC mismatch...): found before "ready to export"
    weight_problems: list[Diagnostic] = field(default_factory=list)
    #: per pass record: what its snapshot holds (see :func:`snapshot_counts`)
    pass_counts: list["NodeCounts"] = field(default_factory=list)
    #: what each converter plug-in file registered (:class:`gui.plugin_runs.PluginLoad`)
    plugins: list = field(default_factory=list)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """The conversion's diagnostics and the weights that cannot be read."""
        return self.result.diagnostics + self.weight_problems

    @property
    def exportable(self) -> bool:
        """Every operator converted and every weight the model uses readable."""
        return self.result.ok and not any(d.severity == "error" for d in self.weight_problems)

    def graph(self, key: str) -> Graph | None:
        return {"aten": self.result.aten, "pnnx": self.result.pnnx, "ncnn": self.result.ncnn}.get(key)


@dataclass
class Document:
    """An open ``.pt2`` file and the model shown from it."""

    path: str
    package: Any  #: engine.Package
    model_name: str
    program: Any  #: engine.ExportedProgram
    aten: Graph
    aten_display: DisplayGraph
    seconds: float
    conversion: Conversion | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def model_names(self) -> list[str]:
        return list(self.package.model_names)

    def summary(self) -> str:
        ep = self.program
        n_ops = sum(1 for op in self.aten.ops if node_kind(op) == OP)
        tv = f"torch {ep.torch_version}" if ep.torch_version else "torch ?"
        # "ops" as the ATen graph's header counts them (operator calls: no inputs, outputs, weights)
        return f"{self.name} · {n_ops:,} ATen ops · {ep.dialect} · schema {ep.schema_version} · {tv}"

    def close(self) -> None:
        try:
            self.package.close()
        except Exception:  # pragma: no cover - closing must never fail the GUI
            log.exception("closing %s", self.path)

    def dispose(self) -> None:
        """Close, and unlink the graphs and the package so that reference counting frees them
        now. Their objects refer to each other (operators and operands, a package and its
        models), and would otherwise wait for the collector's release, a full collection that
        froze the window for seconds after switching between large models. Only for a document
        that nothing uses any more (no task running on it)."""
        graphs = [self.aten]
        conv = self.conversion
        if conv is not None:
            r = conv.result
            graphs += [r.aten, r.pnnx, r.ncnn, *conv.snapshots.values()]
        try:
            for g in graphs:
                if g is not None:
                    g.dispose()
            self.package.dispose()
        except Exception:  # pragma: no cover - disposing must never fail the GUI
            log.exception("disposing %s", self.path)


def open_document(ctx, path: str | os.PathLike, model: str | None = None) -> Document:
    """Read a package and build its ATen graph (worker thread)."""
    t0 = time.perf_counter()
    path = os.fspath(path)
    ctx.progress(0, 3, "reading package")
    pkg = engine.load(path)
    try:
        ctx.check()
        name = model if model in pkg.models else ("model" if "model" in pkg.models else pkg.model_names[0])
        ep = pkg.models[name]
        ctx.progress(1, 3, "building the ATen graph")
        aten = build_graph(ep)
        ctx.check()
        ctx.progress(2, 3, "preparing the view")
        disp = display_graph(aten, "aten")
        groups_of(disp)  # here, not in the GUI thread
    except BaseException:
        pkg.close()
        raise
    ctx.progress(3, 3, "done")
    return Document(path, pkg, name, ep, aten, disp, time.perf_counter() - t0)


def problems_by_node(diagnostics: list[Diagnostic]) -> dict[str, str]:
    """ATen node name → reason, for error diagnostics."""
    out: dict[str, str] = {}
    for d in diagnostics:
        if d.severity != "error":
            continue
        for n in d.node.split(","):
            n = n.strip()
            if n and n not in out:
                out[n] = d.reason
    return out


def problems_by_operator(diagnostics: list[Diagnostic]) -> dict[str, str]:
    return {d.operator: d.reason for d in diagnostics if d.severity == "error" and d.operator}


def check_weights(ctx, doc: Document) -> list[Diagnostic]:
    """Read every stored tensor of the program once (the reader checks each payload's CRC on
    first read): one diagnostic per tensor that cannot be read — an error when the model uses
    it (exporting would fail), a warning when nothing reads it."""
    used = {str(op.params.get("target")) for op in doc.aten.ops
            if node_kind(op) == PARAM and any(o.consumers for o in op.outputs)}
    entries = [e for e in doc.program.tensors.entries() if e.readable]
    out: list[Diagnostic] = []
    for k, e in enumerate(entries):
        ctx.check()
        ctx.progress(k, len(entries), f"checking weights ({k:,} of {len(entries):,})")
        try:
            doc.program.tensor(e.fqn)
        except PT2Error as err:
            needed = e.fqn in used
            reason = str(err) + ("" if needed else " (no operator reads it)")
            out.append(Diagnostic(node=e.graph_name or e.fqn, op=f"weight {e.fqn}", reason=reason,
                                  severity="error" if needed else "warning", stage="read_weights"))
    return out


@dataclass(frozen=True)
class NodeCounts:
    """Nodes of a graph by kind, counted as the graph views count them: ``ops`` are operators
    (not inputs, outputs or weights)."""

    ops: int
    io: int
    weights: int

    @property
    def nodes(self) -> int:
        return self.ops + self.io + self.weights

    def describe(self) -> str:
        return (f"{self.nodes:,} graph nodes: {self.ops:,} operators, {self.io:,} inputs/outputs, "
                f"{self.weights:,} weights")


def snapshot_counts(records) -> list[NodeCounts]:
    """:class:`NodeCounts` of each pass record's snapshot, read from its operators' lines (the
    type first) without parsing them into graphs or joining the text form. A pass that changed
    nothing shares the snapshot before it, and every snapshot shares its unchanged operators'
    lines with the one before: each snapshot is counted once, each line's kind is read once."""
    kinds: dict[str, str] = {}  # line → node kind
    by_snapshot: dict[int, NodeCounts] = {}
    out = []
    for r in records:
        snap = r.state
        if snap is None:
            out.append(NodeCounts(0, 0, 0))
            continue
        counts = by_snapshot.get(id(snap))
        if counts is None:
            n = {OP: 0, INPUT: 0, OUTPUT: 0, PARAM: 0}
            for st in snap.states:
                kind = kinds.get(st.line)
                if kind is None:
                    kind = kinds[st.line] = kind_of_type(st.line.split(" ", 1)[0])
                n[kind] += 1
            counts = by_snapshot[id(snap)] = NodeCounts(n[OP], n[INPUT] + n[OUTPUT], n[PARAM])
        out.append(counts)
    return out


@dataclass
class PnnxPreview:
    """The pnnx graph of a conversion still running (lowering to ncnn), streamed to the window
    so it can be shown before the conversion ends."""

    display: DisplayGraph
    provenance: ProvenanceIndex
    #: set by the GUI once the preview is drawn (or will not be)
    shown: threading.Event = field(default_factory=threading.Event)


def convert_document(ctx, doc: Document, options: ConvertOptions, *, wait_for_preview: float = 0.0) -> Conversion:
    """Run the converter on the document's program, then read its weights (worker thread). The
    pnnx graph goes to the GUI (``ctx.partial(PnnxPreview)``) as soon as it exists; with
    ``wait_for_preview`` the lowering to ncnn waits, up to that many seconds, until the GUI has
    drawn it (``PnnxPreview.shown``): running alongside the preview's layout and painting, it
    would share the interpreter lock with them and the preview would appear later."""
    t0 = time.perf_counter()
    waited = 0.0  # for the preview: not conversion time

    def on_pnnx(graph: Graph, diagnostics: list[Diagnostic]) -> None:
        nonlocal waited
        disp = display_graph(graph, "pnnx", problems_by_operator(diagnostics))
        groups_of(disp)  # here, not in the GUI thread
        preview = PnnxPreview(disp, ProvenanceIndex(doc.aten, graph))
        ctx.partial(preview)
        start = time.perf_counter()
        while not preview.shown.wait(0.05) and time.perf_counter() < start + wait_for_preview:
            ctx.check()  # a cancel ends the wait (and the conversion)
        waited = time.perf_counter() - start

    result = convert(doc.program, options, progress=ctx.progress, cancel=ctx, graph=doc.aten, on_pnnx=on_pnnx)
    ctx.check()
    weights = check_weights(ctx, doc)
    counts = snapshot_counts(result.records)
    diags = result.diagnostics + weights
    by_node, by_op = problems_by_node(diags), problems_by_operator(diags)
    # the ATen graph converted is the document's own: without problems its display is the same
    aten_disp = display_graph(result.aten, "aten", by_node) if by_node or result.aten is not doc.aten \
        else doc.aten_display
    displays: dict[str, DisplayGraph] = {}
    prov: dict[str, ProvenanceIndex] = {}
    for key, g in (("pnnx", result.pnnx), ("ncnn", result.ncnn)):
        if g is None:
            continue
        displays[key] = display_graph(g, key, by_op)
        prov[key] = ProvenanceIndex(result.aten, g)
    return Conversion(result, options, aten_disp, displays, prov, time.perf_counter() - t0 - waited,
                      weight_problems=weights, pass_counts=counts)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def conversion_status(conv: Conversion) -> str:
    """The status bar's line after a conversion: whether it can be exported, and why not."""
    r = conv.result
    if r.errors:
        return f"Converted with {_plural(len(r.errors), 'unsupported operator')}: {r.layer_count} layers — see Problems"
    head = f"Converted: {r.layer_count} ncnn layers in {conv.seconds:.2f} s"
    unreadable = [d for d in conv.weight_problems if d.severity == "error"]
    if unreadable:
        names = ", ".join(d.op.removeprefix("weight ") for d in unreadable[:3]) + ("…" if len(unreadable) > 3 else "")
        return (f"{head}, but {_plural(len(unreadable), 'weight')} cannot be read ({names}) — export would fail; "
                "see Problems")
    warnings = sum(1 for d in conv.diagnostics if d.severity == "warning")
    return f"{head} — ready to export (Ctrl+E)" + (f"; {_plural(warnings, 'warning')}, see Problems" if warnings else "")


@dataclass
class PassView:
    """A pass's snapshot as a display graph, with its diff as marks."""

    index: int
    display: DisplayGraph
    marks: dict[str, str]
    provenance: ProvenanceIndex


def pass_snapshot(ctx, conversion: Conversion, index: int) -> PassView:
    """The graph after pass ``index`` with removed operators as ghosts (worker thread)."""
    records = conversion.result.records
    rec = records[index]
    after = _parsed(conversion, index)
    ghosts = []
    if index > 0 and rec.diff.removed:
        before = _parsed(conversion, index - 1)
        removed = {e.name for e in rec.diff.removed}
        ghosts = [op for op in before.ops if op.name in removed]
    ctx.check()
    by_op = problems_by_operator(conversion.diagnostics)
    disp = display_graph(after, "snapshot", by_op, ghosts=ghosts)
    marks = {e.name: "added" for e in rec.diff.added}
    marks.update({e.name: "changed" for e in rec.diff.changed})
    marks.update({e.name: "removed" for e in rec.diff.removed})
    return PassView(index, disp, marks, ProvenanceIndex(conversion.result.aten, after, extra=ghosts))


def _parsed(conversion: Conversion, index: int) -> Graph:
    g = conversion.snapshots.get(index)
    if g is None:
        g = Graph.from_text(conversion.result.records[index].snapshot)
        conversion.snapshots[index] = g
    return g
