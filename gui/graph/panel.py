"""A graph view with its header (:class:`~gui.graph.header.PanelHeader`: title, which graph to
show, what it holds, zoom, module groups, hide-parameters, fit) and, while Verify colours it, a
legend strip between the two (:meth:`GraphPanel.set_legend`).

:class:`GraphPanel` takes a :class:`~gui.graph.model.DisplayGraph`, groups it by module
(:func:`~gui.graph.grouping.groups_of`, usually made already by the worker that built the
graph), measures its nodes and boxes (GUI thread: font
metrics), runs the :class:`~gui.graph.hierarchy.HierarchicalLayout` through the
:class:`~gui.workers.TaskRunner` (a newer request cancels an older one), then builds the scene
from the placement. While a layout runs the old picture stays, with a message over it.

Which groups are open is the panel's state (:attr:`GraphPanel.expanded`, kept by module path
across graphs of the same model): a new graph opens as deep as stays readable
(:meth:`~gui.graph.grouping.GroupTree.default_expanded`); the Groups menu expands all, collapses
all or opens to a depth; clicking a box toggles it, keeping the box where it was on screen.
Selecting, linking or focusing a node hidden in a collapsed group opens the groups around it
first (:meth:`GraphPanel.reveal`).
"""
from __future__ import annotations

import logging
import time
from typing import Sequence

from PySide6.QtCore import QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QComboBox, QLabel, QMenu, QToolButton, QVBoxLayout, QWidget

from ..gcpause import gc_paused
from ..theme import GraphTheme
from ..workers import TaskContext, TaskRunner
from .grouping import ROOT, GroupTree, flat_tree, group_text, groups_of
from .header import PanelHeader
from .hierarchy import HierarchicalLayout, Placement
from .items import EdgeRef, GroupItem, NodeItem, group_box_sizes, group_header_widths, measure
from .model import PARAM, DisplayGraph
from .scene import GraphScene
from .tooltips import edge_tooltip, group_tooltip, node_tooltip
from .view import GraphView

log = logging.getLogger(__name__)

#: most nodes a reveal opens groups for (a selection linked to thousands of operators stays
#: shown on the collapsed boxes)
REVEAL_LIMIT = 200


def _run_layout(ctx: TaskContext, hl: HierarchicalLayout | None, graph: DisplayGraph, tree: GroupTree,
                sizes: list, box_sizes: list, expanded: frozenset[int],
                header_widths: list) -> tuple[HierarchicalLayout, Placement]:
    if hl is None:
        hl = HierarchicalLayout(graph, tree, sizes, box_sizes, header_widths=header_widths)
    return hl, hl.place(expanded, cancel=ctx)


def zoom_text(z: float) -> str:
    """``85%``; below 10 % one decimal (``2.5%``), never a misleading ``0%``."""
    pct = z * 100
    return f"{pct:.0f}%" if pct >= 9.95 else f"{pct:.1f}%" if pct >= 0.05 else "<0.1%"


