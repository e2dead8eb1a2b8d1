"""The graph view widget: zoom, pan, fit, keyboard navigation, tooltips, level of detail.

Mouse: wheel zooms around the cursor, dragging pans, a click selects (Ctrl adds), a
double-click centres. Keys: ``+``/``-`` zoom, ``F`` or ``0`` fit, ``1`` actual size, arrows walk
the graph (Up: a producer, Down: a consumer, Left/Right: the neighbour in the same layer),
``Home``/``End`` the first/last node, ``Enter`` centres on the selection, ``Esc`` clears it.
Tooltips are built lazily for the node or edge under the cursor. A message (e.g. "Laying
out…") can be painted over an empty or stale view.
"""
from __future__ import annotations

import logging
from typing import Callable

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QKeyEvent, QMouseEvent, QPainter, QTransform, QWheelEvent
from PySide6.QtWidgets import QGraphicsView, QToolTip

from .items import OVERVIEW_BELOW, EdgeItem, NodeItem
from .scene import GraphScene

log = logging.getLogger(__name__)

MIN_SCALE, MAX_SCALE = 0.01, 4.0
READABLE = 0.85


class GraphView(QGraphicsView):
    """A view of a :class:`GraphScene`."""

    zoomChanged = Signal(float)
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
        self.tooltip_for: Callable[[NodeItem | EdgeItem], str] | None = None
        self._press_pos: QPointF | None = None
        self._over_node = False
        self.setMouseTracking(True)

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

    def fit(self) -> None:
        """Show the whole graph."""
        r = self.graph_scene.itemsBoundingRect() if self.graph_scene.graph is None else self.graph_scene.sceneRect()
        if r.isEmpty():
            return
        self.fitInView(r, Qt.AspectRatioMode.KeepAspectRatio)
        if self.zoom > 1.2:
            self.set_zoom(1.2, r.center())
        self._zoom_changed()

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
        # centre on the first inputs, horizontally
        layer0 = s.layout.layers[0] if s.layout and s.layout.layers else []
        x = sum(s.layout.x[i] for i in layer0) / len(layer0) if layer0 else r.center().x()
        self.centerOn(QPointF(x, top))
        self._zoom_changed()

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
                i = self.graph_scene.node_at(self.mapToScene(event.position().toPoint()))
                add = bool(event.modifiers() & (Qt.KeyboardModifier.ControlModifier |
                                                Qt.KeyboardModifier.ShiftModifier))
                self.graph_scene.click(i, add=add)
        self._press_pos = None

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        i = self.graph_scene.node_at(self.mapToScene(event.position().toPoint()))
        if i is None:
            super().mouseDoubleClickEvent(event)
            return
        self.graph_scene.select([self.graph_scene.nodes[i].node.name], emit=True)
        self.focus_indices([i])
        self.nodeActivated.emit(self.graph_scene.nodes[i].node.name)

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
                self.nodeActivated.emit(s.nodes[idx[0]].node.name)
        elif key in (Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Home,
                     Qt.Key.Key_End):
            self._navigate(key)
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def _navigate(self, key: int) -> None:
        s = self.graph_scene
        if s.graph is None or not s.nodes or s.layout is None:
            return
        sel = s.selected_items()
        lay = s.layout
        if key == Qt.Key.Key_Home or (not sel and key in (Qt.Key.Key_Down, Qt.Key.Key_Right)):
            target = lay.layers[0][0] if lay.layers and lay.layers[0] else 0
        elif key == Qt.Key.Key_End or not sel:
            target = lay.layers[-1][-1] if lay.layers and lay.layers[-1] else len(s.nodes) - 1
        else:
            cur = sel[-1].index
            target = cur
            if key == Qt.Key.Key_Up and s.preds[cur]:
                target = min(s.preds[cur], key=lambda j: abs(lay.x[j] - lay.x[cur]))
            elif key == Qt.Key.Key_Down and s.succs[cur]:
                target = min(s.succs[cur], key=lambda j: abs(lay.x[j] - lay.x[cur]))
            elif key in (Qt.Key.Key_Left, Qt.Key.Key_Right):
                row = lay.layers[lay.layer[cur]]
                k = lay.order[cur] + (-1 if key == Qt.Key.Key_Left else 1)
                if 0 <= k < len(row):
                    target = row[k]
        s.select([s.nodes[target].node.name], emit=True)
        self.focus_indices([target], zoom_in=True)

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
        if not s.detail:
            return ""
        d = 4 / max(self.zoom, 0.01)
        area = QRectF(p.x() - d, p.y() - d, 2 * d, 2 * d)
        for it in s.items(area, Qt.ItemSelectionMode.IntersectsItemBoundingRect):
            if isinstance(it, EdgeItem) and it.hover_shape().intersects(area):
                return self.tooltip_for(it)  # type: ignore[misc]
        return ""

    # ---------------------------------------------------------------- message overlay
    def set_message(self, text: str) -> None:
        self.message = text
        self.viewport().update()

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:
        super().drawForeground(painter, rect)
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
