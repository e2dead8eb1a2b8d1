"""The graph view widget: zoom, pan, fit, keyboard navigation, tooltips, level of detail.

Mouse: wheel zooms around the cursor, dragging pans, a click selects (Ctrl adds), a
double-click centres; a click on a collapsed module box expands it, a click on an expanded
box's header collapses it (the scene's ``groupToggled``), a right click on a box offers to open
or close everything inside it (``groupMenuRequested``). A :class:`~.minimap.Minimap` in the
bottom-right corner shows where the view is in a graph larger than it. Keys: ``+``/``-`` zoom, ``F`` or ``0`` fit, ``1`` actual size, arrows walk
the graph (Up: a producer, Down: a consumer, Left/Right: the neighbour in the same layer),
``Home``/``End`` the first/last node, ``Enter`` centres on the selection, ``Esc`` clears it.
Tooltips are built lazily for the node or edge under the cursor. A message (e.g. "Laying
out…") can be painted over an empty or stale view. The label of a module box whose left edge
is scrolled away is pinned at the view's left edge (:meth:`GraphView.pinned_labels`); the first
view of a wide graph keeps those labels in view when it can (:meth:`GraphView.show_start`).
Fit never goes below :data:`FIT_FLOOR`.
"""
from __future__ import annotations

import logging
from typing import Callable

from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent, QMouseEvent, QPainter, QTransform, QWheelEvent
from PySide6.QtWidgets import QGraphicsView, QToolTip

from .items import OVERVIEW_BELOW, EdgeRef, GroupItem, NodeItem
from .minimap import Minimap
from .scene import GraphScene

log = logging.getLogger(__name__)

MIN_SCALE, MAX_SCALE = 0.01, 4.0
READABLE = 0.85
#: scene units kept free left of a box label / right of the first nodes in the first view
START_MARGIN = 12.0
#: pixels between the view's left edge and a pinned label
PIN_INSET = 4.0
#: least zoom Fit goes to (below it a graph is a line of dots)
FIT_FLOOR = 0.08


