"""View ▸ Link Graph Views: pan and zoom the two graphs together (:class:`ViewLink`).

While linked, zooming one view zooms the other to the same scale, and panning one moves the
other to what the node at its centre became (ATen → pnnx / ncnn) or came from (lowered → ATen),
through the same provenance index that links selections, keeping the centre's offset from that
node. Where the centre has no counterpart (a weight folded away), the other view keeps its
place along the graph in proportion.
"""
from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QPointF

from .graph.panel import GraphPanel
from .sync import ATEN, RIGHT, SelectionSync

log = logging.getLogger(__name__)


class ViewLink(QObject):
    """See the module docstring; off until :meth:`set_enabled`."""

    def __init__(self, sync: SelectionSync, parent: QObject | None = None):
        super().__init__(parent)
        self.sync = sync
        self.enabled = False
        self._following = False
        for side in (ATEN, RIGHT):
            view = sync.panel(side).view
            view.zoomChanged.connect(lambda _z, s=side: self.follow(s))
            view.horizontalScrollBar().valueChanged.connect(lambda _v, s=side: self.follow(s))
            view.verticalScrollBar().valueChanged.connect(lambda _v, s=side: self.follow(s))

    def set_enabled(self, on: bool, lead: str = ATEN) -> None:
        """Link (or unlink) the views; linking brings the other view to ``lead``'s place."""
        self.enabled = on
        if on:
            self.follow(lead)

    def follow(self, side: str) -> None:
        """The view of ``side`` moved: move the other one with it."""
        if not self.enabled or self._following:
            return
        src, dst = self.sync.panel(side), self.sync.panel(RIGHT if side == ATEN else ATEN)
        if src.graph is None or dst.graph is None or src.scene.layout is None or dst.scene.layout is None:
            return
        self._following = True
        try:
            centre = src.view.mapToScene(src.view.viewport().rect().center())
            dst.view.set_zoom(src.view.zoom, self._place(side, src, dst, centre))
        finally:
            self._following = False

    def _place(self, side: str, src: GraphPanel, dst: GraphPanel, centre: QPointF) -> QPointF:
        near = src.scene.nearest(centre)
        if near is not None:
            nodes, at = near
            names = [src.graph.nodes[i].name for i in nodes]
            there = dst.scene.indices(self.sync.counterparts(side, names))
            if there:
                target = dst.scene.nodes_rect(there).center()
                return QPointF(target.x() + centre.x() - at.x(), target.y() + centre.y() - at.y())
        a, b = src.scene.sceneRect(), dst.scene.sceneRect()
        fx = (centre.x() - a.left()) / max(a.width(), 1.0)
        fy = (centre.y() - a.top()) / max(a.height(), 1.0)
        return QPointF(b.left() + fx * b.width(), b.top() + fy * b.height())
