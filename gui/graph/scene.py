"""The scene of one graph view, created from a display graph, its groups and their placement.

:class:`GraphScene` turns a :class:`~gui.graph.model.DisplayGraph`, its
:class:`~gui.graph.grouping.GroupTree` and a :class:`~gui.graph.hierarchy.Placement` (computed
in a worker) into items: one :class:`~gui.graph.items.NodeItem` per visible node, one
:class:`~gui.graph.items.GroupItem` per visible module box (collapsed or expanded), one
:class:`~gui.graph.items.EdgeRef` per visible connection, the connections drawn in spatial chunks
(:class:`~gui.graph.items.EdgeChunk`, one path each). Node and group items are made the
first time they are shown and kept while the graph stays the same, so expanding a group creates
only what it reveals. A node item is made when a view is about to paint the area it is placed in
(:meth:`GraphScene.materialize`) or when something asks for it (``scene.nodes[i]``): expanding
every group of a 20,000-node graph makes the few hundred items on screen, not 20,000.

It keeps the per-name state the rest of the window drives — selection (emitted as
``nodeSelectionChanged`` when the user changes it), provenance links to the other view, search
hits, diff marks, fill colours set from outside (tints: verify's error colouring) and flagged
nodes — by node index, whether the node is visible or not: a collapsed box shows the state of
the nodes inside it. It also owns the level of detail: below
:data:`~gui.graph.items.OVERVIEW_BELOW` the individual items are hidden and a few
:class:`~gui.graph.items.OverviewItem` chunks draw everything.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence as SequenceABC
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Signal
from PySide6.QtGui import QColor, QPainterPath
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QGraphicsScene

from ..theme import GraphTheme
from .grouping import GroupTree
from .hierarchy import Placement
from .items import (ArrowHeads, EdgeChunk, EdgePens, EdgeRef, GroupItem, NodeItem, OverviewItem, _mark_colour,
                    add_smooth_route)
from .layout import Point
from .model import DisplayGraph

log = logging.getLogger(__name__)

MARGIN = 40.0
#: side of the square cells the overview is cut into (scene units)
CHUNK = 3000.0
#: side of the cells edge pieces are drawn in
EDGE_CELL = 1000.0
#: which diff / problem mark a collapsed box shows when its nodes have several
MARK_RANK = {"removed": 1, "changed": 2, "added": 3}


#: stacking: expanded frames (below, deeper above shallower), edges, arrow heads, boxes and nodes
Z_EDGE, Z_ARROWS, Z_NODE = 1.0, 2.0, 3.0


class NodeItems(SequenceABC):
    """``scene.nodes``: the item of every node by index, made on first use (an item of a node
    inside a collapsed group exists only once something asks for it, and is not shown)."""

    def __init__(self, scene: "GraphScene"):
        self._scene = scene

    def __len__(self) -> int:
        g = self._scene.graph
        return 0 if g is None else len(g.nodes)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        return self._scene._node_item(i)

    def __iter__(self) -> Iterator[NodeItem]:
        for i in range(len(self)):
            yield self._scene._node_item(i)


class GraphScene(QGraphicsScene):
    """Items of one graph; see the module docstring."""

    #: the user changed the selection (names of the selected nodes)
    nodeSelectionChanged = Signal(list)
    #: the user clicked a group's expander (group id)
    groupToggled = Signal(int)

    def __init__(self, theme: GraphTheme, parent=None):
        super().__init__(parent)
        self.theme = theme
        self.graph: DisplayGraph | None = None
        self.tree: GroupTree | None = None
        self.layout: Placement | None = None
        self.sizes: list[tuple[float, float]] = []
        self.group_text: list[tuple[str, str]] = []
        self.nodes = NodeItems(self)
        self.edges: list[EdgeRef] = []
        self._edge_chunks: list[QGraphicsItem] = []  #: edge paths and arrow heads
        self._emphasis: QGraphicsPathItem | None = None
        self._edge_boxes = np.zeros((0, 4))
        #: every edge piece drawn, once per pen (from a parameter?)
        self._pieces: list[tuple[Point, Point, bool]] = []
        self.groups: dict[int, GroupItem] = {}  #: visible group boxes by group id
        self.preds: list[list[int]] = []
        self.succs: list[list[int]] = []
        self._node_items: dict[int, NodeItem] = {}
        #: placed nodes without an item yet (made when a view paints near them), their positions
        self._pending: dict[int, tuple[float, float]] = {}
        self._group_items: dict[int, GroupItem] = {}
        self._edges_of: dict[int, list[int]] = {}
        self._codes = np.zeros(0, dtype=np.int64)
        self._rects = np.zeros((0, 4))
        self._headers = np.zeros((0, 4))
        self._header_ids: list[int] = []
        self._overviews: list[OverviewItem] = []
        self._overlay: OverviewItem | None = None
        self._frames: OverviewItem | None = None
        self._built = False
        self._detail = True
        self._linked: set[int] = set()
        self._hits: set[int] = set()
        self._marks: dict[int, str] = {}
        self._tints: dict[int, QColor] = {}
        self._flagged: set[int] = set()
        self._emphasized: list[int] = []
        self._selected: set[int] = set()
        self._problem_groups: set[int] = set()
        self._overview_dirty = False
        self._pens = EdgePens(theme)
        self.setBackgroundBrush(theme.background)
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)

    # ---------------------------------------------------------------- building
    def set_graph(self, graph: DisplayGraph, sizes: Sequence[tuple[float, float]], placement: Placement,
                  tree: GroupTree, group_text: Sequence[tuple[str, str]]) -> None:
        """Show ``graph`` as ``placement`` arranges it. With the same graph as before (a group
        was expanded or collapsed) the node and group items are kept and moved."""
        same = graph is self.graph and self._built
        if not same:
            self.clear()
            self._overviews, self._overlay, self._frames = [], None, None
            self._edge_chunks, self._emphasis = [], None
            self._node_items, self._group_items, self._pending = {}, {}, {}
            self._linked, self._hits, self._marks, self._emphasized, self._selected = set(), set(), {}, [], set()
            self._tints, self._flagged = {}, set()
            self.preds, self.succs = graph.neighbours()
            self._built = True
            self._pens = EdgePens(self.theme)
        else:
            self._emphasized = []
        self.graph, self.tree, self.layout, self.sizes = graph, tree, placement, list(sizes)
        self.group_text = list(group_text)
        self._find_problem_groups()
        self._place_nodes(placement)
        self._place_groups(placement)
        self._place_edges(placement)
        self._build_index(placement)
        bounds = QRectF(0, 0, max(placement.width, 1.0), max(placement.height, 1.0))
        self._invalidate_overview()
        self._apply_group_states()
        self._emphasize()
        self.set_detail(self._detail, force=True)
        self.setSceneRect(bounds.adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN))

    def _node_item(self, i: int) -> NodeItem:
        it = self._node_items.get(i)
        if it is None:
            if i in self._pending:
                self._put(i, *self._pending.pop(i))
                return self._node_items[i]
            it = NodeItem(i, self.graph.nodes[i], self.sizes[i], self.theme)  # type: ignore[union-attr]
            it.setZValue(Z_NODE)
            it.setVisible(False)
            it.set_state(selected=i in self._selected, linked=i in self._linked, hit=i in self._hits,
                         mark=self._marks.get(i, ""))
            if i in self._tints or i in self._flagged:
                it.set_tint(self._tints.get(i), i in self._flagged)
            self._node_items[i] = it
        return it

    def _place_nodes(self, p: Placement) -> None:
        """Move the nodes' items to ``p``; a node without an item yet waits in ``_pending`` until
        :meth:`materialize` (a view about to paint its area) or ``nodes[i]`` makes it."""
        for i, it in self._node_items.items():
            if i not in p.nodes and it.isVisible():
                it.setVisible(False)
        items = self._node_items
        self._pending = {i: xy for i, xy in p.nodes.items() if i not in items}
        for i, (x, y) in p.nodes.items():
            if i in items:
                self._put(i, x, y)

    def _put(self, i: int, x: float, y: float) -> None:
        it = self._node_item(i)
        if it.scene() is not self:
            self.addItem(it)
        it.setPos(x, y)
        if it.isVisible() != self._detail:
            it.setVisible(self._detail)

    def materialize(self, rect: QRectF | None = None) -> int:
        """Make the items of the placed nodes that overlap ``rect`` (scene coordinates; None:
        every placed node) and have none yet; returns how many were made. Views call it before
        they paint, so an item exists wherever it can be seen. The nodes' boxes are the click
        index's (:meth:`_build_index`)."""
        if not self._pending:
            return 0
        if rect is None:
            ids = list(self._pending)
        else:
            r = self._rects
            inside = ((self._codes >= 0) & (r[:, 0] <= rect.right()) & (r[:, 2] >= rect.left())
                      & (r[:, 1] <= rect.bottom()) & (r[:, 3] >= rect.top()))
            ids = [i for i in self._codes[inside].tolist() if i in self._pending]
        for i in ids:
            self._put(i, *self._pending.pop(i))
        return len(ids)

    def _place_groups(self, p: Placement) -> None:
        self.groups = {}
        for gid, it in self._group_items.items():
            if gid not in p.boxes and it.isVisible():
                it.setVisible(False)
        tree = self.tree
        for gid, box in p.boxes.items():
            it = self._group_items.get(gid)
            if it is None:
                label, detail = self.group_text[gid]
                it = GroupItem(gid, label, detail, tree.groups[gid].depth, self.theme)  # type: ignore[union-attr]
                self.addItem(it)
                self._group_items[gid] = it
            it.set_box(*box, expanded=gid in p.expanded)
            it.setVisible(self._detail)
            self.groups[gid] = it

    def _place_edges(self, p: Placement) -> None:
        """Edge references, the chunks that draw them (by where they start; parameter edges in
        their own, dashed), the arrow heads (in chunks by where they end), and every route's
        bounding box (tooltips). Every item is top-level and spatially small, so Qt's index
        hands a frame only what is in view (one item for all arrow heads would be drawn, whole,
        every frame).

        Each piece is drawn once: the edges of one source share its trunk (see
        :mod:`.layout`), so a route is walked back from its end only until it meets a piece an
        earlier route had at the same place after the same points — 1,000 routes down one trunk
        cost the trunk once, not 1,000 times (in building and in every frame)."""
        for it in self._edge_chunks:
            self.removeItem(it)
        self._edge_chunks = []
        self.edges = []
        self._edges_of = {}
        edges = self.graph.edges  # type: ignore[union-attr]
        cells: dict[tuple[int, int, bool], list] = {}
        ends: dict[tuple[int, int], list] = {}
        boxes = []
        drawn: tuple[set, set] = (set(), set())  #: pieces drawn, per pen
        #: (first point, index, piece) → the first route that starts there and has that piece there
        walked: dict[tuple[Point, int, tuple[Point, Point]], int] = {}
        self._pieces = []
        for k, (ru, rv, ek, route) in enumerate(p.edges):
            e = edges[ek]
            self.edges.append(EdgeRef(k, e, route))
            self._edges_of.setdefault(ru, []).append(k)
            self._edges_of.setdefault(rv, []).append(k)
            if route:
                # each piece of the route goes to the cell where it starts: a frame then strokes
                # only the pieces near the view, however long the edges
                seen = drawn[e.from_param]
                first = route[0]
                for i in range(len(route) - 2, -1, -1):
                    piece = (route[i], route[i + 1])
                    by = walked.setdefault((first, i, piece), k)
                    if by != k and p.edges[by][3][:i] == route[:i]:
                        break  # the rest is an earlier route's start, drawn with it
                    if piece not in seen:
                        seen.add(piece)
                        self._pieces.append((*piece, e.from_param))
                        a = piece[0]
                        cells.setdefault((int(a[0] // EDGE_CELL), int(a[1] // EDGE_CELL), e.from_param),
                                         []).append(piece)
                x1, y1 = route[-1]
                ends.setdefault((int(x1 // CHUNK), int(y1 // CHUNK)), []).append(route)
                xs = [q[0] for q in route]
                boxes.append((min(xs), route[0][1] if route[0][1] < route[-1][1] else route[-1][1], max(xs),
                              max(route[0][1], route[-1][1])))
            else:
                boxes.append((0.0, 0.0, -1.0, -1.0))
        for (_cx, _cy, param), rs in cells.items():
            chunk = EdgeChunk(rs, self._pens.param if param else self._pens.normal)
            chunk.setZValue(Z_EDGE)
            chunk.setVisible(self._detail)
            self.addItem(chunk)
            self._edge_chunks.append(chunk)
        for rs in ends.values():
            heads = ArrowHeads(rs, self.theme.edge)
            heads.setZValue(Z_ARROWS)
            heads.setVisible(self._detail)
            self.addItem(heads)
            self._edge_chunks.append(heads)
        self._edge_boxes = np.asarray(boxes, dtype=float).reshape(-1, 4)
        if self._emphasis is None or self._emphasis.scene() is not self:
            self._emphasis = QGraphicsPathItem()
            self._emphasis.setZValue(Z_EDGE + 0.5)
            self.addItem(self._emphasis)
        self._emphasis.setPen(self._pens.emphasis)

    def edge_at(self, pos: QPointF, tolerance: float) -> EdgeRef | None:
        """The visible edge passing within ``tolerance`` of a scene position."""
        if not len(self._edge_boxes):
            return None
        b, x, y, d = self._edge_boxes, pos.x(), pos.y(), tolerance
        near = np.nonzero((b[:, 0] - d <= x) & (x <= b[:, 2] + d) & (b[:, 1] - d <= y) & (y <= b[:, 3] + d))[0]
        area = QRectF(x - d, y - d, 2 * d, 2 * d)
        for k in near.tolist():
            if self.edges[k].hover_shape().intersects(area):
                return self.edges[k]
        return None

    def _build_index(self, p: Placement) -> None:
        """Rectangles of what a click can hit: visible nodes and collapsed boxes; headers of
        expanded boxes separately."""
        codes: list[int] = []
        rects: list[tuple[float, float, float, float]] = []
        for i, (x, y) in p.nodes.items():
            w, h = self.sizes[i]
            codes.append(i)
            rects.append((x - w / 2, y - h / 2, x + w / 2, y + h / 2))
        headers, header_ids = [], []
        from .hierarchy import HEADER
        for gid, (x0, y0, x1, y1) in p.boxes.items():
            if gid in p.expanded:
                headers.append((x0, y0, x1, y0 + HEADER))
                header_ids.append(gid)
            else:
                codes.append(-1 - gid)
                rects.append((x0, y0, x1, y1))
        self._codes = np.asarray(codes, dtype=np.int64)
        self._rects = np.asarray(rects, dtype=float).reshape(-1, 4)
        self._headers = np.asarray(headers, dtype=float).reshape(-1, 4)
        self._header_ids = header_ids

    def replace_nodes(self, graph: DisplayGraph) -> bool:
        """Take new node data for the same structure (e.g. problems found by a conversion)
        without a new layout. False when the structure differs."""
        old = self.graph
        if old is None or len(old.nodes) != len(graph.nodes) or len(old.edges) != len(graph.edges) or any(
                a.name != b.name for a, b in zip(old.nodes, graph.nodes)):
            return False
        self.graph = graph
        for i, item in self._node_items.items():
            item.node = graph.nodes[i]
            item.update()
        self._find_problem_groups()
        self._invalidate_overview()
        self._apply_group_states()
        return True

    def clear_graph(self) -> None:
        self.clear()
        self._linked, self._hits, self._marks, self._emphasized, self._selected = set(), set(), {}, [], set()
        self._tints, self._flagged = {}, set()
        self.graph, self.tree, self.layout = None, None, None
        self.edges, self.sizes = [], []
        self.groups, self._node_items, self._group_items, self._edges_of = {}, {}, {}, {}
        self._pending = {}
        self._overviews, self._overlay, self._frames = [], None, None
        self._emphasis = None
        self._edge_chunks = []
        self._edge_boxes = np.zeros((0, 4))
        self._pieces = []
        self._built = False
        self._codes = np.zeros(0, dtype=np.int64)
        self._rects = np.zeros((0, 4))
        self._headers = np.zeros((0, 4))
        self._header_ids = []
        self.setSceneRect(QRectF(0, 0, 1, 1))

    # ---------------------------------------------------------------- overview
    def _node_colour(self, i: int) -> QColor:
        n = self.graph.nodes[i]  # type: ignore[union-attr]
        c = self.theme.accent("error") if n.problem else (self._tints[i] if i in self._tints
                                                          else self.theme.fill(n.category))
        if not n.problem and n.kind == "op":
            c = c.darker(115) if not self.theme.dark else c.lighter(130)
        return c

    def _invalidate_overview(self) -> None:
        """The overview is built when first needed (zooming out, the minimap), not with every
        layout: most layouts are looked at closely first."""
        self._overview_dirty = True
        if not self._detail:
            self._build_overview()

    def _ensure_overview(self) -> None:
        if self._overview_dirty:
            self._build_overview()

    def _build_overview(self) -> None:
        """Cut what is visible into square chunks, one overview item each (edge pieces by where
        they start); expanded frames go into one more item, state overlays into another."""
        for it in self._overviews:
            self.removeItem(it)
        for it in (self._overlay, self._frames):
            if it is not None:
                self.removeItem(it)
        self._overviews = []
        self._overlay = self._frames = None
        self._overview_dirty = False
        p = self.layout
        if p is None or self.graph is None:
            return
        chunks: dict[tuple[int, int], dict] = {}

        def chunk(x: float, y: float) -> dict:
            key = (int(x // CHUNK), int(y // CHUNK))
            c = chunks.get(key)
            if c is None:
                c = chunks[key] = {"edges": QPainterPath(), "fills": {}, "bounds": [x, y, x, y]}
            return c

        def grow(c: dict, x0: float, y0: float, x1: float, y1: float) -> None:
            b = c["bounds"]
            b[0], b[1], b[2], b[3] = min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1)

        colours: dict[str, QColor] = {}
        for code, (x0, y0, x1, y1) in zip(self._codes.tolist(), self._rects.tolist()):
            c = chunk((x0 + x1) / 2, (y0 + y1) / 2)
            colour = self._node_colour(code) if code >= 0 else self._group_fill()
            key = colour.name()
            colours.setdefault(key, colour)
            path = c["fills"].get(key)
            if path is None:
                path = c["fills"][key] = QPainterPath()
            path.addRect(QRectF(x0, y0, x1 - x0, y1 - y0))
            grow(c, x0, y0, x1, y1)
        for (x0, y0), (x1, y1), _param in self._pieces:
            c = chunk(x0, y0)
            path = c["edges"]
            path.moveTo(x0, y0)
            path.lineTo(x1, y1)
            grow(c, min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
        for c in chunks.values():
            b = c["bounds"]
            item = OverviewItem(QRectF(b[0], b[1], b[2] - b[0], b[3] - b[1]))
            item.set_content(c["edges"], [(colours[k], path) for k, path in c["fills"].items()], self.theme.edge)
            self.addItem(item)
            self._overviews.append(item)
        frames = QPainterPath()
        for gid in p.expanded:
            box = p.boxes.get(gid)
            if box is not None:
                frames.addRect(QRectF(box[0], box[1], box[2] - box[0], box[3] - box[1]))
        bounds = QRectF(0, 0, max(p.width, 1.0), max(p.height, 1.0))
        self._frames = OverviewItem(bounds)
        fill = QColor(self.theme.text)
        fill.setAlphaF(0.04)
        border = QColor(self.theme.border)
        border.setAlphaF(0.5)
        self._frames.set_content(QPainterPath(), [], self.theme.edge, [(fill, border, frames)])
        self._frames.setZValue(-1)
        self.addItem(self._frames)
        self._overlay = OverviewItem(bounds)
        self._overlay.setZValue(1)
        self.addItem(self._overlay)
        self._refresh_overlays()
        for it in self._overviews + [self._frames, self._overlay]:
            it.setVisible(not self._detail)

    def minimap_content(self) -> tuple[np.ndarray, np.ndarray]:
        """Rectangles of the visible nodes and collapsed boxes (N×4) and their colours as BGRA
        bytes (N×4), for the minimap."""
        if self.graph is None or not len(self._codes):
            return np.zeros((0, 4)), np.zeros((0, 4), dtype=np.uint8)
        cache: dict[object, tuple[int, int, int, int]] = {}
        nodes = self.graph.nodes
        out = []
        for code in self._codes.tolist():
            if code < 0:
                key: object = "group"
            else:
                n = nodes[code]
                key = ("p", n.kind) if n.problem else (code if code in self._tints else (n.category, n.kind))
            bgra = cache.get(key)
            if bgra is None:
                c = self._group_fill() if code < 0 else self._node_colour(code)
                bgra = cache[key] = (c.blue(), c.green(), c.red(), 255)
            out.append(bgra)
        return self._rects, np.asarray(out, dtype=np.uint8)

    def minimap_frames(self) -> list[tuple[float, float, float, float]]:
        """Expanded boxes of the two outer levels (the minimap outlines them)."""
        p, tree = self.layout, self.tree
        if p is None or tree is None:
            return []
        return [p.boxes[g] for g in p.expanded if g in p.boxes and tree.groups[g].depth <= 2]

    def _group_fill(self) -> QColor:
        c = QColor(self.theme.fill("other"))
        return c.darker(125) if not self.theme.dark else c.lighter(140)

    def element_rect(self, code: int) -> tuple[float, float, float, float] | None:
        """Scene rectangle of a visible node (``code`` ≥ 0) or group box (``-1 - id``)."""
        p = self.layout
        if p is None:
            return None
        if code >= 0:
            c = p.nodes.get(code)
            if c is None:
                return None
            w, h = self.sizes[code]
            return (c[0] - w / 2, c[1] - h / 2, c[0] + w / 2, c[1] + h / 2)
        return p.boxes.get(-1 - code)

    def _refresh_overlays(self) -> None:
        if self._overlay is None:
            return
        groups: list[tuple[str, Iterable[int]]] = [("linked", self._linked), ("selected", self._selected),
                                                   ("error", self._flagged)]
        for mark in ("added", "changed", "removed"):
            groups.insert(0, (mark, [i for i, m in self._marks.items() if m == mark]))
        overlays = []
        for accent, idxs in groups:
            path = QPainterPath()
            for code in {self._rep(i) for i in idxs}:
                r = self.element_rect(code)
                if r is not None:
                    x0, y0, x1, y1 = r
                    path.addRect(QRectF(x0 - 4, y0 - 4, x1 - x0 + 8, y1 - y0 + 8))
            if not path.isEmpty():
                overlays.append((_mark_colour(self.theme, accent), path))
        self._overlay.set_overlays(overlays)

    # ---------------------------------------------------------------- level of detail
    @property
    def detail(self) -> bool:
        return self._detail

    def set_detail(self, on: bool, *, force: bool = False) -> None:
        """Individual items (True) or the overview (False)."""
        if on == self._detail and not force:
            return
        self._detail = on
        if not on:
            self._ensure_overview()
        p = self.layout
        if p is not None:
            items = self._node_items
            for i in p.nodes:
                if i in items:
                    items[i].setVisible(on)
        for it in self.groups.values():
            it.setVisible(on)
        for e in self._edge_chunks:
            e.setVisible(on)
        if self._emphasis is not None:
            self._emphasis.setVisible(on)
        for it in self._overviews + [x for x in (self._frames, self._overlay) if x is not None]:
            it.setVisible(not on)

    # ---------------------------------------------------------------- lookups
    def index_of(self, name: str) -> int | None:
        return None if self.graph is None else self.graph.index.get(name)

    def item(self, name: str) -> NodeItem | None:
        i = self.index_of(name)
        return None if i is None else self._node_item(i)

    def is_visible(self, index: int) -> bool:
        return self.layout is not None and index in self.layout.nodes

    def _rep(self, i: int) -> int:
        p = self.layout
        if p is None or i >= len(p.rep):
            return i
        return p.rep[i]

    def element_at(self, pos: QPointF) -> int | None:
        """Code of the node (≥ 0) or collapsed box (``-1 - id``) under a scene position (works
        in overview mode too)."""
        if not len(self._rects):
            return None
        r = self._rects
        x, y = pos.x(), pos.y()
        hit = np.nonzero((r[:, 0] <= x) & (x <= r[:, 2]) & (r[:, 1] <= y) & (y <= r[:, 3]))[0]
        return int(self._codes[hit[-1]]) if len(hit) else None

    def nearest(self, pos: QPointF) -> tuple[list[int], QPointF] | None:
        """The visible node or collapsed box whose centre is nearest a scene position: the node
        indices it shows (a box: every node inside) and its centre."""
        if not len(self._rects) or self.graph is None:
            return None
        r = self._rects
        cx, cy = (r[:, 0] + r[:, 2]) / 2, (r[:, 1] + r[:, 3]) / 2
        k = int(np.argmin((cx - pos.x()) ** 2 + (cy - pos.y()) ** 2))
        code = int(self._codes[k])
        nodes = [code] if code >= 0 else (self.tree.nodes_of(-1 - code) if self.tree is not None else [])
        return nodes, QPointF(float(cx[k]), float(cy[k]))

    def node_at(self, pos: QPointF) -> int | None:
        """Index of the visible node under a scene position."""
        code = self.element_at(pos)
        return code if code is not None and code >= 0 else None

    def group_at(self, pos: QPointF) -> int | None:
        """Group id of the collapsed box or expanded header under a scene position (the
        innermost one)."""
        code = self.element_at(pos)
        if code is not None:
            return -1 - code if code < 0 else None
        if not len(self._headers):
            return None
        r = self._headers
        x, y = pos.x(), pos.y()
        hit = np.nonzero((r[:, 0] <= x) & (x <= r[:, 2]) & (r[:, 1] <= y) & (y <= r[:, 3]))[0]
        if not len(hit):
            return None
        ids = [self._header_ids[k] for k in hit]
        return max(ids, key=lambda g: self.tree.groups[g].depth)  # type: ignore[union-attr]

    def nodes_rect(self, indices: Iterable[int]) -> QRectF:
        """Bounding rectangle of these nodes as shown (a hidden node by its collapsed box)."""
        rects = [r for r in (self.element_rect(self._rep(i)) for i in set(indices)) if r is not None]
        if not rects:
            return QRectF()
        a = np.asarray(rects)
        x0, y0 = a[:, 0].min(), a[:, 1].min()
        return QRectF(x0, y0, a[:, 2].max() - x0, a[:, 3].max() - y0)

    def indices(self, names: Iterable[str]) -> list[int]:
        if self.graph is None:
            return []
        idx = self.graph.index
        return [idx[n] for n in names if n in idx]

    def hidden(self, indices: Iterable[int]) -> list[int]:
        """Those of ``indices`` inside collapsed groups."""
        p = self.layout
        return [] if p is None else [i for i in indices if i not in p.nodes]

    # ---------------------------------------------------------------- selection
    def selected_items(self) -> list[NodeItem]:
        return [self._node_item(i) for i in sorted(self._selected)]

    def selected_names(self) -> list[str]:
        g = self.graph
        return [] if g is None else [g.nodes[i].name for i in sorted(self._selected)]

    def select(self, names: Iterable[str], *, emit: bool = False) -> list[int]:
        """Select exactly these nodes. Emits ``nodeSelectionChanged`` only with ``emit``."""
        return self.select_indices(self.indices(names), emit=emit)

    def select_indices(self, indices: Iterable[int], *, emit: bool = False) -> list[int]:
        new = set(indices)
        self._set_node_state(self._selected, new, "selected")
        self._selected = new
        self._emphasize()
        self._apply_group_states()
        self._refresh_overlays()
        if emit:
            self.nodeSelectionChanged.emit(self.selected_names())
        return sorted(new)

    def _emphasize(self) -> None:
        """The edges of the selection (up to 64 nodes) drawn over the others."""
        for k in self._emphasized:
            if k < len(self.edges):
                self.edges[k].set_emphasis(False)
        self._emphasized = []
        path = QPainterPath()
        if len(self._selected) <= 64:
            for code in {self._rep(i) for i in self._selected}:
                for k in self._edges_of.get(code, ()):
                    self.edges[k].set_emphasis(True)
                    self._emphasized.append(k)
                    add_smooth_route(path, self.edges[k].points)
        if self._emphasis is not None:
            self._emphasis.setPath(path)

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
    def _set_node_state(self, old: set[int], new: set[int], key: str) -> None:
        for i in old - new:
            if i in self._node_items:
                self._node_items[i].set_state(**{key: False})
        for i in new - old:
            if i in self._node_items:
                self._node_items[i].set_state(**{key: True})

    def set_linked(self, names: Iterable[str]) -> list[int]:
        """Outline the provenance counterparts of the other view's selection."""
        new = set(self.indices(names))
        self._set_node_state(self._linked, new, "linked")
        self._linked = new
        self._apply_group_states()
        self._refresh_overlays()
        return sorted(new)

    def set_hits(self, names: Iterable[str]) -> None:
        new = set(self.indices(names))
        self._set_node_state(self._hits, new, "hit")
        self._hits = new
        self._apply_group_states()

    def set_marks(self, marks: dict[str, str]) -> None:
        """Diff marks by node name (``added`` / ``changed`` / ``removed``); others cleared."""
        new = {self.graph.index[n]: m for n, m in marks.items() if self.graph and n in self.graph.index}
        for i in set(self._marks) - set(new):
            if i in self._node_items:
                self._node_items[i].set_state(mark="")
        for i, m in new.items():
            if i in self._node_items:
                self._node_items[i].set_state(mark=m)
        self._marks = new
        self._apply_group_states()
        self._refresh_overlays()

    def _apply_group_states(self) -> None:
        """A collapsed box shows the state of the nodes hidden in it."""
        if not self.groups or self.layout is None:
            return
        rep = self.layout.rep
        sel = {-1 - rep[i] for i in self._selected if rep[i] < 0}
        lnk = {-1 - rep[i] for i in self._linked if rep[i] < 0}
        hit = {-1 - rep[i] for i in self._hits if rep[i] < 0}
        marks: dict[int, str] = {}
        for i, m in self._marks.items():
            if rep[i] < 0:
                g = -1 - rep[i]
                if MARK_RANK.get(m, 9) > MARK_RANK.get(marks.get(g, ""), 0):
                    marks[g] = m
        for i in self._flagged:  # verify's first divergent node, hidden in a box
            if rep[i] < 0:
                marks[-1 - rep[i]] = "error"
        for g in self.groups:
            if g not in marks and g in self._problem_groups:
                marks[g] = "error"
        for g, it in self.groups.items():
            collapsed = g not in self.layout.expanded
            it.set_state(selected=collapsed and g in sel, linked=collapsed and g in lnk, hit=collapsed and g in hit,
                         mark=marks.get(g, "") if collapsed else "")

    def _find_problem_groups(self) -> None:
        self._problem_groups = set()
        if self.graph is None or self.tree is None:
            return
        for i, n in enumerate(self.graph.nodes):
            if n.problem:
                self._problem_groups.update(self.tree.ancestors(i))

    def set_tints(self, tints: Mapping[str, QColor], flagged: Iterable[str] = ()) -> None:
        """Fill colours by node name, drawn instead of the category colours (verify colours
        nodes by error), and nodes to flag with an alert border; every other node cleared. A
        collapsed box holding a flagged node gets the alert border."""
        new = {self.graph.index[n]: c for n, c in tints.items() if self.graph and n in self.graph.index}
        flags = set(self.indices(flagged))
        for i in (set(self._tints) | self._flagged | set(new) | flags) & set(self._node_items):
            self._node_items[i].set_tint(new.get(i), i in flags)
        self._tints, self._flagged = new, flags
        self._apply_group_states()
        self._invalidate_overview()

    @property
    def tints(self) -> dict[str, QColor]:
        g = self.graph
        return {} if g is None else {g.nodes[i].name: c for i, c in self._tints.items()}

    @property
    def flagged_names(self) -> list[str]:
        g = self.graph
        return [] if g is None else [g.nodes[i].name for i in sorted(self._flagged)]

    @property
    def linked_indices(self) -> set[int]:
        return set(self._linked)

    @property
    def marks(self) -> dict[str, str]:
        g = self.graph
        return {} if g is None else {g.nodes[i].name: m for i, m in self._marks.items()}

    # ---------------------------------------------------------------- theme
    def set_theme(self, theme: GraphTheme) -> None:
        self.theme = theme
        self.setBackgroundBrush(theme.background)
        for it in self._node_items.values():
            it.set_theme(theme)
        for gi in self._group_items.values():
            gi.set_theme(theme)
        self._pens = EdgePens(theme)
        if self.layout is not None:
            self._place_edges(self.layout)
            self._emphasize()
        self._invalidate_overview()
