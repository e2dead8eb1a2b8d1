"""The scene of one graph view, created from a display graph and its layout result.

:class:`GraphScene` turns a :class:`~gui.graph.model.DisplayGraph` plus a
:class:`~gui.graph.layout.LayoutResult` (computed in a worker) into items, and keeps the
per-name state the rest of the window drives: selection (emitted as ``nodeSelectionChanged``
when the user changes it), provenance links to the other view, search hits, diff marks, and
fill colours set from outside (tints: verify's error colouring) with flagged nodes. It also
owns the level of detail: below :data:`~gui.graph.items.OVERVIEW_BELOW` the individual items are
hidden and one :class:`~gui.graph.items.OverviewItem` draws everything.
"""
from __future__ import annotations

import logging
from typing import Iterable, Mapping, Sequence

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainterPath
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QGraphicsScene

from ..theme import GraphTheme
from .items import EdgeItem, EdgePens, NodeItem, OverviewItem, arrow_heads
from .layout import LayoutResult
from .model import DisplayGraph

log = logging.getLogger(__name__)

MARGIN = 40.0


class _Layer(QGraphicsItem):
    """An invisible parent, so a whole class of items is shown or hidden at once."""

    def __init__(self) -> None:
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemHasNoContents, True)

    def boundingRect(self) -> QRectF:
        return QRectF()

    def paint(self, painter, option, widget=None) -> None:  # pragma: no cover - no contents
        pass


