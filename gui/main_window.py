"""The main window: two graph views side by side, the docks, and the flows between them.

Opening (:meth:`MainWindow.open_file`), converting (:meth:`MainWindow.convert`), exporting
(:meth:`MainWindow.export_to`) and pass snapshots run through the window's
:class:`~gui.workers.TaskRunner`; their results come back to the ``_on_*`` methods here, which
hand them to the views. Every task failure goes to the :class:`~gui.errors.ErrorReporter`. A
failed open keeps the previous model. Menus and shortcuts are built in :mod:`gui.actions`;
selection linking lives in :mod:`gui.sync`, linked panning and zooming in
:mod:`gui.linked_views`; the Verify action, its dock and the error colouring in
:mod:`gui.verify_controller`; exporting (model files and graph pictures) in
:mod:`gui.export_flow`; the status bar in :mod:`gui.statusbar`; converter plug-ins (writing one,
live reload, the Plug-ins dock) in :mod:`gui.plugin_session`.
"""
from __future__ import annotations

import logging
import dataclasses
import os
import threading
from pathlib import Path

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QIcon
from PySide6.QtWidgets import QDockWidget, QFileDialog, QMainWindow, QMessageBox, QSplitter, QWidget

from engine.convert import ConvertOptions

from . import app_version, theme
from .actions import build_actions
from .convert_dialog import ConvertDialog
from .document import (Conversion, Document, PassView, PnnxPreview, conversion_status,
                       open_document, pass_snapshot)
from .errors import ErrorReporter
from .export_flow import ExportFlow, export_paths
from .export_flow import write_files as _write_files  # noqa: F401  (kept importable from here)
from .gcpause import install_collector
from .graph.panel import GraphPanel
from .linked_views import ViewLink
from .panels.inspector import InspectorContext, InspectorPanel
from .panels.passes import PassesPanel
from .panels.plugins import PluginsPanel
from .panels.problems import ProblemsPanel
from .panels.search import SearchHit, SearchPanel
from .panels.signature import SignaturePanel
from .panels.tensors import TensorRow, TensorsPanel
from .panels.verify_panel import VerifyPanel
from .panels.weights import WeightViewer, load_weight
from .plugin_runs import convert_with_plugins
from .plugin_session import PluginSession
from .settings import Settings
from .shortcut_guard import ShortcutGuard
from .statusbar import StatusArea
from .sync import ATEN, RIGHT, SelectionSync
from .verify_controller import VerifyController
from .workers import TaskRunner

log = logging.getLogger(__name__)

APP_NAME = "pt2ncnn Studio"
STATE_VERSION = 3
ICON = Path(__file__).resolve().parent.parent / "resources" / "icons" / "pt2ncnn-studio.svg"
STYLE = Path(__file__).resolve().parent.parent / "resources" / "styles" / "studio.qss"
DARK_STYLE = STYLE.with_name("studio-dark.qss")
RIGHT_MODES = (("pnnx", "pnnx graph"), ("ncnn", "ncnn graph"), ("pass", "after pass …"))
NOT_CONVERTED = "Not converted yet — Model ▸ Convert (Ctrl+R)"
#: seconds a conversion waits, once its pnnx graph exists, for the window to draw it
PREVIEW_WAIT = 2.0
__all__ = ["MainWindow", "export_paths"]


