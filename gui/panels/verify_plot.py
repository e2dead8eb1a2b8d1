"""The plot of the Verify dock: :class:`ErrorPlot`, max relative error per ncnn layer in
topological order on a log axis (pyqtgraph).

Each layer is one point coloured by the error colour scale; blamed layers (divergent, failed)
are red triangles, layers with nothing compared hollow grey dots at the bottom. The layer run
alone on PyTorch's inputs is a second, faint series; the tolerance is a dashed line and the first
divergent layer a vertical one. Clicking near a point emits :attr:`ErrorPlot.pointClicked` with
its layer index; hovering shows the layer's name, type and errors in a readout line and a
tooltip. Values are plotted as ``log10`` (exact matches at the bottom, values ncnn could not
compute at the top) with the axis labelled in powers of ten.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, Qt, Signal
from PySide6.QtGui import QColor, QCursor, QPalette
from PySide6.QtWidgets import QApplication, QLabel, QToolTip, QVBoxLayout, QWidget

from engine.verify import LayerRecord
from engine.verify.result import BLAMED, NOT_COMPARED

from ..verify_scale import ErrorScale
from .verify_table import describe_layer

#: how close (pixels) the pointer must be to a point for a click / hover to take it
CLICK_PX = 14.0
HOVER_PX = 22.0


def _braces(text: str) -> str:
    """``text`` safe in a label format string (pyqtgraph formats it with ``{value}``)."""
    return text.replace("{", "{{").replace("}", "}}")


class ErrorPlot(QWidget):
    """See the module docstring."""

    pointClicked = Signal(int)  #: layer index
    pointHovered = Signal(int)  #: layer index, -1 when the pointer left the points

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.records: list[LayerRecord] = []
        self.scale: ErrorScale | None = None
        self.x = np.zeros(0)
        self.y = np.zeros(0)  #: log10 of the plotted value of each layer
        self.hovered = -1
        self.selected = -1
        self.plot = pg.PlotWidget()
        self.plot.setObjectName("errorPlot")
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=True, y=False)
        pi = self.plot.getPlotItem()
        pi.setLabel("bottom", "ncnn layer (topological order)")
        pi.setLabel("left", "max relative error")
        left = pi.getAxis("left")
        left.setLogMode(True)
        left.enableAutoSIPrefix(False)  # powers of ten say it all; a "(x0.001)" would mislead
        pi.getAxis("bottom").enableAutoSIPrefix(False)
        pi.showGrid(x=False, y=True, alpha=0.18)
        self.line = pg.PlotDataItem()
        self.own = pg.ScatterPlotItem(size=6, symbol="d")
        self.points = pg.ScatterPlotItem()
        self.ring = pg.ScatterPlotItem(size=22, symbol="o")
        self.tol_line = pg.InfiniteLine(angle=0, movable=False,
                                        label="tolerance", labelOpts={"position": 0.03, "anchors": [(0, 1), (0, 1)]})
        self.first_line = pg.InfiniteLine(angle=90, movable=False,
                                          label="", labelOpts={"position": 0.06, "anchors": [(0, 1), (0, 1)]})
        for item in (self.tol_line, self.first_line, self.line, self.own, self.points, self.ring):
            pi.addItem(item)
        self.first_line.setVisible(False)
        self.readout = QLabel(" ")
        self.readout.setObjectName("errorReadout")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.plot.scene().sigMouseClicked.connect(self._on_click)
        self.plot.scene().sigMouseMoved.connect(self._on_move)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.plot, 1)
        lay.addWidget(self.readout)
        self.plot.setVisible(False)  # until there is something to plot
        self.apply_palette()

    # ---------------------------------------------------------------- theme
    def apply_palette(self) -> None:
        pal = QApplication.palette()
        bg, fg = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
        muted = QColor(fg)
        muted.setAlphaF(0.55)
        self.plot.setBackground(bg)
        for ax in ("left", "bottom"):
            axis = self.plot.getAxis(ax)
            axis.setPen(muted)
            axis.setTextPen(fg)
        self.line.setPen(pg.mkPen(muted, width=1.0))
        self.own.setPen(pg.mkPen(muted, width=1.0))
        self.own.setBrush(pg.mkBrush(None))
        self.tol_line.setPen(pg.mkPen(fg, width=1.2, style=Qt.PenStyle.DashLine))
        self.tol_line.label.setColor(fg)
        self.first_line.setPen(pg.mkPen("#d62828", width=1.4, style=Qt.PenStyle.DashLine))
        self.first_line.label.setColor("#d62828")
        self.ring.setPen(pg.mkPen(pal.color(QPalette.ColorRole.Highlight), width=2.4))
        self.ring.setBrush(pg.mkBrush(None))
        if self.records:
            self._draw_points()

    # ---------------------------------------------------------------- content
    def clear(self) -> None:
        self.records, self.scale = [], None
        self.x, self.y = np.zeros(0), np.zeros(0)
        self.hovered = self.selected = -1
        for item in (self.line, self.own, self.points, self.ring):
            item.setData([], [])
        self.first_line.setVisible(False)
        self.tol_line.setVisible(False)
        self.readout.setText(" ")
        self.plot.setXRange(0, 1, padding=0)  # nothing of an earlier model's range stays
        self.plot.setVisible(False)

    def set_data(self, records: Sequence[LayerRecord], values: Sequence[float | None],
                 own: Sequence[float | None], scale: ErrorScale, first: LayerRecord | None) -> None:
        """One point per layer: ``values[i]`` (max relative error, None: not compared) of
        ``records[i]``; ``own`` the layers' errors alone."""
        self.records, self.scale = list(records), scale
        self.values = list(values)
        self.plot.setVisible(True)
        self.bottom = math.log10(scale.low) - 1.0  #: where exact matches and uncompared layers sit
        self.top = math.log10(scale.high) + 1.0  #: where uncomputed values sit
        self.x = np.array([r.index for r in self.records], dtype=float)
        self.y = np.array([self._log(v) for v in values], dtype=float)
        # the other measure, where it says something (an exact match adds nothing)
        own_pts = [(r.index, self._log(v)) for r, v in zip(self.records, own) if v is not None and v > scale.low]
        self.own.setData([p[0] for p in own_pts], [p[1] for p in own_pts])
        self.line.setData(self.x, self.y)
        self._draw_points()
        # (a line's label takes its text only while the line is visible)
        self.tol_line.setVisible(True)
        self.tol_line.setPos(math.log10(scale.tolerance))
        self.tol_line.label.setFormat(f"tolerance {scale.tolerance:.0e}")
        if first is not None:
            self.first_line.setVisible(True)
            self.first_line.setPos(first.index)
            self.first_line.label.setFormat(f" first divergent: {_braces(first.layer)}")
        else:
            self.first_line.setVisible(False)
        hi = max(float(self.y.max()) if len(self.y) else 0.0, math.log10(scale.tolerance) + 1.0)
        margin = max(0.4, 0.09 * (hi - self.bottom))  # room for the largest symbols
        self.plot.setXRange(-0.5, max(len(self.records) - 0.5, 0.5), padding=0.02)
        self.plot.setYRange(self.bottom - margin, hi + margin, padding=0)
        self.selected = -1
        self.ring.setData([], [])

    def _log(self, v: float | None) -> float:
        if v is None or v <= 0:
            return self.bottom
        if not math.isfinite(v):
            return self.top
        return max(math.log10(v), self.bottom)

    def _draw_points(self) -> None:
        s = self.scale
        spots = []
        for r, v, x, y in zip(self.records, self.values, self.x, self.y):
            if v is None:
                spots.append({"pos": (x, y), "size": 7, "symbol": "o", "brush": pg.mkBrush(None),
                              "pen": pg.mkPen("#9aa0a6", width=1.2), "data": r.index})
                continue
            colour = s.strong(v)
            blamed = r.status in BLAMED
            spots.append({"pos": (x, y), "size": 15 if blamed else 9, "symbol": "t" if blamed else "o",
                          "brush": pg.mkBrush(colour),
                          "pen": pg.mkPen("#8e1b24" if blamed else colour.darker(140), width=1.6 if blamed else 1),
                          "data": r.index})
        self.points.setData(spots)

    # ---------------------------------------------------------------- selection, hit testing
    def select(self, index: int) -> None:
        """Ring the point of layer ``index`` (-1: none); no signal."""
        self.selected = index
        k = self._row(index)
        if k < 0:
            self.ring.setData([], [])
            return
        self.ring.setData([self.x[k]], [self.y[k]])
        lo, hi = self.plot.getViewBox().viewRange()[0]
        if not lo <= self.x[k] <= hi:  # scrolled away: bring it back into view
            half = (hi - lo) / 2
            self.plot.setXRange(self.x[k] - half, self.x[k] + half, padding=0)

    def _row(self, index: int) -> int:
        if index < 0 or not len(self.x):
            return -1
        hits = np.nonzero(self.x == index)[0]
        return int(hits[0]) if len(hits) else -1

    def point_scene_pos(self, index: int) -> QPointF:
        """Scene position of the point of layer ``index``."""
        k = self._row(index)
        return self.plot.getViewBox().mapViewToScene(QPointF(self.x[k], self.y[k]))

    def point_widget_pos(self, index: int) -> QPoint:
        """Position of the point of layer ``index`` in the plot widget (for mouse events)."""
        return self.plot.mapFromScene(self.point_scene_pos(index))

    def nearest(self, scene_pos: QPointF, max_px: float) -> int:
        """Layer index of the point nearest ``scene_pos`` within ``max_px`` pixels, else -1."""
        if not len(self.x):
            return -1
        vb = self.plot.getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return -1
        p = vb.mapSceneToView(scene_pos)
        px, py = vb.viewPixelSize()
        d = np.hypot((self.x - p.x()) / max(px, 1e-12), (self.y - p.y()) / max(py, 1e-12))
        k = int(np.argmin(d))
        return int(self.x[k]) if d[k] <= max_px else -1

    def _on_click(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        i = self.nearest(ev.scenePos(), CLICK_PX)
        if i >= 0:
            ev.accept()
            self.select(i)
            self.pointClicked.emit(i)

    def _on_move(self, scene_pos: QPointF) -> None:
        i = self.nearest(scene_pos, HOVER_PX)
        if i == self.hovered:
            return
        self.hovered = i
        if i < 0:
            self.readout.setText(" ")
            QToolTip.hideText()
        else:
            text = describe_layer(self.records[self._row(i)])
            self.readout.setText(text)
            QToolTip.showText(QCursor.pos(), text.replace(" · ", "\n", 3), self.plot)
        self.pointHovered.emit(i)
