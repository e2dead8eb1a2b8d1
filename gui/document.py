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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import engine
from engine.build import build_graph
from engine.convert import ConversionResult, ConvertOptions, convert
from engine.diagnostics import Diagnostic
from engine.ir import Graph

from .graph.model import DisplayGraph, display_graph
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

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.result.diagnostics

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
        n_ops = sum(1 for n in ep.nodes)
        tv = f"torch {ep.torch_version}" if ep.torch_version else "torch ?"
        return f"{self.name} · {n_ops:,} nodes · {ep.dialect} · schema {ep.schema_version} · {tv}"

    def close(self) -> None:
        try:
            self.package.close()
        except Exception:  # pragma: no cover - closing must never fail the GUI
            log.exception("closing %s", self.path)


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


@dataclass
class PnnxPreview:
    """The pnnx graph of a conversion still running (lowering to ncnn), streamed to the window
    so it can be shown before the conversion ends."""

    display: DisplayGraph
    provenance: ProvenanceIndex


def convert_document(ctx, doc: Document, options: ConvertOptions) -> Conversion:
    """Run the converter on the document's program (worker thread). The pnnx graph goes to the
    GUI (``ctx.partial(PnnxPreview)``) as soon as it exists."""
    t0 = time.perf_counter()

    def on_pnnx(graph: Graph, diagnostics: list[Diagnostic]) -> None:
        ctx.partial(PnnxPreview(display_graph(graph, "pnnx", problems_by_operator(diagnostics)),
                                ProvenanceIndex(doc.aten, graph)))

    result = convert(doc.program, options, progress=ctx.progress, cancel=ctx, graph=doc.aten, on_pnnx=on_pnnx)
    ctx.check()
    diags = result.diagnostics
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
    return Conversion(result, options, aten_disp, displays, prov, time.perf_counter() - t0)


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