class GraphScene(QGraphicsScene):
    """Items of one graph; see the module docstring."""

    #: the user changed the selection (names of the selected nodes)
    nodeSelectionChanged = Signal(list)

    def __init__(self, theme: GraphTheme, parent=None):
        super().__init__(parent)
        self.theme = theme
        self.graph: DisplayGraph | None = None
        self.layout: LayoutResult | None = None
        self.sizes: list[tuple[float, float]] = []
        self.nodes: list[NodeItem] = []
        self.edges: list[EdgeItem] = []
        self.preds: list[list[int]] = []
        self.succs: list[list[int]] = []
        self._edges_of: list[list[int]] = []
        self._rects = np.zeros((0, 4))
        self._overview: OverviewItem | None = None
        self._detail_root: _Layer | None = None
        self._detail = True
        self._linked: set[int] = set()
        self._hits: set[int] = set()
        self._marks: dict[int, str] = {}
        self._tints: dict[int, QColor] = {}
        self._flagged: set[int] = set()
        self._emphasized: list[int] = []
        self._selected: set[int] = set()
        self._arrows: QGraphicsPathItem | None = None
        self._pens = EdgePens(theme)
        self.setBackgroundBrush(theme.background)

    # ---------------------------------------------------------------- building
    def set_graph(self, graph: DisplayGraph, sizes: Sequence[tuple[float, float]], layout: LayoutResult) -> None:
        """Replace the content with ``graph`` placed by ``layout``."""
        self.clear()
        self.graph, self.layout, self.sizes = graph, layout, list(sizes)
        self.nodes, self.edges = [], []
        self._linked, self._hits, self._marks, self._emphasized, self._selected = set(), set(), {}, [], set()
        self._tints, self._flagged = {}, set()
        self.preds, self.succs = graph.neighbours()
        self._edges_of = [[] for _ in graph.nodes]
        # detail items: edges, then arrow heads, then nodes (each group under its own parent,
        # so the stacking needs no per-item z value and the whole detail level hides at once)
        root = _Layer()
        self.addItem(root)
        self._detail_root = root
        edge_layer, node_layer = _Layer(), _Layer()
        edge_layer.setParentItem(root)
        node_layer.setParentItem(root)
        edge_layer.setZValue(1)
        node_layer.setZValue(3)
        theme = self.theme
        self._pens = EdgePens(theme)
        for k, e in enumerate(graph.edges):
            item = EdgeItem(k, e, layout.routes[k], self._pens)
            item.setParentItem(edge_layer)
            self.edges.append(item)
            self._edges_of[e.src].append(k)
            self._edges_of[e.dst].append(k)
        self._arrows = QGraphicsPathItem(arrow_heads(layout.routes))
        self._arrows.setPen(Qt.PenStyle.NoPen)
        self._arrows.setBrush(theme.edge)
        self._arrows.setParentItem(root)
        self._arrows.setZValue(2)
        for i, n in enumerate(graph.nodes):
            item = NodeItem(i, n, sizes[i], theme)
            item.setPos(layout.x[i], layout.y[i])
            item.setParentItem(node_layer)
            self.nodes.append(item)
        if graph.nodes:
            xs = np.asarray(layout.x)
            ys = np.asarray(layout.y)
            wh = np.asarray(sizes, dtype=float)
            self._rects = np.stack([xs - wh[:, 0] / 2, ys - wh[:, 1] / 2, xs + wh[:, 0] / 2, ys + wh[:, 1] / 2], 1)
        else:
            self._rects = np.zeros((0, 4))
        bounds = QRectF(0, 0, max(layout.width, 1.0), max(layout.height, 1.0))
        self._overview = OverviewItem(bounds)
        self.addItem(self._overview)
        self._build_overview()
        self._overview.setVisible(not self._detail)
        root.setVisible(self._detail)
        self.setSceneRect(bounds.adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN))

    def replace_nodes(self, graph: DisplayGraph) -> bool:
        """Take new node data for the same structure (e.g. problems found by a conversion)
        without a new layout. False when the structure differs."""
        old = self.graph
        if old is None or len(old.nodes) != len(graph.nodes) or len(old.edges) != len(graph.edges) or any(
                a.name != b.name for a, b in zip(old.nodes, graph.nodes)):
            return False
        self.graph = graph
        for item, node in zip(self.nodes, graph.nodes):
            item.node = node
            item.update()
        self._build_overview()
        return True

    def clear_graph(self) -> None:
        self.clear()
        self._linked, self._hits, self._marks, self._emphasized, self._selected = set(), set(), {}, [], set()
        self._tints, self._flagged = {}, set()
        self.graph, self.layout = None, None
        self.nodes, self.edges, self.sizes = [], [], []
        self._overview = self._detail_root = self._arrows = None
        self._rects = np.zeros((0, 4))
        self.setSceneRect(QRectF(0, 0, 1, 1))

    def _build_overview(self) -> None:
        if self._overview is None or self.graph is None:
            return
        edges = QPainterPath()
        for k, e in enumerate(self.graph.edges):
            pts = self.layout.routes[k] if self.layout else []
            if len(pts) < 2:
                continue
            edges.moveTo(*pts[0])
            for p in pts[1:]:
                edges.lineTo(*p)
        by_colour: dict[str, tuple[QColor, QPainterPath]] = {}
        for i, n in enumerate(self.graph.nodes):
            c = self.theme.accent("error") if n.problem else (self._tints[i] if i in self._tints
                                                              else self.theme.fill(n.category))
            if not n.problem and n.kind == "op":
                c = c.darker(115) if not self.theme.dark else c.lighter(130)
            key = c.name()
            if key not in by_colour:
                by_colour[key] = (c, QPainterPath())
            x0, y0, x1, y1 = self._rects[i]
            by_colour[key][1].addRect(QRectF(x0, y0, x1 - x0, y1 - y0))
        self._overview.set_content(edges, list(by_colour.values()), self.theme.edge)
        self._refresh_overlays()

    def _refresh_overlays(self) -> None:
        if self._overview is None:
            return
        groups: list[tuple[str, Iterable[int]]] = [
            ("linked", self._linked),
            ("selected", self._selected),
            ("error", self._flagged),
        ]
        for mark in ("added", "changed", "removed"):
            groups.insert(0, (mark, [i for i, m in self._marks.items() if m == mark]))
        overlays = []
        for accent, idxs in groups:
            path = QPainterPath()
            for i in idxs:
                x0, y0, x1, y1 = self._rects[i]
                path.addRect(QRectF(x0 - 4, y0 - 4, x1 - x0 + 8, y1 - y0 + 8))
            if not path.isEmpty():
                overlays.append((self.theme.accent(accent), path))
        self._overview.set_overlays(overlays)

    # ---------------------------------------------------------------- level of detail
    @property
    def detail(self) -> bool:
        return self._detail

    def set_detail(self, on: bool) -> None:
        """Individual items (True) or the overview (False)."""
        if on == self._detail:
            return
        self._detail = on
        if self._detail_root is not None:
            self._detail_root.setVisible(on)
        if self._overview is not None:
            self._overview.setVisible(not on)

    # ---------------------------------------------------------------- lookups
    def index_of(self, name: str) -> int | None:
        return None if self.graph is None else self.graph.index.get(name)

    def item(self, name: str) -> NodeItem | None:
        i = self.index_of(name)
        return None if i is None else self.nodes[i]

    def node_at(self, pos: QPointF) -> int | None:
        """Index of the node under a scene position (works in overview mode too)."""
        if not len(self._rects):
            return None
        r = self._rects
        x, y = pos.x(), pos.y()
        hit = np.nonzero((r[:, 0] <= x) & (x <= r[:, 2]) & (r[:, 1] <= y) & (y <= r[:, 3]))[0]
        return int(hit[-1]) if len(hit) else None

    def nodes_rect(self, indices: Iterable[int]) -> QRectF:
        idx = list(indices)
        if not idx:
            return QRectF()
        r = self._rects[idx]
        x0, y0 = r[:, 0].min(), r[:, 1].min()
        return QRectF(x0, y0, r[:, 2].max() - x0, r[:, 3].max() - y0)

    def indices(self, names: Iterable[str]) -> list[int]:
        if self.graph is None:
            return []
        idx = self.graph.index
        return [idx[n] for n in names if n in idx]

    # ---------------------------------------------------------------- selection
    def selected_items(self) -> list[NodeItem]:
        return [self.nodes[i] for i in sorted(self._selected)]

    def selected_names(self) -> list[str]:
        return [self.nodes[i].node.name for i in sorted(self._selected)]

    def select(self, names: Iterable[str], *, emit: bool = False) -> list[int]:
        """Select exactly these nodes. Emits ``nodeSelectionChanged`` only with ``emit``."""
        return self.select_indices(self.indices(names), emit=emit)

    def select_indices(self, indices: Iterable[int], *, emit: bool = False) -> list[int]:
        new = set(indices)
        for i in self._selected - new:
            self.nodes[i].set_state(selected=False)
        for i in new - self._selected:
            self.nodes[i].set_state(selected=True)
        self._selected = new
        for k in self._emphasized:
            self.edges[k].set_emphasis(False)
        self._emphasized = []
        if len(new) <= 64:
            for i in new:
                for k in self._edges_of[i]:
                    self.edges[k].set_emphasis(True)
                    self._emphasized.append(k)
        self._refresh_overlays()
        if emit:
            self.nodeSelectionChanged.emit(self.selected_names())
        return sorted(new)

    def click(self, index: int | None, *, add: bool = False) -> None:
        """A click on a node (None: on the background) — the user's selection."""
        if index is None:
            new = set(self._selected) if add else set()
        elif add:
            new = self._selected ^ {index}
        else:
            new = {index}
        self.select_indices(new, emit=True)

    # ---------------------------------------------------------------- marks
    def set_linked(self, names: Iterable[str]) -> list[int]:
        """Outline the provenance counterparts of the other view's selection."""
        new = set(self.indices(names))
        for i in self._linked - new:
            self.nodes[i].set_state(linked=False)
        for i in new - self._linked:
            self.nodes[i].set_state(linked=True)
        self._linked = new
        self._refresh_overlays()
        return sorted(new)

    def set_hits(self, names: Iterable[str]) -> None:
        new = set(self.indices(names))
        for i in self._hits - new:
            self.nodes[i].set_state(hit=False)
        for i in new - self._hits:
            self.nodes[i].set_state(hit=True)
        self._hits = new

    def set_marks(self, marks: dict[str, str]) -> None:
        """Diff marks by node name (``added`` / ``changed`` / ``removed``); others cleared."""
        new = {self.graph.index[n]: m for n, m in marks.items() if self.graph and n in self.graph.index}
        for i in set(self._marks) - set(new):
            self.nodes[i].set_state(mark="")
        for i, m in new.items():
            self.nodes[i].set_state(mark=m)
        self._marks = new
        self._refresh_overlays()

    def set_tints(self, tints: Mapping[str, QColor], flagged: Iterable[str] = ()) -> None:
        """Fill colours by node name, drawn instead of the category colours (verify colours
        nodes by error), and nodes to flag with an alert border; every other node cleared."""
        new = {self.graph.index[n]: c for n, c in tints.items() if self.graph and n in self.graph.index}
        flags = set(self.indices(flagged))
        for i in (set(self._tints) | self._flagged) - set(new) - flags:
            self.nodes[i].set_tint(None)
        for i in set(new) | flags:
            self.nodes[i].set_tint(new.get(i), i in flags)
        self._tints, self._flagged = new, flags
        self._build_overview()

    @property
    def tints(self) -> dict[str, QColor]:
        return {self.nodes[i].node.name: c for i, c in self._tints.items()}

    @property
    def flagged_names(self) -> list[str]:
        return [self.nodes[i].node.name for i in sorted(self._flagged)]

    @property
    def linked_indices(self) -> set[int]:
        return set(self._linked)

    @property
    def marks(self) -> dict[str, str]:
        return {self.nodes[i].node.name: m for i, m in self._marks.items()}

    # ---------------------------------------------------------------- theme
    def set_theme(self, theme: GraphTheme) -> None:
        self.theme = theme
        self.setBackgroundBrush(theme.background)
        for it in self.nodes:
            it.set_theme(theme)
        self._pens = EdgePens(theme)
        for e in self.edges:
            e.set_pens(self._pens)
        if self._arrows is not None:
            self._arrows.setBrush(theme.edge)
        self._build_overview()
