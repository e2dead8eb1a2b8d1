"""Public conversion API: ``engine.convert(source, options) -> ConversionResult``.

The run: build the ATen-level IR from the program, run :data:`engine.passes.PIPELINE`
(snapshotting after each pass), and return a result that holds the three graphs (ATen as built,
pnnx, final ncnn), every pass record, the diagnostics and the coverage. Writing files is a
separate, atomic step (:meth:`ConversionResult.write`), so nothing is written for a
conversion that did not complete unless asked (``partial=True``).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..collector import no_cyclic_gc
from ..diagnostics import Diagnostic, DiagnosticList
from ..errors import ConversionError, PT2Error
from ..ir import Graph
from ..records import field, record

if TYPE_CHECKING:  # pragma: no cover
    from ..passes import PassRecord

log = logging.getLogger(__name__)


@record
class ConvertOptions:
    """Options of one conversion."""

    fp16: bool = True  #: store tagged ncnn weights as fp16 (pnnx's default)
    input_shapes: Sequence[Sequence[int]] | None = None  #: concrete shapes for symbolic dims, per user input
    converters: Sequence[str | Path] = ()  #: plug-in files loaded for this run
    lint: bool = False  #: lint the graph after every pass (tests)
    snapshots: bool = True  #: keep a snapshot and diff per pass (``PassRecord``)
    model: str | None = None  #: which model of a multi-model package
    keep_aten: bool = True  #: keep a copy of the graph as built (``ConversionResult.aten``; coverage needs it)
    #: the most elements a constant computed at conversion time may hold (``fold_constants``)
    fold_budget: int = 1 << 24


@record
class ConversionResult:
    """What :func:`convert` made: the graphs at each level, the pass records and the diagnostics."""

    program: Any  #: the engine.ExportedProgram converted
    aten: Graph | None  #: the graph as built from the program (ATen vocabulary; None without ``keep_aten``)
    pnnx: Graph | None  #: the graph after ATen→pnnx lowering and pnnx-level passes
    ncnn: Graph  #: the final ncnn graph
    records: list[PassRecord]
    diagnostics: list[Diagnostic]
    seconds: float
    options: ConvertOptions = field(default_factory=ConvertOptions)
    source: str | None = None  #: the converted file, when converted from a path

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def ok(self) -> bool:
        """True when every operator converted (nothing to report at error level)."""
        return not self.errors

    @property
    def layer_count(self) -> int:
        return len(self.ncnn.ops)

    def coverage(self):
        from .coverage import coverage_of_result

        return coverage_of_result(self)

    def write(self, ncnn_param: str | Path | None = None, ncnn_bin: str | Path | None = None,
              pnnx_param: str | Path | None = None, pnnx_bin: str | Path | None = None, *,
              pnnx_py: str | Path | None = None, ncnn_py: str | Path | None = None,
              fp16: bool | None = None, partial: bool = False,
              cancel: Callable[[], bool] | None = None) -> list[Path]:
        """Write the requested files atomically, all of them or none: existing files are
        replaced only once every new file is complete. Refuses an incomplete conversion unless
        ``partial``. ``cancel()`` is polled while writing; once true the write stops (raising
        ``engine.passes.manager.Cancelled``) and nothing is replaced. ``pnnx_py``/``ncnn_py``:
        the Python scripts (``<stem>_pnnx.py`` loads the ``.pnnx.bin``, ``<stem>_ncnn.py`` runs
        the ncnn model), written with their models. Returns the paths written."""
        from .output import write_files

        if not self.ok and not partial:
            raise ConversionError(f"conversion incomplete ({len(self.errors)} unsupported or failed operators); "
                                  "nothing written")
        use_fp16 = self.options.fp16 if fp16 is None else fp16
        with no_cyclic_gc():  # as the conversion: a collection would walk the whole converted model
            return write_files(ncnn_graph=self.ncnn, pnnx_graph=self.pnnx, ncnn_param=ncnn_param,
                               ncnn_bin=ncnn_bin, pnnx_param=pnnx_param, pnnx_bin=pnnx_bin, pnnx_py=pnnx_py,
                               ncnn_py=ncnn_py, fp16=use_fp16, partial=not self.ok, cancel=cancel,
                               warn=self._warn_weight, program_signature=getattr(self.program, "signature", None),
                               source=Path(self.source).name if self.source else None)

    def _warn_weight(self, op, reason: str) -> None:
        """A warning diagnostic (once) for an ncnn weight holding NaN or infinite values."""
        d = Diagnostic.for_operator(op, f"layer {op.name}: {reason}", severity="warning", stage="write_ncnn")
        if d not in self.diagnostics:
            self.diagnostics.append(d)

    def write_all(self, directory: str | Path, stem: str, *, python: bool = False, **kw) -> list[Path]:
        """The ncnn and pnnx models as ``<directory>/<stem>.*`` (with ``python``, also
        ``<stem>_pnnx.py`` and ``<stem>_ncnn.py``)."""
        d = Path(directory)
        if python:
            kw.update(pnnx_py=d / f"{stem}_pnnx.py", ncnn_py=d / f"{stem}_ncnn.py")
        return self.write(d / f"{stem}.ncnn.param", d / f"{stem}.ncnn.bin", d / f"{stem}.pnnx.param",
                          d / f"{stem}.pnnx.bin", **kw)

    def report(self) -> dict:
        """The ``--report`` JSON."""
        return {
            "ok": self.ok,
            "layers": self.layer_count,
            "inputs": list(self.ncnn.meta.get("inputs", [])),
            "outputs": list(self.ncnn.meta.get("outputs", [])),
            "diagnostics": [{k: d.to_dict()[k] for k in ("node", "op", "reason", "module", "source", "severity")}
                            for d in self.diagnostics],
            "passes": [r.summary() for r in self.records[1:]],
            "seconds": round(self.seconds, 6),
            "coverage": self.coverage().to_dict(),
        }


def _resolve_program(source, model: str | None):
    from ..reader.package import load

    if isinstance(source, (str, Path)):
        pkg = load(source)
        return pkg.models[model] if model else pkg.model
    if hasattr(source, "models") and hasattr(source, "model"):  # a Package
        return source.models[model] if model else source.model
    return source  # an ExportedProgram


def convert(source, options: ConvertOptions | None = None, *,
            progress: Callable[[int, int, str], None] | None = None,
            cancel: Callable[[], bool] | None = None, graph: Graph | None = None,
            on_pnnx: Callable[[Graph, list[Diagnostic]], None] | None = None) -> ConversionResult:
    """Convert a ``.pt2`` path, a Package or an ExportedProgram. Unsupported operators are
    reported as diagnostics in the result; a bad file raises PT2FormatError; a failing pass
    raises ConversionError naming it; a bad plug-in raises PluginError.

    ``graph``: the program's graph as :func:`engine.build.build_graph` made it, when the caller
    has it already (it is not changed: a copy is converted, and it becomes the result's ``aten``).
    ``on_pnnx(graph, diagnostics)`` is called, in the converting thread, with the pnnx-level
    graph and the diagnostics so far as soon as they exist, before the lowering to ncnn runs
    (a viewer can show it while the conversion goes on)."""
    from .. import converters  # noqa: F401  (registers the built-in rules)
    from ..build import build_graph
    from ..passes import PIPELINE, PassContext, PassError, PassManager
    from .plugins import plugin_scope

    opts = options or ConvertOptions()
    t0 = time.perf_counter()
    ep = _resolve_program(source, opts.model)
    with plugin_scope(opts.converters), no_cyclic_gc():
        if graph is not None and not opts.input_shapes:
            aten = graph if opts.keep_aten else None
            graph = graph.copy()
        else:
            graph = graph.copy() if graph is not None else build_graph(ep)
            if opts.input_shapes:
                from .inputshape import apply_input_shapes

                apply_input_shapes(graph, opts.input_shapes)
            aten = graph.copy() if opts.keep_aten else None
        cx = PassContext(options=opts, diagnostics=DiagnosticList(), program=ep)

        def after_pass(_record, _graph, cx: PassContext) -> None:
            if on_pnnx is not None and "pnnx_graph" in cx.state and not cx.state.get("pnnx_published"):
                cx.state["pnnx_published"] = True
                on_pnnx(cx.state["pnnx_graph"], list(cx.diagnostics))

        pm = PassManager(PIPELINE, lint=opts.lint, snapshots=opts.snapshots, progress=progress, cancel=cancel,
                         after_pass=after_pass)
        try:
            records = pm.run(graph, cx)
        except PassError as e:
            raise ConversionError(str(e)) from e
    return ConversionResult(program=ep, aten=aten, pnnx=cx.state.get("pnnx_graph"), ncnn=graph,
                            records=records, diagnostics=list(cx.diagnostics), seconds=time.perf_counter() - t0,
                            options=opts, source=str(source) if isinstance(source, (str, Path)) else None)


__all__ = ["ConvertOptions", "ConversionResult", "convert", "PT2Error"]
