"""A graph view with its header: title, which graph to show, hide-parameters, fit, status.

:class:`GraphPanel` takes a :class:`~gui.graph.model.DisplayGraph`, measures its nodes (GUI
thread: font metrics), runs :func:`~gui.graph.layout.layered_layout` through the
:class:`~gui.workers.TaskRunner` (a newer request cancels an older one), then builds the scene
from the result. While a layout runs the old picture stays, with a message over it.
"""
from __future__ import annotations

import logging
import time
from typing import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget)

from ..theme import GraphTheme
from ..workers import TaskContext, TaskRunner
from .items import EdgeItem, NodeItem, measure
from .layout import LayoutResult, layered_layout
from .model import PARAM, DisplayGraph
from .scene import GraphScene
from .tooltips import edge_tooltip, node_tooltip
from .view import GraphView

log = logging.getLogger(__name__)


def _run_layout(ctx: TaskContext, graph: DisplayGraph, sizes: list[tuple[float, float]]) -> LayoutResult:
    return layered_layout(graph.layout_input(sizes), cancel=ctx)


class GraphPanel(QWidget):
    """One side of the window; see the module docstring."""

    nodeSelectionChanged = Signal(list)
    nodeActivated = Signal(str)
    layoutReady = Signal()
    modeRequested = Signal(str)  #: the user picked another graph in the combo
    hideParamsChanged = Signal(bool)

    def __init__(self, title: str, runner: TaskRunner, theme: GraphTheme, *, key: str,
                 modes: Sequence[tuple[str, str]] = (), parent: QWidget | None = None):
        super().__init__(parent)
        self.key = key
        self.runner = runner
        self.full_graph: DisplayGraph | None = None  #: as given, with parameters
        self.graph: DisplayGraph | None = None  #: as shown
        self.hide_params = False
        self.timing: dict[str, float] = {}
        self._pending = None
        self._marks: dict[str, str] = {}
        self.scene = GraphScene(theme, self)
        self.view = GraphView(self.scene, self)
        self.view.tooltip_for = self._tooltip
        self.scene.nodeSelectionChanged.connect(self.nodeSelectionChanged)
        self.view.nodeActivated.connect(self.nodeActivated)
        self.view.zoomChanged.connect(self._show_zoom)

        self.title = QLabel(title)
        self.title.setObjectName("panelTitle")
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.mode = QComboBox()
        self.mode.setObjectName(f"{key}Mode")
        for mkey, label in modes:
            self.mode.addItem(label, mkey)
        self.mode.setVisible(bool(modes))
        self.mode.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.mode.activated.connect(lambda i: self.modeRequested.emit(self.mode.itemData(i)))
        self.info = QLabel("")
        self.info.setObjectName("panelInfo")
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.info.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.zoom_label = QLabel("")
        self.zoom_label.setMinimumWidth(40)
        self.zoom_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

        self.params_action = QAction("Parameters", self)
        self.params_action.setCheckable(True)
        self.params_action.setChecked(True)
        self.params_action.setToolTip("Show parameter, buffer and constant nodes")
        self.params_action.toggled.connect(lambda on: self.set_hide_params(not on))
        params_btn = QToolButton()
        params_btn.setDefaultAction(self.params_action)
        params_btn.setAutoRaise(True)
        fit_action = QAction("Fit", self)
        fit_action.setToolTip("Fit the graph in the view (F)")
        fit_action.triggered.connect(self.view.fit)
        fit_btn = QToolButton()
        fit_btn.setDefaultAction(fit_action)
        fit_btn.setAutoRaise(True)

        header = QWidget()
        header.setObjectName("panelHeader")
        hl = QHBoxLayout(header)
        hl.setContentsMargins(8, 3, 4, 3)
        hl.setSpacing(6)
        hl.addWidget(self.title)
        hl.addWidget(self.mode)
        hl.addWidget(self.info, 1)
        hl.addWidget(self.zoom_label)
        hl.addWidget(params_btn)
        hl.addWidget(fit_btn)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(header)
        lay.addWidget(self.view, 1)

    # ---------------------------------------------------------------- content
    def set_mode(self, key: str) -> None:
        i = self.mode.findData(key)
        if i >= 0:
            self.mode.setCurrentIndex(i)

    def set_mode_enabled(self, key: str, enabled: bool) -> None:
        i = self.mode.findData(key)
        if i >= 0:
            item = self.mode.model().item(i)
            if item is not None:
                item.setEnabled(enabled)

    def set_hide_params(self, hide: bool) -> None:
        if hide == self.hide_params:
            return
        self.hide_params = hide
        self.params_action.blockSignals(True)
        self.params_action.setChecked(not hide)
        self.params_action.blockSignals(False)
        self.hideParamsChanged.emit(hide)
        if self.full_graph is not None:
            self.show_graph(self.full_graph, keep_view=True)

    def show_graph(self, graph: DisplayGraph | None, *, message: str = "", keep_view: bool = False,
                   marks: dict[str, str] | None = None) -> None:
        """Lay ``graph`` out in a worker and show it (None: clear, showing ``message``).
        ``keep_view`` keeps zoom, centre, selection and marks; ``marks`` sets diff marks."""
        self.full_graph = graph
        if marks is not None or not keep_view:
            self._marks = dict(marks or {})
        if graph is None:
            if self._pending is not None:
                self._pending.cancel()
                self._pending = None
            self.graph = None
            self.scene.clear_graph()
            self.info.setText("")
            self.view.set_message(message)
            return
        shown = graph.without([PARAM]) if self.hide_params else graph
        t0 = time.perf_counter()
        sizes = measure(shown.nodes, self.scene.theme)
        self.timing = {"measure": time.perf_counter() - t0}
        n = len(shown.nodes)
        self.view.set_message(message or (f"Laying out {n:,} nodes…" if n > 300 else ""))
        self._pending = self.runner.submit(
            f"layout of the {self.key} graph", _run_layout, shown, sizes, group=f"layout:{self.key}",
            quiet=n < 300,
            on_result=lambda res, g=shown, s=sizes, k=keep_view: self._install(g, s, res, k),
            on_error=lambda _e: self.view.set_message("The graph could not be laid out (see the message)."))

    def update_graph(self, graph: DisplayGraph) -> None:
        """Show new node data for the same graph in place when the structure is unchanged
        (no new layout), else lay it out again keeping the view."""
        shown = graph.without([PARAM]) if self.hide_params else graph
        if self._pending is None and self.scene.replace_nodes(shown):
            self.full_graph, self.graph = graph, shown
            self._update_info()
            return
        self.show_graph(graph, keep_view=True)

    def _install(self, graph: DisplayGraph, sizes: list, result: LayoutResult, keep_view: bool) -> None:
        self._pending = None
        t0 = time.perf_counter()
        selected = self.scene.selected_names()
        linked = [self.scene.nodes[i].node.name for i in self.scene.linked_indices]
        centre = self.view.mapToScene(self.view.viewport().rect().center())
        zoom = self.view.zoom
        keep_view = keep_view and self.graph is not None
        self.graph = graph
        self.scene.set_graph(graph, sizes, result)
        self.scene.set_marks(self._marks)
        if keep_view:
            self.scene.select(selected)
            self.scene.set_linked(linked)
            self.view.set_zoom(zoom, centre)
        else:
            self.view.show_start()
        self.timing.update(layout=result.seconds, scene=time.perf_counter() - t0)
        self.view.set_message("")
        self._update_info()
        log.debug("%s: %d nodes laid out in %.3fs, scene in %.3fs", self.key, len(graph.nodes), result.seconds,
                  self.timing["scene"])
        self.layoutReady.emit()

    def _update_info(self) -> None:
        graph = self.graph
        if graph is None:
            self.info.setText("")
            return
        n_ops = sum(1 for x in graph.nodes if x.kind == "op")
        problems = sum(1 for x in graph.nodes if x.problem)
        t = self.scene.theme
        ghosts = sum(1 for x in graph.nodes if x.ghost and x.kind == "op")
        text = f"{n_ops - ghosts:,} ops"
        if problems:
            text += f" · <span style='color:{t.accent('error').name()}'>{problems} unsupported</span>"
        if self._marks:
            counts = {k: sum(1 for m in self._marks.values() if m == k) for k in ("added", "removed", "changed")}
            text += "".join(f" <span style='color:{t.accent(k).name()}'>{sign}{counts[k]}</span>"
                            for k, sign in (("added", "+"), ("removed", "−"), ("changed", "~")) if counts[k])
        self.info.setText(text)

    @property
    def busy(self) -> bool:
        return self._pending is not None and not self._pending.is_done

    def set_theme(self, theme: GraphTheme) -> None:
        self.scene.set_theme(theme)
        self.view.resetCachedContent()

    # ---------------------------------------------------------------- selection helpers
    def select(self, names: Sequence[str], *, focus: bool = True, emit: bool = False) -> list[int]:
        idx = self.scene.select(names, emit=emit)
        if focus and idx:
            self.view.focus_indices(idx)
        return idx

    def link(self, names: Sequence[str], *, focus: bool = True) -> list[int]:
        idx = self.scene.set_linked(names)
        if focus and idx:
            self.view.focus_indices(idx)
        return idx

    def _show_zoom(self, z: float) -> None:
        self.zoom_label.setText(f"{z * 100:.0f}%")

    def _tooltip(self, item: NodeItem | EdgeItem) -> str:
        g = self.graph
        if g is None:
            return ""
        if isinstance(item, NodeItem):
            return node_tooltip(item.node, g.operator(item.node.name))
        e = item.edge
        return edge_tooltip(e, g.nodes[e.src], g.nodes[e.dst])
