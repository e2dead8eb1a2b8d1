"""The overview map in a corner of a graph view: the whole graph as a thumbnail and the part
the view shows as a rectangle; clicking or dragging in it moves the view there.

The thumbnail is made once per layout from the scene's node rectangles with numpy (a dot per
node in its colour, outlines of the outer module boxes); scrolling and zooming only repaint the
rectangle over it, so the map costs nothing per frame that grows with the graph.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPaintEvent, QPen, QTransform
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:  # pragma: no cover
    from .view import GraphView

#: largest side of the map, pixels
SIDE = 170
#: least width (height) of the map of a very tall (wide) graph
THIN = 56
MARGIN = 10


class Minimap(QWidget):
    def __init__(self, view: "GraphView"):
        # a child of the view, not of its viewport: scrolling the viewport would move it along
        super().__init__(view)
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
        # a very tall (or wide) graph is squeezed less across, so the map stays usable
        w, h = max(int(rect.width() * scale), THIN), max(int(rect.height() * scale), THIN)
        sx, sy = w / rect.width(), h / rect.height()
        self.setFixedSize(w + 2, h + 2)
        self._scene_rect = rect
        self._to_map = QTransform().translate(1, 1).scale(sx, sy).translate(-rect.left(), -rect.top())
        self.image = self._thumbnail(scene, rect, sx, sy, w + 2, h + 2)
        self.place()
        self.update_visibility()

    def _thumbnail(self, scene, rect: QRectF, sx: float, sy: float, w: int, h: int) -> QImage:
        """The graph as dots of its nodes' colours (numpy: a few array operations whatever the
        graph's size) with the outlines of the outer module boxes drawn over."""
        bg = QColor(scene.theme.background)
        pix = np.empty((h, w, 4), dtype=np.uint8)
        pix[:] = (bg.blue(), bg.green(), bg.red(), 255)
        rects, colours = scene.minimap_content()
        if len(rects):
            k = np.linspace(0.15, 0.85, 3)
            fx, fy = np.meshgrid(k, k)
            xs = rects[:, 0:1] + (rects[:, 2:3] - rects[:, 0:1]) * fx.ravel()
            ys = rects[:, 1:2] + (rects[:, 3:4] - rects[:, 1:2]) * fy.ravel()
            px = np.clip(((xs - rect.left()) * sx + 1).astype(int), 0, w - 1)
            py = np.clip(((ys - rect.top()) * sy + 1).astype(int), 0, h - 1)
            pix[py, px] = colours[:, None, :]
        img = QImage(pix.data, w, h, 4 * w, QImage.Format.Format_ARGB32_Premultiplied).copy()
        p = QPainter(img)
        p.setTransform(self._to_map)
        pen = QPen(QColor(scene.theme.border), 0)
        pen.setCosmetic(True)
        p.setPen(pen)
        p.setBrush(Qt.BrushStyle.NoBrush)
        for x0, y0, x1, y1 in scene.minimap_frames():
            p.drawRect(QRectF(x0, y0, x1 - x0, y1 - y0))
        p.end()
        return img

    def place(self) -> None:
        vp = self.view.viewport().geometry()
        self.move(vp.right() - self.width() - MARGIN, vp.bottom() - self.height() - MARGIN)
        self.raise_()

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
