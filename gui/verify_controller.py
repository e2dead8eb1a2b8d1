"""The Verify flow of the main window: :class:`VerifyController`.

It owns the Verify action (Model menu, toolbar, Ctrl+Shift+V), runs
:func:`gui.verify_model.verify_conversion` through the window's task runner (progress in the
status bar, Stop cancels it), and shows the result: the Verify dock
(:class:`gui.panels.verify_panel.VerifyPanel`), both graph views coloured by error through
:meth:`gui.graph.scene.GraphScene.set_tints` with an :class:`gui.verify_legend.ErrorLegend`
in their corner, and the first divergent layer flagged, selected in both views, scrolled to
and shown in the inspector. Colours are applied again after every new layout of a view (the
user switched the right view, hid parameters), and dropped when the model is converted again
or another file is opened.

Without torch or ncnn the action reports what to install (the CPU build of torch) and nothing
else changes.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence

from engine.verify import INSTALL_COMMAND, MissingDependency

from . import icons
from .errors import describe
from .graph.panel import GraphPanel
from .panels.verify_panel import VerifyPanel
from .sync import ATEN, RIGHT
from .verify_legend import ErrorLegend
from .verify_model import VerifyRun, verify_conversion
from .verify_scale import ErrorScale
from .workers import Task

if TYPE_CHECKING:  # pragma: no cover
    from .main_window import MainWindow

log = logging.getLogger(__name__)

SHORTCUT = "Ctrl+Shift+V"
MISSING = ("Verify runs the model in PyTorch and in ncnn and compares every layer, so it needs torch and ncnn; "
           "{package} is not installed here. Install ncnn and the CPU build of torch (a plain 'pip install torch' "
           "pulls the multi-GB CUDA build):\n\n" + INSTALL_COMMAND + "\n\nEverything else — opening, "
           "inspecting, converting, exporting — works without them.")
LEGEND_SUBTITLES = {"error": "whole model", "own": "each layer alone"}
DOCK_HEIGHT = 330  #: the Verify dock grows to this height to show a result


class VerifyController(QObject):
    """See the module docstring."""

    def __init__(self, window: "MainWindow", panel: VerifyPanel):
        super().__init__(window)
        self.win = window
        self.panel = panel
        self.run: VerifyRun | None = None
        self.scale: ErrorScale | None = None
        self.task: Task | None = None
        self._after_convert = False
        self.action = self._install_action()
        panel.run_button.setDefaultAction(self.action)
        panel.layerActivated.connect(self.select_layer)
        panel.colouringChanged.connect(self.apply_colours)
        # after the views took the new palette's theme (they get the same event, in any order)
        panel.paletteChanged.connect(lambda: QTimer.singleShot(0, self.apply_colours))
        self.legends: dict[str, ErrorLegend] = {}
        for key, gp in ((ATEN, window.aten_panel), (RIGHT, window.right_panel)):
            legend = ErrorLegend()
            legend.hide()
            gp.set_legend(legend)  # a strip above the view: it never covers a node
            self.legends[key] = legend
            gp.layoutReady.connect(lambda gp=gp: self._colour_panel(gp))
        window.documentChanged.connect(self._on_document)
        window.conversionChanged.connect(self._on_conversion)
        window.conversionRefused.connect(self._on_convert_failed)
        self._update_enabled()

    def _install_action(self) -> QAction:
        win = self.win
        a = QAction(icons.icon("verify"), "&Verify against PyTorch", win)
        a.setIconText("Verify")
        a.setShortcut(QKeySequence(SHORTCUT))
        tip = "Compare every ncnn layer with PyTorch and find the first one that diverges"
        a.setStatusTip(tip)
        a.setToolTip(f"{tip} ({a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)})")
        a.setObjectName("verifyAction")
        a.triggered.connect(self.verify)
        win.addAction(a)
        acts = win.actions
        for top in win.menuBar().actions():  # the Model menu: after Convert with Options
            menu = top.menu()
            if menu is not None and acts.convert in menu.actions():
                menu.insertAction(acts.stop, a)
        acts.toolbar.insertAction(acts.export, a)
        return a

    def _update_enabled(self) -> None:
        self.action.setEnabled(self.win.doc is not None)

    # ---------------------------------------------------------------- running
    def verify(self) -> Task | None:
        """Verify the current conversion (converting first when there is none yet, or when one
        is running)."""
        win = self.win
        doc = win.doc
        if doc is None:
            return None
        running = next((t for t in win.runner.active if t.group == "convert"), None)
        if doc.conversion is None or running is not None:
            self._after_convert = True
            self.panel.show_running("Converting first, then verifying…")
            task = running or win.convert()
            if task is not None:
                task.failed.connect(self._on_convert_failed)
            return None
        if not doc.conversion.result.ok:
            self._unconverted(doc.conversion)
            return None
        return self._start(doc, doc.conversion)

    def _unconverted(self, conversion) -> None:
        """Nothing to run in ncnn while operators are missing: say which, in Problems."""
        n = len(conversion.result.errors)
        what = f"{n} operator{' is' if n == 1 else 's are'} not converted"
        self.panel.show_message(f"Cannot verify: {what} — see the Problems panel (click a row to find it in the "
                                "graphs).", error=True)
        self.win.status(f"Cannot verify: {what} — see Problems")
        self.win.docks["problems"].show()
        self.win.docks["problems"].raise_()

    def _on_convert_failed(self, _error) -> None:
        if self._after_convert:
            self._after_convert = False
            self.panel.show_message("The conversion failed, so there is nothing to verify (see the message).",
                                    error=True)

    def _start(self, doc, conversion) -> Task:
        self._after_convert = False
        self.panel.show_running(f"Verifying {doc.name}: running the model in PyTorch and in ncnn, layer by layer…")
        self.win.status(f"Verifying {doc.name}…")
        self.task = self.win.runner.submit(
            "Verification", verify_conversion, doc, conversion, group="verify", report_errors=False,
            on_result=lambda run, d=doc: self._on_result(d, run),
            on_error=lambda e, d=doc: self._on_error(d, e),
            on_progress=self._on_progress)
        self.task.finished.connect(lambda t=self.task: self._on_finished(t))
        return self.task

    def _on_progress(self, done: int, total: int, message: str) -> None:
        if message and total:
            self.panel.show_running(f"Verifying: {message} ({done}/{total})")

    def _on_finished(self, task: Task) -> None:
        if task is self.task:
            self.task = None
            if task.state == "cancelled":
                self.panel.show_message("Verification stopped." if self.run is None else
                                        "Verification stopped; showing the previous result.")

    def _on_error(self, doc, error: BaseException) -> None:
        if doc is not self.win.doc:
            return
        if isinstance(error, MissingDependency):
            message = MISSING.format(package=error.package)
            self.win.reporter.report("Verify needs torch and ncnn", message)
            self.panel.show_message(message, error=True)
            self.win.status(f"Verify needs torch and ncnn: {INSTALL_COMMAND}")
            return
        self.win.reporter.report("Verification failed", error)
        self.panel.show_message(f"Verification failed: {describe(error)[0]}", error=True)
        self.win.status("Verification failed")

    def _on_result(self, doc, run: VerifyRun) -> None:
        win = self.win
        if doc is not win.doc or doc.conversion is not run.conversion:
            return  # another file or conversion since: the result is stale
        self.run = run
        self.scale = ErrorScale(run.tolerance)
        self.panel.show_run(run, self.scale)
        self.apply_colours()
        dock = win.docks.get("verify")
        if dock is not None:
            dock.show()
            dock.raise_()
            if not dock.isFloating() and dock.height() < DOCK_HEIGHT:
                win.resizeDocks([dock], [DOCK_HEIGHT], Qt.Orientation.Vertical)
        r = run.result
        first = run.first_divergent
        if first is None:
            verdict = ("no divergent layer; outputs drift as rounding adds up" if r.drift else
                       "every output within tolerance" if r.ok else "outputs beyond tolerance, no single layer to blame")
            win.status(f"Verified {len(r.layers)} layers in {r.seconds:.1f} s: {verdict}")
            return
        win.status(f"Verified {len(r.layers)} layers: first divergent layer {first.layer} ({first.type})"
                   + (f" from {first.module}" if first.module else ""))
        if win.right_key != "ncnn" or win.pass_view is not None:
            win.show_right("ncnn")  # the layers are ncnn layers: show them
        self.select_layer(first.layer)

    # ---------------------------------------------------------------- selection
    def select_layer(self, name: str) -> None:
        """Select layer ``name`` in both views (what stands for it there), scroll to it and show
        it in the inspector, the plot and the table."""
        run = self.run
        rec = run.result.layer(name) if run is not None else None
        if rec is None:
            return
        self.panel.select_layer(name)
        win = self.win
        for gp in (win.aten_panel, win.right_panel):
            if gp.busy:  # a layout is on its way: select once it is there
                gp.layoutReady.connect(lambda: self.select_layer(name), Qt.ConnectionType.SingleShotConnection)
                return
        aten = self._present(win.aten_panel, run.names_in_view(rec, "aten"))
        right_graph = win.right_panel.graph
        right = self._present(win.right_panel, run.names_in_view(rec, right_graph.vocabulary, win.sync.index)
                              if right_graph is not None else [])
        if right:
            win.sync.select(RIGHT, right)  # selected there, its ATen nodes linked, inspector
            win.aten_panel.select(aten)  # and selected in the ATen view too
        elif aten:
            win.sync.select(ATEN, aten)

    @staticmethod
    def _present(gp: GraphPanel, names: list[str]) -> list[str]:
        return [n for n in names if gp.scene.index_of(n) is not None]

    # ---------------------------------------------------------------- colours
    def apply_colours(self) -> None:
        for gp in (self.win.aten_panel, self.win.right_panel):
            self._colour_panel(gp)

    def _colour_panel(self, gp: GraphPanel) -> None:
        legend = self.legends[ATEN if gp is self.win.aten_panel else RIGHT]
        run, scale = self.run, self.scale
        if run is None or scale is None or gp.graph is None or not self.panel.colouring:
            gp.scene.set_tints({}, [])
            legend.hide()
            return
        theme = gp.scene.theme
        measure = self.panel.measure
        tints, flagged = {}, []
        for name, verdict in run.verdicts(gp.graph).items():
            value = verdict.value(measure)
            tints[name] = scale.neutral(theme) if value is None else scale.fill(value, theme)
            if verdict.flagged:
                flagged.append(name)
        gp.scene.set_tints(tints, flagged)
        legend.set_scale(scale, theme, "max rel. error", LEGEND_SUBTITLES[measure])
        legend.show()

    # ---------------------------------------------------------------- document changes
    def _drop(self, message: str) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None
        self.run, self.scale = None, None
        self.panel.clear(message)
        self.apply_colours()

    def _on_document(self) -> None:
        self._after_convert = False
        self._drop("Not verified yet — Model ▸ Verify against PyTorch "
                   f"({QKeySequence(SHORTCUT).toString(QKeySequence.SequenceFormat.NativeText)}).")
        self._update_enabled()

    def _on_conversion(self) -> None:
        had = self.run is not None
        self._drop("The model was converted again: verify again to compare it with PyTorch." if had else
                   "Not verified yet — Model ▸ Verify against PyTorch "
                   f"({QKeySequence(SHORTCUT).toString(QKeySequence.SequenceFormat.NativeText)}).")
        if self._after_convert and self.win.doc is not None and self.win.doc.conversion is not None:
            self._after_convert = False
            if self.win.doc.conversion.result.ok:
                self._start(self.win.doc, self.win.doc.conversion)
            else:
                self._unconverted(self.win.doc.conversion)
