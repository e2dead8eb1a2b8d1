"""The overview map in a corner of a graph view: the whole graph as a thumbnail and the part
the view shows as a rectangle; clicking or dragging in it moves the view there.

The thumbnail is rendered once per layout from the scene's overview chunks (a handful of
paths); scrolling and zooming only repaint the rectangle over it, so the map costs nothing per
frame that grows with the graph.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPaintEvent, QPen, QTransform
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:  # pragma: no cover
    from .view import GraphView

#: largest side of the map, pixels
SIDE = 170
MARGIN = 10


class Minimap(QWidget):
    def __init__(self, view: "GraphView"):
        super().__init__(view.viewport())
        self.view = view
        self.image = QImage()
        self._to_map = QTransform()
        self._scene_rect = QRectF()
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Overview — click or drag to move the view")
        self.hide()

    # ---------------------------------------------------------------- content
    def rebuild(self) -> None:
        """Render the thumbnail of the scene as it is now (after a layout)."""
        scene = self.view.graph_scene
        rect = scene.sceneRect()
        if scene.graph is None or rect.isEmpty():
            self.image = QImage()
            self.hide()
            return
        scale = min(SIDE / rect.width(), SIDE / rect.height())
        w, h = max(int(rect.width() * scale), 24), max(int(rect.height() * scale), 24)
        self.setFixedSize(w + 2, h + 2)
        self._scene_rect = rect
        self._to_map = QTransform().translate(1, 1).scale(scale, scale).translate(-rect.left(), -rect.top())
        dpr = self.devicePixelRatioF()
        img = QImage(int((w + 2) * dpr), int((h + 2) * dpr), QImage.Format.Format_ARGB32_Premultiplied)
        img.setDevicePixelRatio(dpr)
        bg = QColor(scene.theme.background)
        img.fill(bg)
        p = QPainter(img)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setTransform(self._to_map)
        for item in scene.overview_items():
            item.paint(p, None)
        p.end()
        self.image = img
        self.place()
        self.update_visibility()

    def place(self) -> None:
        vp = self.view.viewport()
        self.move(vp.width() - self.width() - MARGIN, vp.height() - self.height() - MARGIN)

    def update_visibility(self) -> None:
        """Shown only when the graph does not fit the view."""
        if self.image.isNull():
            self.hide()
            return
        visible = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        self.setVisible(not visible.contains(self._scene_rect.adjusted(30, 30, -30, -30)))
        self.update()

    # ---------------------------------------------------------------- painting
    def paintEvent(self, event: QPaintEvent) -> None:
        if self.image.isNull():
            return
        p = QPainter(self)
        p.setOpacity(0.92)
        p.drawImage(0, 0, self.image)
        p.setOpacity(1.0)
        theme = self.view.graph_scene.theme
        frame = QColor(theme.border)
        p.setPen(QPen(frame, 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(QRectF(0.5, 0.5, self.width() - 1, self.height() - 1))
        visible = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        r = self._to_map.mapRect(visible).intersected(QRectF(0, 0, self.width(), self.height()))
        accent = QColor(theme.accent("selected"))
        p.setPen(QPen(accent, 1.5))
        fill = QColor(accent)
        fill.setAlphaF(0.12)
        p.setBrush(fill)
        p.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5))
        p.end()

    # ---------------------------------------------------------------- navigation
    def _go(self, pos: QPointF) -> None:
        inv, ok = self._to_map.inverted()
        if ok:
            self.view.centerOn(inv.map(pos))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._go(event.position())
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._go(event.position())
        event.accept()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        event.accept()

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        event.accept()