class GraphView(QGraphicsView):
    """A view of a :class:`GraphScene`."""

    zoomChanged = Signal(float)
    #: right click on a module box: (group id, global position)
    groupMenuRequested = Signal(int, QPoint)
    nodeMenuRequested = Signal(str, QPoint)  #: right click on a node: its name, where
    #: the user activated (double-clicked / pressed Enter on) a node
    nodeActivated = Signal(str)

    def __init__(self, scene: GraphScene, parent=None):
        super().__init__(scene, parent)
        self.graph_scene = scene
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState, True)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing, True)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setFrameShape(QGraphicsView.Shape.NoFrame)
        self.message = ""
        self._pinned = False  #: labels were pinned in the last frame
        self.tooltip_for: Callable[[NodeItem | EdgeRef | GroupItem], str] | None = None
        self._press_pos: QPointF | None = None
        self._over_node = False
        self.setMouseTracking(True)
        self.minimap = Minimap(self)
        self.horizontalScrollBar().valueChanged.connect(self._view_moved)
        self.verticalScrollBar().valueChanged.connect(self._view_moved)

    def _view_moved(self, *_args) -> None:
        if not self.minimap.image.isNull():
            self.minimap.update_visibility()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.minimap.place()
        self._view_moved()

    # ---------------------------------------------------------------- zoom
    @property
    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, scale: float, anchor: QPointF | None = None) -> None:
        scale = max(MIN_SCALE, min(MAX_SCALE, scale))
        centre = anchor if anchor is not None else self.mapToScene(self.viewport().rect().center())
        self.setTransform(QTransform.fromScale(scale, scale))
        self.centerOn(centre)
        self._zoom_changed()

    def zoom_by(self, factor: float) -> None:
        new = max(MIN_SCALE, min(MAX_SCALE, self.zoom * factor))
        f = new / self.zoom
        if abs(f - 1.0) > 1e-6:
            self.scale(f, f)
            self._zoom_changed()

    def _zoom_changed(self) -> None:
        self.graph_scene.set_detail(self.zoom >= OVERVIEW_BELOW)
        self.zoomChanged.emit(self.zoom)
        self._view_moved()

    def fit(self) -> None:
        """Show the whole graph — or, when that would shrink it below :data:`FIT_FLOOR` (a graph
        of thousands of nodes becomes a one-pixel line at "0%"), as much of it as that zoom
        shows, from the top, its nodes still visible as boxes; the map shows the rest."""
        r = self.graph_scene.itemsBoundingRect() if self.graph_scene.graph is None else self.graph_scene.sceneRect()
        if r.isEmpty():
            return
        vw, vh = max(self.viewport().width(), 1), max(self.viewport().height(), 1)
        scale = min(0.98 * min(vw / r.width(), vh / r.height()), 1.2)
        if scale >= FIT_FLOOR:
            self.set_zoom(scale, r.center())
            return
        self.set_zoom(FIT_FLOOR, QPointF(r.center().x(), r.top() + vh / 2 / FIT_FLOOR))
        self.flash(f"Too large to fit at a readable size: the top at {FIT_FLOOR:.0%} — the map shows the whole "
                   "graph, Groups ▸ Collapse all gives an overview")

    def flash(self, text: str, ms: int = 4000) -> None:
        """A message over the view for a few seconds."""
        self.set_message(text)
        QTimer.singleShot(ms, self, lambda: self.set_message("") if self.message == text else None)

    def show_start(self) -> None:
        """Initial view of a new graph: all of it if it is readable that way, else the top at a
        readable zoom."""
        s = self.graph_scene
        r = s.sceneRect()
        if r.isEmpty():
            return
        vw, vh = max(self.viewport().width(), 50), max(self.viewport().height(), 50)
        fit_scale = min(vw / r.width(), vh / r.height())
        if fit_scale >= 0.6:
            self.fit()
            return
        scale = max(min(READABLE, vw / r.width()), 0.55)
        self.setTransform(QTransform.fromScale(scale, scale))
        top = r.top() + (vh / 2) / scale
        self.centerOn(QPointF(self._start_x(r, vw / scale, vh / scale), top))
        self._zoom_changed()

    def _start_x(self, r: QRectF, width: float, height: float) -> float:
        """Horizontal centre of the first view of a graph wider than the view: what comes first
        (the inputs) and the labels (top-left corners) of the module boxes that start within the
        first screen, as far as both fit; the inputs win when they cannot."""
        p = self.graph_scene.layout
        if p is None or not p.nodes:
            return r.center().x()
        y0 = min(y for _x, y in p.nodes.values())
        row = [(cx, self.graph_scene.sizes[i][0]) for i, (cx, cy) in p.nodes.items() if cy < y0 + 60]
        lo = min(cx - w / 2 for cx, w in row)
        hi = max(cx + w / 2 for cx, w in row)
        centre = sum(cx for cx, _w in row) / len(row)
        bottom = r.top() + height
        left = min([lo, *(b[0] for b in p.boxes.values() if b[1] < bottom)])
        # as near the inputs' centre as keeps [left, hi] in view; if it cannot, the inputs win
        least, most = hi + START_MARGIN - width / 2, left - START_MARGIN + width / 2
        return min(max(centre, least), most) if least <= most else least

    def focus_indices(self, indices: list[int], *, zoom_in: bool = True) -> None:
        """Scroll (and zoom if needed) so these nodes are visible."""
        if not indices:
            return
        r = self.graph_scene.nodes_rect(indices)
        vw, vh = self.viewport().width(), self.viewport().height()
        need = min(vw / max(r.width() + 80, 1), vh / max(r.height() + 80, 1))
        if self.zoom > need:  # does not fit at the current zoom
            self.set_zoom(max(need, MIN_SCALE), r.center())
        elif zoom_in and self.zoom < OVERVIEW_BELOW:
            self.set_zoom(min(READABLE, need), r.center())
        else:
            visible = self.mapToScene(self.viewport().rect()).boundingRect()
            if not visible.contains(r):
                self.centerOn(r.center())

    # ---------------------------------------------------------------- events
    def wheelEvent(self, event: QWheelEvent) -> None:
        if event.modifiers() & Qt.KeyboardModifier.ShiftModifier or (event.pixelDelta().y() and
                                                                    not event.modifiers()):
            super().wheelEvent(event)  # trackpads and shift scroll
            return
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom_by(1.18 ** steps)
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._press_pos = event.position()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        super().mouseMoveEvent(event)
        if event.buttons() == Qt.MouseButton.NoButton:  # a pointing hand over nodes
            over = self.graph_scene.node_at(self.mapToScene(event.position().toPoint())) is not None
            if over != self._over_node:
                self._over_node = over
                if over:
                    self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
                else:
                    self.viewport().unsetCursor()
                    self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)  # restores the hand cursor

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        if self._press_pos is not None and event.button() == Qt.MouseButton.LeftButton:
            if (event.position() - self._press_pos).manhattanLength() < 4:  # a click, not a drag
                s = self.graph_scene
                at = self.mapToScene(event.position().toPoint())
                i = s.node_at(at)
                g = s.group_at(at) if i is None else None
                if g is not None:
                    s.groupToggled.emit(g)
                else:
                    add = bool(event.modifiers() & (Qt.KeyboardModifier.ControlModifier |
                                                    Qt.KeyboardModifier.ShiftModifier))
                    s.click(i, add=add)
        self._press_pos = None

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        s = self.graph_scene
        at = self.mapToScene(event.position().toPoint())
        i = s.node_at(at)
        if i is None:
            if s.group_at(at) is None:
                super().mouseDoubleClickEvent(event)
            return
        s.select([s.graph.nodes[i].name], emit=True)
        self.focus_indices([i])
        self.nodeActivated.emit(s.graph.nodes[i].name)

    def contextMenuEvent(self, event) -> None:
        g = self.graph_scene.group_at(self.mapToScene(event.pos()))
        if g is not None:
            self.groupMenuRequested.emit(g, event.globalPos())
            event.accept()
            return
        i = self.graph_scene.node_at(self.mapToScene(event.pos()))
        if i is not None:
            self.nodeMenuRequested.emit(self.graph_scene.graph.nodes[i].name, event.globalPos())
            event.accept()
            return
        super().contextMenuEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key, s = event.key(), self.graph_scene
        if key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_by(1.25)
        elif key == Qt.Key.Key_Minus:
            self.zoom_by(1 / 1.25)
        elif key in (Qt.Key.Key_F, Qt.Key.Key_0):
            self.fit()
        elif key == Qt.Key.Key_1:
            self.set_zoom(1.0)
        elif key == Qt.Key.Key_Escape:
            s.select([], emit=True)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            idx = [it.index for it in s.selected_items()]
            self.focus_indices(idx)
            if idx:
                self.nodeActivated.emit(s.graph.nodes[idx[0]].name)
        elif key in (Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Home,
                     Qt.Key.Key_End):
            self._navigate(key)
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def _navigate(self, key: int) -> None:
        """Walk the visible nodes: Up / Down to the nearest visible producer / consumer, Left /
        Right to the neighbour in the same row, Home / End to the first / last node."""
        s = self.graph_scene
        p = s.layout
        if s.graph is None or p is None or not p.nodes:
            return
        pos = p.nodes
        sel = [it.index for it in s.selected_items() if it.index in pos]
        if key == Qt.Key.Key_Home or (not sel and key in (Qt.Key.Key_Down, Qt.Key.Key_Right)):
            target = min(pos, key=lambda i: (pos[i][1], pos[i][0]))
        elif key == Qt.Key.Key_End or not sel:
            target = max(pos, key=lambda i: (pos[i][1], -pos[i][0]))
        else:
            cur = sel[-1]
            cx, cy = pos[cur]
            target = cur
            if key in (Qt.Key.Key_Up, Qt.Key.Key_Down):
                near = [j for j in (s.preds[cur] if key == Qt.Key.Key_Up else s.succs[cur]) if j in pos]
                if near:
                    target = min(near, key=lambda j: abs(pos[j][0] - cx))
            else:
                left = key == Qt.Key.Key_Left
                row = [j for j, (x, y) in pos.items() if abs(y - cy) < 1.0 and ((x < cx) if left else (x > cx))]
                if row:
                    target = min(row, key=lambda j: abs(pos[j][0] - cx))
        s.select([s.graph.nodes[target].name], emit=True)
        self.focus_indices([target], zoom_in=True)

    def _materialize(self, area: QRect) -> None:
        """Have the scene make the node items of ``area`` (viewport pixels) and a margin around
        it, so small scrolls make none (the overview draws far zooms without them)."""
        s = self.graph_scene
        if s.detail:
            r = self.mapToScene(area).boundingRect()
            m = 0.25 * max(r.width(), r.height())
            s.materialize(r.adjusted(-m, -m, m, m))

    def paintEvent(self, event) -> None:
        self._materialize(self.viewport().rect())
        super().paintEvent(event)

    def render(self, painter: QPainter, target: QRectF = QRectF(), source: QRect = QRect(),
               mode: Qt.AspectRatioMode = Qt.AspectRatioMode.KeepAspectRatio) -> None:
        self._materialize(source if not source.isNull() else self.viewport().rect())
        super().render(painter, target, source, mode)

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and self.tooltip_for is not None:
            pos = event.pos()
            text = self._tooltip_at(self.mapToScene(pos))
            if text:
                QToolTip.showText(event.globalPos(), text, self.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)

    def _tooltip_at(self, p: QPointF) -> str:
        s = self.graph_scene
        i = s.node_at(p)
        if i is not None:
            return self.tooltip_for(s.nodes[i])  # type: ignore[misc]
        g = s.group_at(p)
        if g is not None and g in s.groups:
            return self.tooltip_for(s.groups[g])  # type: ignore[misc]
        if not s.detail:
            return ""
        e = s.edge_at(p, 4 / max(self.zoom, 0.01))
        return self.tooltip_for(e) if e is not None else ""  # type: ignore[misc]

    # ---------------------------------------------------------------- pinned group labels
    def pinned_labels(self) -> dict[int, float]:
        """Module boxes whose header is in view but whose left edge (where the label is) is
        scrolled away to the left: group id → scene x where the view pins the label instead."""
        s, p = self.graph_scene, self.graph_scene.layout
        if p is None or not s.detail or not p.expanded:
            return {}
        vis = self.mapToScene(self.viewport().rect()).boundingRect()
        out: dict[int, float] = {}
        left = vis.left() + PIN_INSET / max(self.zoom, 1e-6)
        for gid in p.expanded:
            box = p.boxes.get(gid)
            item = s.groups.get(gid)
            if box is None or item is None:
                continue
            x0, y0, x1, _y1 = box
            if x0 + 4 >= left or not (vis.top() - 20 < y0 < vis.bottom()):
                continue
            if x1 - left > item.label_width() + 60:  # room for the label inside the box
                out[gid] = left
        return out

    def label_rects(self) -> dict[int, QRectF]:
        """Where the label of every expanded box whose header crosses the view is drawn (scene
        coordinates): in its header, or pinned to the view's left edge (a box with too little of
        it left in view for its label has none)."""
        s, p = self.graph_scene, self.graph_scene.layout
        if p is None:
            return {}
        vis = self.mapToScene(self.viewport().rect()).boundingRect()
        pinned = self.pinned_labels()
        out = {}
        for gid in p.expanded:
            box, item = p.boxes.get(gid), s.groups.get(gid)
            if box is None or item is None or not (vis.top() - 20 < box[1] < vis.bottom()):
                continue
            if box[2] < vis.left() or box[0] > vis.right() or (box[0] < vis.left() and gid not in pinned):
                continue  # out of view, or cut with no room for a pinned label
            x = pinned.get(gid, box[0]) + 22
            out[gid] = QRectF(x, box[1] + 4, item.label_width(), 18)
        return out

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        super().scrollContentsBy(dx, dy)
        if dx and self._pinned:  # pinned labels stay at the left edge: repaint, do not shift pixels
            self.viewport().update()

    def _paint_pinned_labels(self, painter: QPainter) -> None:
        pinned = self.pinned_labels()
        self._pinned = bool(pinned)
        groups = self.graph_scene.groups
        depth = {gid: groups[gid].depth for gid in pinned}
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        for gid in sorted(pinned, key=depth.__getitem__):  # outer boxes first, inner ones over them
            groups[gid].paint_pinned_label(painter, pinned[gid])
        painter.restore()

    # ---------------------------------------------------------------- message overlay
    def set_message(self, text: str) -> None:
        self.message = text
        self.viewport().update()

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:
        super().drawForeground(painter, rect)
        self._paint_pinned_labels(painter)
        if not self.message:
            return
        painter.save()
        painter.resetTransform()
        vp = self.viewport().rect()
        pal = self.palette()
        f = painter.font()
        f.setPointSizeF(f.pointSizeF() * 1.15)
        painter.setFont(f)
        box = painter.fontMetrics().boundingRect(vp, Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                                                 self.message).adjusted(-16, -10, 16, 10)
        bg = pal.color(pal.ColorRole.ToolTipBase)
        bg.setAlphaF(0.92)
        painter.setPen(pal.color(pal.ColorRole.Mid))
        painter.setBrush(bg)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.drawRoundedRect(box, 8, 8)
        painter.setPen(pal.color(pal.ColorRole.ToolTipText))
        painter.drawText(box, Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.message)
        painter.restore()