class GraphPanel(QWidget):
    """One side of the window; see the module docstring."""

    nodeSelectionChanged = Signal(list)
    nodeActivated = Signal(str)
    layoutReady = Signal()
    layoutFailed = Signal()  #: a layout raised (its message is over the view)
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
        self.grouping = True  #: group by module (False: the flat graph)
        self.tree: GroupTree | None = None
        self.expanded: frozenset[int] = frozenset()
        self._expanded_paths: set[str] | None = None  #: kept across graphs of the same model
        self._hl: HierarchicalLayout | None = None
        self._sizes: list[tuple[float, float]] = []
        self._box_sizes: list[tuple[float, float]] = []
        self._group_text: list[tuple[str, str]] = []
        self._after_install: list = []
        self._pending_graph: DisplayGraph | None = None  #: what the running layout is for
        self.scene = GraphScene(theme, self)
        self.view = GraphView(self.scene, self)
        self.view.tooltip_for = self._tooltip
        self.scene.nodeSelectionChanged.connect(self.nodeSelectionChanged)
        self.scene.groupToggled.connect(self.toggle_group)
        self.view.groupMenuRequested.connect(self._group_menu)
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
        # a fixed width for about 12 characters: a long pass name is elided, never the counts
        self.mode.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.mode.setMinimumContentsLength(12)
        self.mode.activated.connect(lambda i: self.modeRequested.emit(self.mode.itemData(i)))
        self.info = QLabel("")
        self.info.setObjectName("panelInfo")
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
        self.groups_button = self._groups_button()
        self.header = PanelHeader([self.title, self.mode], self.info, self.zoom_label,
                                  [(self.groups_button, "groups"), (params_btn, "params"), (fit_btn, "fit")])

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.header)
        lay.addWidget(self.view, 1)
        self._vbox = lay
        self.legend: QWidget | None = None

    def set_legend(self, widget: QWidget) -> None:
        """Show ``widget`` (a legend) as a strip between the header and the view: it takes room
        from the view instead of covering part of the graph."""
        if self.legend is not None:
            self._vbox.removeWidget(self.legend)
        self.legend = widget
        self._vbox.insertWidget(1, widget)

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
        ``keep_view`` keeps zoom, centre, selection, marks and open groups; ``marks`` sets
        diff marks."""
        self.full_graph = graph
        if marks is not None or not keep_view:
            self._marks = dict(marks or {})
        if graph is None:
            if self._pending is not None:
                self._pending.cancel()
                self._pending = None
            self.graph = None
            self.tree, self._hl = None, None
            self.scene.clear_graph()
            self.view.minimap.rebuild()
            self.info.setText("")
            self.view.set_message(message)
            return
        shown = graph.without([PARAM]) if self.hide_params else graph
        t0 = time.perf_counter()
        sizes = measure(shown.nodes, self.scene.theme)
        tree = groups_of(shown) if self.grouping else flat_tree(len(shown.nodes))
        texts = group_text(tree)
        box_sizes = group_box_sizes(texts, self.scene.theme)
        if keep_view and self._expanded_paths is not None:
            expanded = frozenset(tree.ids(self._expanded_paths))
        else:
            expanded = frozenset(tree.default_expanded())
        self.timing = {"measure": time.perf_counter() - t0}
        self._layout(shown, tree, sizes, box_sizes, texts, expanded, None, keep_view)

    def _layout(self, graph: DisplayGraph, tree: GroupTree, sizes: list, box_sizes: list, texts: list,
                expanded: frozenset[int], hl: HierarchicalLayout | None, keep_view: bool,
                anchor: tuple[int, QPointF] | None = None) -> None:
        n = tree.visible_count(set(expanded))
        self._pending_graph = graph
        self.view.set_message(f"Laying out {n:,} nodes…" if n > 300 else "")
        self._pending = self.runner.submit(
            f"layout of the {self.key} graph", _run_layout, hl, graph, tree, sizes, box_sizes, expanded,
            group_header_widths(texts, self.scene.theme) if hl is None else [], group=f"layout:{self.key}", quiet=n < 300,
            on_result=lambda res, g=graph, t=tree, s=sizes, b=box_sizes, x=texts, k=keep_view, a=anchor:
            self._install(g, t, s, b, x, res, k, a),
            on_error=lambda _e: self._layout_failed())

    def _layout_failed(self) -> None:
        self.view.set_message("The graph could not be laid out (see the message).")
        self.layoutFailed.emit()

    def update_graph(self, graph: DisplayGraph) -> None:
        """Show new node data for the same graph in place when the structure is unchanged
        (no new layout), else lay it out again keeping the view."""
        shown = graph.without([PARAM]) if self.hide_params else graph
        if self._pending is None and self.scene.replace_nodes(shown):
            self.full_graph, self.graph = graph, shown
            if self._hl is not None:
                self._hl.graph = shown
            self._update_info()
            return
        self.show_graph(graph, keep_view=True)

    def _install(self, graph: DisplayGraph, tree: GroupTree, sizes: list, box_sizes: list, texts: list,
                 result: tuple[HierarchicalLayout, Placement], keep_view: bool,
                 anchor: tuple[int, QPointF] | None) -> None:
        with gc_paused():  # thousands of items: no collection walking the heap in between
            self._install_now(graph, tree, sizes, box_sizes, texts, result, keep_view, anchor)

    def _install_now(self, graph: DisplayGraph, tree: GroupTree, sizes: list, box_sizes: list, texts: list,
                     result: tuple[HierarchicalLayout, Placement], keep_view: bool,
                     anchor: tuple[int, QPointF] | None) -> None:
        self._pending = None
        hl, placement = result
        t0 = time.perf_counter()
        selected = self.scene.selected_names()
        linked = [self.scene.graph.nodes[i].name for i in self.scene.linked_indices] if self.scene.graph else []
        centre = self.view.mapToScene(self.view.viewport().rect().center())
        zoom = self.view.zoom
        keep_view = keep_view and self.graph is not None
        same = graph is self.graph
        self.graph, self.tree, self._hl = graph, tree, hl
        self._sizes, self._box_sizes, self._group_text = sizes, box_sizes, texts
        self.expanded = placement.expanded
        self._expanded_paths = tree.paths(placement.expanded)
        self.scene.set_graph(graph, sizes, placement, tree, texts)
        if not same:
            self.scene.set_marks(self._marks)
            if keep_view:
                self.scene.select(selected)
                self.scene.set_linked(linked)
        if anchor is not None and anchor[0] in placement.boxes:
            x0, y0, _x1, _y1 = placement.boxes[anchor[0]]
            old = anchor[1]
            self.view.set_zoom(zoom, QPointF(centre.x() + x0 - old.x(), centre.y() + y0 - old.y()))
        elif keep_view:
            self.view.set_zoom(zoom, centre)
        else:
            self.view.show_start()
        self.timing.update(layout=placement.seconds, scene=time.perf_counter() - t0)
        self.view.set_message("")
        QTimer.singleShot(0, self.view.minimap.rebuild)  # after the first frame
        self._update_info()
        log.debug("%s: %d nodes, %d boxes placed in %.3fs, scene in %.3fs", self.key, len(placement.nodes),
                  len(placement.boxes), placement.seconds, self.timing["scene"])
        todo, self._after_install = self._after_install, []
        for fn in todo:
            fn()
        self.layoutReady.emit()

    # ---------------------------------------------------------------- groups
    def _groups_button(self) -> QToolButton:
        btn = QToolButton()
        btn.setText("Groups")
        btn.setObjectName(f"{self.key}Groups")
        btn.setToolTip("Module groups: expand or collapse the nn.Module boxes")
        btn.setAutoRaise(True)
        btn.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(btn)
        self.expand_all_action = menu.addAction("Expand all", self.expand_all)
        self.collapse_all_action = menu.addAction("Collapse all", self.collapse_all)
        self.depth_menu = menu.addMenu("Expand to depth")
        self.depth_menu.aboutToShow.connect(self._fill_depth_menu)
        menu.addSeparator()
        self.grouping_action = menu.addAction("Group by module")
        self.grouping_action.setCheckable(True)
        self.grouping_action.setChecked(True)
        self.grouping_action.toggled.connect(self.set_grouping)
        btn.setMenu(menu)
        return btn

    def _fill_depth_menu(self) -> None:
        self.depth_menu.clear()
        deepest = self.tree.max_depth if self.tree is not None else 0
        ag = QActionGroup(self.depth_menu)
        for d in range(1, max(deepest, 1) + 1):
            a = self.depth_menu.addAction(f"{d}", lambda d=d: self.expand_to_depth(d))
            ag.addAction(a)

    def set_expanded(self, groups: set[int] | frozenset[int], *, anchor_group: int | None = None,
                     then=None) -> None:
        """Open exactly these groups (a worker lays out what changed; ``then`` runs once the
        new picture is in)."""
        if self.tree is None or self.graph is None or self._hl is None:
            return
        if self._pending is not None and self._pending_graph is not self.graph:
            return  # a new graph is on its way: these groups are the old one's
        groups = frozenset(groups)
        if then is not None:
            self._after_install.append(then)
        if groups == self.expanded and self._pending is None:
            todo, self._after_install = self._after_install, []
            for fn in todo:
                fn()
            return
        anchor = None
        if anchor_group is not None and self.scene.layout is not None and anchor_group in self.scene.layout.boxes:
            x0, y0, _x1, _y1 = self.scene.layout.boxes[anchor_group]
            anchor = (anchor_group, QPointF(x0, y0))
        self._layout(self.graph, self.tree, self._sizes, self._box_sizes, self._group_text, groups, self._hl, True,
                     anchor)

    def toggle_group(self, gid: int) -> None:
        """Expand a collapsed group or collapse an expanded one (the box stays in place)."""
        if self.tree is None or gid == ROOT:
            return
        if gid in self.expanded:
            new = set(self.expanded) - set(self.tree.subtree(gid))
        else:
            new = set(self.expanded) | {gid} | set(self.tree.group_ancestors(gid))
        self.set_expanded(new, anchor_group=gid)

    def expand_subtree(self, gid: int) -> None:
        """Open a group and every group inside it."""
        if self.tree is not None and gid != ROOT:
            self.set_expanded(set(self.expanded) | set(self.tree.subtree(gid)) | set(self.tree.group_ancestors(gid)),
                              anchor_group=gid)

    def collapse_subtree(self, gid: int) -> None:
        """Close the groups inside a group, keeping it open."""
        if self.tree is not None:
            self.set_expanded(set(self.expanded) - (set(self.tree.subtree(gid)) - {gid}), anchor_group=gid)

    def _group_menu(self, gid: int, global_pos) -> None:
        """Right click on a module box."""
        if self.tree is None or gid == ROOT:
            return
        g = self.tree.groups[gid]
        menu = QMenu(self)
        menu.addSection(g.label)
        if gid in self.expanded:
            menu.addAction("Collapse", lambda: self.toggle_group(gid))
        else:
            menu.addAction("Expand", lambda: self.toggle_group(gid))
        if g.children:
            menu.addAction("Expand everything inside", lambda: self.expand_subtree(gid))
            if gid in self.expanded:
                menu.addAction("Collapse everything inside", lambda: self.collapse_subtree(gid))
        menu.addSeparator()
        menu.addAction("Expand all", self.expand_all)
        menu.addAction("Collapse all", self.collapse_all)
        menu.popup(global_pos)

    def expand_all(self) -> None:
        if self.tree is not None:
            self.set_expanded(self.tree.all_groups())

    def collapse_all(self) -> None:
        self.set_expanded(set())

    def expand_to_depth(self, depth: int) -> None:
        if self.tree is not None:
            self.set_expanded(self.tree.to_depth(depth))

    def set_grouping(self, on: bool) -> None:
        """Group by module (True) or show the flat graph."""
        if on == self.grouping:
            return
        self.grouping = on
        self.grouping_action.blockSignals(True)
        self.grouping_action.setChecked(on)
        self.grouping_action.blockSignals(False)
        if self.full_graph is not None:
            self.show_graph(self.full_graph, keep_view=True)

    def reveal(self, indices: Sequence[int], then=None) -> bool:
        """Open the groups hiding these nodes; ``then`` runs once they are shown. False when
        nothing had to be opened (``then`` is not called)."""
        if self.tree is None:
            return False
        hidden = self.scene.hidden(indices)[:REVEAL_LIMIT]
        if not hidden:
            return False
        new = set(self.expanded)
        for i in hidden:
            new.update(self.tree.ancestors(i))
        self.set_expanded(new, then=then)
        return True

    def _update_info(self) -> None:
        graph, full = self.graph, self.full_graph
        if graph is None or full is None:
            self.info.setText("")
            self.info.setToolTip("")
            self.header.relayout()
            return
        real = [x for x in full.nodes if not x.ghost]
        n_ops = sum(1 for x in real if x.kind == "op")
        n_io = sum(1 for x in real if x.kind in ("input", "output"))
        n_weights = sum(1 for x in real if x.kind == PARAM) + full.unused_params
        problems = sum(1 for x in graph.nodes if x.problem)
        t = self.scene.theme
        if full.vocabulary == "ncnn":  # what the status bar and the .param file count: every layer
            layers = len(full.source.ops) if full.source is not None else n_ops + n_io + n_weights
            text = f"{layers:,} layers"
            tip = (f"{layers:,} ncnn layers, every layer of the .param file (as the status bar counts them): "
                   f"{n_ops:,} operators, {n_io:,} Input, {n_weights:,} MemoryData")
        else:
            text = f"{n_ops:,} ops"
            tip = (f"{n_ops:,} operators — without the {n_io:,} inputs/outputs and {n_weights:,} weights "
                   f"({n_ops + n_io + n_weights:,} graph nodes); the Passes table counts operators the same way")
        if problems:
            text += f" · <span style='color:{t.accent('error').name()}'>{problems} unsupported</span>"
        if self._marks:
            counts = {k: sum(1 for m in self._marks.values() if m == k) for k in ("added", "removed", "changed")}
            text += "".join(f" <span style='color:{t.accent(k).name()}'>{sign}{counts[k]}</span>"
                            for k, sign in (("added", "+"), ("removed", "−"), ("changed", "~")) if counts[k])
            tip += "; this pass added (+), removed (−) and changed (~) the marked operators"
        self.info.setText(text)
        self.info.setToolTip(tip)
        self.header.relayout()

    @property
    def busy(self) -> bool:
        return self._pending is not None and not self._pending.is_done

    def set_theme(self, theme: GraphTheme) -> None:
        self.scene.set_theme(theme)
        self.view.resetCachedContent()
        self.view.minimap.rebuild()  # the thumbnail is drawn in the theme's colours
        self.header.refresh_icons()
        self._update_info()

    # ---------------------------------------------------------------- selection helpers
    def select(self, names: Sequence[str], *, focus: bool = True, emit: bool = False) -> list[int]:
        """Select nodes by name; with ``focus`` the view scrolls to them, opening the groups
        that hide them first."""
        idx = self.scene.select(names, emit=emit)
        if focus and idx:
            self._focus(idx)
        return idx

    def link(self, names: Sequence[str], *, focus: bool = True) -> list[int]:
        idx = self.scene.set_linked(names)
        if focus and idx:
            self._focus(idx)
        return idx

    def _focus(self, idx: list[int]) -> None:
        if not self.reveal(idx, then=lambda: self.view.focus_indices(idx)):
            self.view.focus_indices(idx)

    def _show_zoom(self, z: float) -> None:
        self.zoom_label.setText(zoom_text(z))

    def _tooltip(self, item: NodeItem | EdgeRef | GroupItem) -> str:
        g = self.graph
        if g is None:
            return ""
        if isinstance(item, GroupItem):
            return group_tooltip(self.tree.groups[item.gid], item.gid in self.expanded) if self.tree else ""
        if isinstance(item, NodeItem):
            return node_tooltip(item.node, g.operator(item.node.name))
        e = item.edge
        return edge_tooltip(e, g.nodes[e.src], g.nodes[e.dst])