class MainWindow(QMainWindow):
    documentChanged = Signal()
    conversionChanged = Signal()
    #: a conversion ended but is not shown (a broken converter plug-in): its first problem
    conversionRefused = Signal(object)
    exported = Signal(list)

    def __init__(self, settings: Settings | None = None, *, reporter: ErrorReporter | None = None,
                 restore_state: bool = True):
        super().__init__()
        install_collector()  # cyclic garbage collection only in the GUI thread (see gui.gcpause)
        self.settings = settings or Settings()
        self.reporter = reporter or ErrorReporter(lambda: self)
        self.runner = TaskRunner(self)
        self.runner.error.connect(self.reporter.report_task)
        self.doc: Document | None = None
        self._retired: list[Document] = []  #: replaced documents, disposed once no task runs
        self.runner.busyChanged.connect(self._dispose_retired)
        self.right_key = self.settings.get("view/right", "pnnx", str)
        if self.right_key not in ("pnnx", "ncnn"):
            self.right_key = "pnnx"
        self.pass_view: PassView | None = None
        self.weight_name = ""
        self._quiet_tensor = False
        self.last_export: list[str] = []
        self.setWindowTitle(APP_NAME)
        self.setObjectName("mainWindow")
        if ICON.exists():
            self.setWindowIcon(QIcon(str(ICON)))
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self._retheming = False
        self._apply_style()

        gtheme = theme.graph_theme(self.palette())
        self.aten_panel = GraphPanel("ATen", self.runner, gtheme, key="aten")
        self.right_panel = GraphPanel("Lowered", self.runner, gtheme, key="right", modes=RIGHT_MODES)
        self.right_panel.title.setText("")
        self.right_panel.set_mode(self.right_key)
        self.right_panel.set_mode_enabled("pass", False)
        self.right_panel.modeRequested.connect(self.show_right)
        #: the document to convert once its ATen graph is drawn (the conversion and that layout
        #: would share one interpreter lock: drawn first, the graph is seen a second earlier)
        self._convert_after_layout: Document | None = None
        self.aten_panel.layoutReady.connect(self._start_pending_conversion)
        self.aten_panel.layoutFailed.connect(self._start_pending_conversion)
        #: a conversion waiting until its pnnx preview is drawn (see _on_pnnx_preview)
        self._preview_shown: threading.Event | None = None
        self.right_panel.layoutReady.connect(self._release_preview)
        self.right_panel.layoutFailed.connect(self._release_preview)
        hide = self.settings.get("view/hide_params", False, bool)
        for p in (self.aten_panel, self.right_panel):
            p.set_hide_params(hide)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("graphSplitter")
        split.addWidget(self.aten_panel)
        split.addWidget(self.right_panel)
        split.setChildrenCollapsible(False)
        self.graph_splitter = split
        self.setCentralWidget(split)
        self.sync = SelectionSync(self.aten_panel, self.right_panel, self)
        self.sync.nodeChosen.connect(self._show_in_inspector)
        self.sync.selectionCleared.connect(self._clear_inspector)
        for p in (self.aten_panel, self.right_panel):
            p.view.installEventFilter(self)

        self.inspector = InspectorPanel()
        self.inspector.linkActivated.connect(self._on_link)
        self.tensors = TensorsPanel()
        self.tensors.tensorSelected.connect(self._on_tensor_selected)
        self.weights = WeightViewer()
        self.signature = SignaturePanel()
        self.passes = PassesPanel()
        self.passes.passSelected.connect(self._on_pass_selected)
        self.problems = ProblemsPanel()
        self.problems.problemActivated.connect(self._on_problem)
        self.problems.writeConverterRequested.connect(
            lambda d: self.plugins.write_converter(d.node.split(",")[0].strip()))
        self.search = SearchPanel()
        self.search.hitActivated.connect(self._on_search_hit)
        self.search.queryChanged.connect(self._on_search_query)
        self.verify_panel = VerifyPanel()
        self.plugins_panel = PluginsPanel()
        self.docks: dict[str, QDockWidget] = {}
        self._build_docks()

        self.exporter = ExportFlow(self)
        self.actions = build_actions(self)
        self.status_area = StatusArea(self.statusBar(), self.runner, self.actions.stop)
        self.status_label = self.status_area.message
        self.summary_label = self.status_area.summary
        self.progress = self.status_area.bar
        self.progress_label = self.status_area.task
        self.cancel_btn = self.status_area.stop
        self.shortcut_guard = ShortcutGuard(self)
        self.view_link = ViewLink(self.sync, self)
        self.actions.link_views.toggled.connect(self.set_linked_views)
        self.view_link.set_enabled(self.actions.link_views.isChecked())
        self.verifier = VerifyController(self, self.verify_panel)
        self.plugins = PluginSession(self, self.plugins_panel)
        self._update_enabled()
        self.resize(1480, 920)
        if restore_state:
            self._restore_state()

    # ------------------------------------------------------------------ docks
    def _dock(self, key: str, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        d = QDockWidget(title, self)
        d.setObjectName(f"dock_{key}")
        d.setWidget(widget)
        d.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable | QDockWidget.DockWidgetFeature.DockWidgetClosable
                      | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(area, d)
        self.docks[key] = d
        if key == "tensors":  # lists a model's tensors when its tab is first in front
            d.visibilityChanged.connect(lambda on: on and self.tensors.ensure_listed())
        return d

    def _build_docks(self) -> None:
        R, B, L = (Qt.DockWidgetArea.RightDockWidgetArea, Qt.DockWidgetArea.BottomDockWidgetArea,
                   Qt.DockWidgetArea.LeftDockWidgetArea)
        groups = [
            (R, [("inspector", "Inspector", self.inspector), ("signature", "Signature", self.signature),
                 ("weights", "Weights", self.weights)]),
            (B, [("problems", "Problems", self.problems), ("passes", "Passes", self.passes),
                 ("tensors", "Tensors", self.tensors), ("verify", "Verify", self.verify_panel),
                 ("plugins", "Plug-ins", self.plugins_panel)]),
            (L, [("search", "Search", self.search)]),
        ]
        for area, members in groups:  # each area: one tab group, the first tab in front
            docks = [self._dock(key, title, widget, area) for key, title, widget in members]
            for d in docks[1:]:
                self.tabifyDockWidget(docks[0], d)
            docks[0].raise_()
        ins, prob = self.docks["inspector"], self.docks["problems"]
        self.docks["search"].hide()
        self.resizeDocks([ins], [420], Qt.Orientation.Horizontal)
        self.resizeDocks([prob], [250], Qt.Orientation.Vertical)
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)

    def reset_layout(self) -> None:
        for d in self.docks.values():
            self.removeDockWidget(d)
            d.setFloating(False)
        for d in list(self.docks.values()):
            d.deleteLater()
        self.docks.clear()
        for w in (self.inspector, self.signature, self.problems, self.passes, self.tensors, self.weights, self.search,
                  self.verify_panel, self.plugins_panel):
            w.setParent(None)
        self._build_docks()
        for d in self.docks.values():
            if d.objectName() != "dock_search":
                d.show()
        self.actions.refresh_dock_menu()

    def _restore_state(self) -> None:
        geometry, state = self.settings.window_state()
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is not None:
            self.restoreState(state, STATE_VERSION)

    def save_state(self) -> None:
        self.settings.save_window_state(self.saveGeometry(), self.saveState(STATE_VERSION))
        self.settings.set("view/right", self.right_key)
        self.settings.sync()

    # ------------------------------------------------------------------ opening
    def open_dialog(self) -> None:
        start = os.path.dirname(self.doc.path) if self.doc else str(Path.home())
        path, _ = QFileDialog.getOpenFileName(self, "Open ExportedProgram", start,
                                              "PyTorch ExportedProgram (*.pt2);;All files (*)")
        if path:
            self.open_file(path)

    def open_file(self, path: str | os.PathLike, model: str | None = None):
        """Read a package in a worker; on success it replaces the current model."""
        path = os.path.abspath(os.fspath(path))
        name = os.path.basename(path)
        self.status(f"Opening {name}…")
        return self.runner.submit(f"Cannot open {name}", open_document, path, model, group="load",
                                  on_result=self._on_loaded, on_error=lambda e: self.status(f"Could not open {name}"))

    def _on_loaded(self, doc: Document) -> None:
        old = self.doc
        for group_task in self.runner.active:
            if group_task.group in ("convert", "pass", "weight"):
                group_task.cancel()
        self.doc = doc
        self.pass_view = None
        self.weight_name = ""
        if old is not None and old is not doc:
            QTimer.singleShot(0, old.close)
            self._retired.append(old)  # disposed once no task runs (one may still use it)
        self.settings.add_recent(doc.path)
        self.setWindowTitle(f"{doc.name} — {APP_NAME}")
        self.summary_label.setText(doc.summary())
        self.aten_panel.title.setText("ATen")
        self.aten_panel.show_graph(doc.aten_display)
        self.right_panel.set_mode_enabled("pass", False)
        self.right_panel.set_mode(self.right_key)
        self.right_panel.show_graph(None, message=NOT_CONVERTED)
        self.sync.set_index(None)
        self.inspector.show_message("Select a node to see its details.")
        self.tensors.set_program(doc.program)
        self.weights.clear()
        self.signature.set_program(doc.program, doc.package)
        self.passes.set_records([])
        self.problems.set_diagnostics([], converted=False)
        self._update_search_graphs()
        self.status(f"Opened {doc.name} in {doc.seconds:.2f} s")
        self._update_enabled()
        self.documentChanged.emit()
        if self.settings.get("convert/auto", True, bool):
            self._convert_after_layout = doc  # once its ATen graph is drawn

    def _dispose_retired(self, busy: bool = False) -> None:
        """Free the replaced documents now (see :meth:`Document.dispose`), once no task runs."""
        if busy or self.runner.busy:
            return
        retired, self._retired = self._retired, []
        for old in retired:
            if old is not self.doc:
                old.dispose()

    def _start_pending_conversion(self) -> None:
        doc, self._convert_after_layout = self._convert_after_layout, None
        if doc is not None and doc is self.doc:
            self.convert()

    # ------------------------------------------------------------------ converting
    def convert_options(self) -> ConvertOptions:
        plugins = [p for p in str(self.settings.get("convert/plugins", "", str)).split(";") if p]
        model = self.doc.model_name if self.doc else None
        return ConvertOptions(fp16=self.settings.get("convert/fp16", True, bool), converters=plugins, model=model)

    def convert_dialog(self) -> ConvertDialog | None:
        if self.doc is None:
            return None
        base = self.doc.conversion.options if self.doc.conversion else self.convert_options()
        dlg = ConvertDialog(self.doc.program, base, auto_convert=self.settings.get("convert/auto", True, bool),
                            parent=self)
        dlg.accepted.connect(lambda d=dlg: self._convert_from_dialog(d))
        dlg.open()
        return dlg

    def _convert_from_dialog(self, dlg: ConvertDialog) -> None:
        opts = dlg.options()
        self.settings.set("convert/fp16", opts.fp16)
        self.settings.set("convert/plugins", ";".join(str(p) for p in opts.converters))
        self.settings.set("convert/auto", dlg.auto.isChecked())
        self.convert(opts)

    def convert(self, options: ConvertOptions | None = None):
        if self.doc is None:
            return None
        opts = options or self.convert_options()
        opts = dataclasses.replace(opts, converters=self.plugins.effective(opts.converters))
        doc = self.doc
        self.status(f"Converting {doc.name}…")
        if doc.conversion is None:
            self.right_panel.show_graph(None, message=f"Converting {doc.name}…")
        # with plug-ins, a conversion may be refused at the end (a broken plug-in): no preview over the previous one
        preview = doc.conversion is None or not opts.converters
        return self.runner.submit("Conversion", convert_with_plugins, doc, opts, group="convert",
                                  wait_for_preview=PREVIEW_WAIT if preview else 0.0,
                                  on_partial=lambda pv, d=doc: self._on_pnnx_preview(d, pv, preview),
                                  on_result=lambda conv, d=doc: self._on_convert_result(d, conv),
                                  on_error=lambda e: self._on_convert_failed(doc))

    def _on_convert_result(self, doc: Document, result) -> None:
        """A conversion ended: shown, unless a converter plug-in is broken (see PluginSession.take)."""
        if doc is not self.doc:
            return
        if self.plugins.take(doc, result):
            self._on_converted(doc, result)
        else:
            self.conversionRefused.emit(self.plugins.problems[0] if self.plugins.problems else None)

    def _on_pnnx_preview(self, doc: Document, preview: PnnxPreview, wanted: bool = True) -> None:
        """The pnnx graph of the conversion still running: shown at once if it is the view. The
        conversion waits (up to :data:`PREVIEW_WAIT`) until it is drawn: ``preview.shown``."""
        self._release_preview()
        if not wanted or doc is not self.doc or self.right_key != "pnnx" or self.pass_view is not None:
            preview.shown.set()
            return
        self._preview_shown = preview.shown
        self.right_panel.set_mode("pnnx")
        self.right_panel.show_graph(preview.display)
        self.sync.set_index(preview.provenance)

    def _release_preview(self) -> None:
        """Let a conversion waiting for its preview go on, after what is queued (the paint)."""
        event, self._preview_shown = self._preview_shown, None
        if event is not None:
            QTimer.singleShot(0, event.set)

    def _on_convert_failed(self, doc: Document) -> None:
        if doc is self.doc:
            if doc.conversion is None:
                self.right_panel.show_graph(None, message="Conversion failed — see the message")
            self.status("Conversion failed")

    def _on_converted(self, doc: Document, conv: Conversion) -> None:
        if doc is not self.doc:
            return
        doc.conversion = conv
        self.pass_view = None
        r = conv.result
        if conv.aten_display is not self.aten_panel.full_graph:
            self.aten_panel.update_graph(conv.aten_display)
        self.right_panel.set_mode_enabled("pass", True)
        previewed = self.right_panel.full_graph
        if self.right_key == "pnnx" and previewed is not None and previewed.vocabulary == "pnnx" \
                and "pnnx" in conv.displays:
            self.right_panel.update_graph(conv.displays["pnnx"])  # in place: laid out already
            self.sync.set_index(conv.provenance["pnnx"])
            self._update_search_graphs()
        else:
            self.show_right(self.right_key)
        self.passes.set_records(r.records, conv.pass_counts)
        self.problems.set_diagnostics(conv.diagnostics)
        self.status(conversion_status(conv))
        if conv.exportable and not conv.diagnostics:
            if self.docks["problems"].isVisible() and not self.docks["problems"].visibleRegion().isEmpty():
                self.docks["passes"].raise_()  # nothing to fix: show what the conversion did
        elif not conv.exportable:
            self.docks["problems"].raise_()
        self._refresh_inspector()
        self._update_enabled()
        self.conversionChanged.emit()

    def diagnostics(self) -> list:
        """What Problems lists: the conversion's diagnostics and unreadable weights."""
        conv = self.doc.conversion if self.doc else None
        return conv.diagnostics if conv is not None else []

    # ------------------------------------------------------------------ right view
    def show_right(self, key: str) -> None:
        """Show the pnnx graph, the ncnn graph, or the selected pass's snapshot on the right."""
        conv = self.doc.conversion if self.doc else None
        if key == "pass":
            i = self.passes.current_index()
            if conv is None:
                return
            if i < 0:
                i = len(conv.result.records) - 1
                self.passes.select_pass(i)  # triggers _on_pass_selected
                return
            self._on_pass_selected(i)
            return
        self.right_key = key
        self.pass_view = None
        self.right_panel.set_mode(key)
        self.right_panel.title.setText("")
        self._forget_right_node()
        if conv is None:
            return
        disp = conv.displays.get(key)
        if disp is None:
            self.right_panel.show_graph(None, message=f"No {key} graph (the conversion stopped before it)")
            self.sync.set_index(None)
        else:
            self.right_panel.show_graph(disp)
            self.sync.set_index(conv.provenance.get(key))
        self._update_search_graphs()

    def _on_pass_selected(self, index: int) -> None:
        conv = self.doc.conversion if self.doc else None
        if conv is None or index < 0:
            return
        self.runner.submit("Pass snapshot", pass_snapshot, conv, index, group="pass",
                           on_result=lambda pv, c=conv: self._on_pass_view(c, pv))

    def _on_pass_view(self, conv: Conversion, pv: PassView) -> None:
        if self.doc is None or self.doc.conversion is not conv:
            return
        self.pass_view = pv
        self.right_panel.set_mode("pass")
        rec = conv.result.records[pv.index]
        self.right_panel.title.setText("")
        self.right_panel.mode.setItemText(self.right_panel.mode.findData("pass"), f"after {pv.index}. {rec.name}")
        self.right_panel.show_graph(pv.display, marks=pv.marks, keep_view=False)
        self.sync.set_index(pv.provenance)
        self._update_search_graphs()

    def step_pass(self, delta: int) -> None:
        names = self.passes.visible_pass_names()
        if not names:
            return
        view = self.passes.table
        row = view.currentIndex().row()
        row = 0 if row < 0 else max(0, min(self.passes.proxy.rowCount() - 1, row + delta))
        view.setCurrentIndex(self.passes.proxy.index(row, 0))

    # ------------------------------------------------------------------ inspector, tensors
    def _right_graph_key(self) -> str:
        return "snapshot" if self.pass_view is not None else self.right_key

    def _clear_inspector(self) -> None:
        self.inspector.show_message("Select a node to see its details.")

    def _forget_right_node(self) -> None:
        """The right view shows another graph: its node leaves the inspector."""
        cur = self.inspector.current
        if cur is not None and cur[0] != "aten":
            self._clear_inspector()

    def _refresh_inspector(self) -> None:
        """Show the inspected node again with the current data (a new conversion, a theme)."""
        cur = self.inspector.current
        if cur is None:
            return
        side = ATEN if cur[0] == "aten" else RIGHT
        panel = self.aten_panel if side == ATEN else self.right_panel
        if panel.graph is not None and panel.graph.node(cur[1]) is not None:
            self._show_in_inspector(side, cur[1])
        else:
            self._clear_inspector()

    def _show_in_inspector(self, side: str, name: str) -> None:
        panel = self.aten_panel if side == ATEN else self.right_panel
        g = panel.graph
        node = g.node(name) if g is not None else None
        if node is None:
            return
        op = g.operator(name)
        conv = self.doc.conversion if self.doc else None
        ctx = InspectorContext(self.doc.program if self.doc else None, dict(conv.provenance) if conv else {})
        view = "aten" if side == ATEN else self._right_graph_key()
        self.inspector.show_node(view, node, op, ctx)
        if side == ATEN and node.kind == "param" and op is not None:
            target = op.params.get("target")
            if target:  # show it in the tensors table and weight viewer, without raising them
                self._quiet_tensor = True
                try:
                    self.tensors.select_name(str(target))
                finally:
                    self._quiet_tensor = False

    def _on_link(self, kind: str, name: str) -> None:
        if kind == "tensor":
            self.docks["tensors"].raise_()
            self.tensors.select_name(name)
            return
        if kind == "aten":
            self.sync.select(ATEN, [name])
        elif kind in ("pnnx", "ncnn", "snapshot"):
            if kind in ("pnnx", "ncnn") and (self.pass_view is not None or self.right_key != kind):
                self.show_right(kind)
                QTimer.singleShot(0, lambda: self._select_when_ready(self.right_panel, RIGHT, [name]))
                return
            self.sync.select(RIGHT, [name])

    def _select_when_ready(self, panel: GraphPanel, side: str, names: list[str]) -> None:
        if panel.busy:
            panel.layoutReady.connect(lambda: self.sync.select(side, names), Qt.ConnectionType.SingleShotConnection)
        else:
            self.sync.select(side, names)

    def _on_tensor_selected(self, row: TensorRow) -> None:
        if self.doc is None:
            return
        if not self._quiet_tensor:
            self._select_tensor_node(row)
        if not row.stored:
            why = f": {row.reason}" if row.reason else " (no stored data)"
            self.weights.clear(f"{row.name} — {row.kind}{why}")
            return
        self.weight_name = row.name
        self.weights.show_loading(row.name)
        if not self._quiet_tensor:
            self.docks["weights"].raise_()
        self.runner.submit(f"Reading {row.name}", load_weight, self.doc.program, row.name, group="weight",
                           on_result=self._on_weight, report_errors=False,
                           on_error=lambda e, name=row.name: self._on_weight_failed(name, e))

    def _on_weight(self, data) -> None:
        if data.name == self.weight_name:
            self.weights.show_data(data)

    def _on_weight_failed(self, name: str, error: BaseException) -> None:
        from .errors import describe

        if name == self.weight_name:
            self.weights.clear(f"{name} — cannot be read: {describe(error)[0]}")

    def _select_tensor_node(self, row: TensorRow) -> None:
        """A tensor row picked in Tensors: select the graph node that holds it (the weight, the
        input or the output node), without raising anything."""
        g = self.aten_panel.graph
        if g is None:
            return
        if row.kind in ("input", "output"):
            name = row.graph_name if g.node(row.graph_name) is not None else ""
            if row.kind == "output" and not name:  # the output node is named after the model's output
                name = next((n.name for n in g.nodes if n.kind == "output" and row.graph_name in n.name), "")
        else:
            name = next((n.name for n in g.nodes if n.kind == "param" and n.name == row.graph_name), "")
        if name:
            self._quiet_tensor = True
            try:
                self.sync.select(ATEN, [name])
            finally:
                self._quiet_tensor = False

    # ------------------------------------------------------------------ problems, search
    def _on_problem(self, d) -> None:
        if d.plugin and not d.node:  # a plug-in file that does not load: open it where it breaks
            self.plugins.edit(d.plugin)
            return
        names = [n.strip() for n in d.node.split(",") if n.strip()]
        linked = self.sync.select(ATEN, names)
        if d.operator and d.operator not in linked and self.right_panel.graph is not None \
                and self.right_panel.graph.node(d.operator) is not None:
            self.right_panel.link(linked + [d.operator])

    def _update_search_graphs(self) -> None:
        graphs = []
        if self.aten_panel.full_graph is not None:
            graphs.append(("aten", self.aten_panel.full_graph))
        if self.right_panel.full_graph is not None:
            graphs.append((self._right_graph_key(), self.right_panel.full_graph))
        self.search.set_graphs(graphs)

    def _on_search_query(self, _text: str) -> None:
        hits = self.search.hits
        self.aten_panel.scene.set_hits([h.name for h in hits if h.view == "aten"])
        self.right_panel.scene.set_hits([h.name for h in hits if h.view != "aten"])

    def _on_search_hit(self, hit: SearchHit) -> None:
        side = ATEN if hit.view == "aten" else RIGHT
        panel = self.aten_panel if side == ATEN else self.right_panel
        if panel.graph is not None and panel.graph.node(hit.name) is None and panel.hide_params:
            panel.set_hide_params(False)  # a hidden parameter was found: show parameters
            self._select_when_ready(panel, side, [hit.name])
            return
        self.sync.select(side, [hit.name])

    def find(self) -> None:
        d = self.docks["search"]
        d.show()
        d.raise_()
        self.search.focus_edit()

    # ------------------------------------------------------------------ exporting
    def export_dialog(self) -> None:
        """File ▸ Export ncnn: ask about missing operators, then choose the file (non-blocking)."""
        self.exporter.start()

    def export_to(self, param_path: str, *, pnnx: bool | None = None, partial: bool = False,
                  python: bool | None = None):
        """Write ``<stem>.ncnn.param/.bin`` (and the pnnx files, and the Python scripts) in a worker."""
        return self.exporter.write(param_path, pnnx=pnnx, partial=partial, python=python)

    # ------------------------------------------------------------------ view actions
    def active_panel(self) -> GraphPanel:
        return self.right_panel if self.sync.last_side == RIGHT else self.aten_panel

    def set_hide_params(self, hide: bool) -> None:
        self.settings.set("view/hide_params", hide)
        for p in (self.aten_panel, self.right_panel):
            p.set_hide_params(hide)

    def set_linked_views(self, on: bool) -> None:
        """View ▸ Link Graph Views."""
        self.settings.set("view/linked", on)
        self.view_link.set_enabled(on, lead=self.sync.last_side)

    def set_scheme(self, scheme: str) -> None:
        self.settings.set("view/theme", scheme)
        theme.apply_scheme(scheme)
        self._retheme()

    def _apply_style(self) -> None:
        # palette() in a style sheet is resolved when it is set: set again on palette changes
        sheet = STYLE.read_text() if STYLE.exists() else ""
        if theme.is_dark() and DARK_STYLE.exists():
            sheet += "\n" + DARK_STYLE.read_text().replace("@ICONS@", ICON.parent.as_posix())
        self.setStyleSheet(sheet)

    def _retheme(self) -> None:
        if self._retheming:
            return
        self._retheming = True
        try:
            self._retheme_now()
        finally:
            self._retheming = False

    def _retheme_now(self) -> None:
        self._apply_style()
        gt = theme.graph_theme()
        for p in (self.aten_panel, self.right_panel):
            p.set_theme(gt)
        self.weights.apply_palette()
        self._refresh_inspector()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        palette_events = (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange)
        if event.type() in palette_events and hasattr(self, "actions"):
            self._retheme()

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.FocusIn:
            if obj is self.aten_panel.view:
                self.sync.last_side = ATEN
            elif obj is self.right_panel.view:
                self.sync.last_side = RIGHT
        return super().eventFilter(obj, event)

    def focus_other_view(self) -> None:
        target = self.aten_panel if self.sync.last_side == RIGHT else self.right_panel
        target.view.setFocus()

    # ------------------------------------------------------------------ status and tasks
    def status(self, text: str) -> None:
        self.status_label.setText(text)
        log.info("%s", text)

    def cancel_tasks(self) -> None:
        for t in self.runner.active:
            t.cancel()
        self.status("Stopped")

    def _update_enabled(self) -> None:
        a = self.actions
        has_doc = self.doc is not None
        has_conv = has_doc and self.doc.conversion is not None
        a.convert.setEnabled(has_doc)
        a.convert_options.setEnabled(has_doc)
        a.export.setEnabled(has_conv)
        for act in (a.show_pnnx, a.show_ncnn, a.next_pass, a.prev_pass):
            act.setEnabled(has_conv)

    def wait_settled(self, timeout_ms: int = 120_000) -> bool:
        """Turn the event loop until nothing runs anymore (tests, ``--screenshot``)."""
        import time

        from PySide6.QtCore import QCoreApplication

        deadline = time.monotonic() + timeout_ms / 1000
        quiet = 0
        while time.monotonic() < deadline:
            left = int((deadline - time.monotonic()) * 1000)
            self.runner.wait_idle(max(left, 1))
            QCoreApplication.processEvents()
            quiet = quiet + 1 if not self.runner.busy else 0
            if quiet >= 3:
                return True
        return False

    # ------------------------------------------------------------------ window events
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        files = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if files:
            event.acceptProposedAction()
            self.open_file(files[0])

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_state()
        # an export stops cleanly (nothing replaced); anything else is dropped: the application
        # then leaves at once (gui.app.main) instead of waiting for a layout or a torch run
        self.runner.stop(groups=("export",))
        if self.doc is not None and not self.runner.busy:
            self.doc.close()
        super().closeEvent(event)

    def sizeHint(self) -> QSize:
        return QSize(1480, 920)

    def about(self) -> None:
        box = QMessageBox(self)
        box.setWindowTitle(f"About {APP_NAME}")
        box.setText(f"<b>{APP_NAME}</b> {app_version()}")
        box.setInformativeText("Inspect PyTorch ExportedProgram packages (.pt2) and convert them to ncnn — "
                               "without torch. ATen and lowered graphs side by side, linked by provenance, "
                               "with every pass's diff.")
        box.open()
