"""The legend of the error colouring: :class:`ErrorLegend`, a two-line strip a graph panel shows
between its header and its view (:meth:`gui.graph.panel.GraphPanel.set_legend`) — never over
the graph, so it hides no node. First line: what is coloured (max relative error, of the whole
model or of each layer alone) and the symbols ("not compared", "first divergent"); second line:
the log colour bar of max relative error with its decades and the tolerance."""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QLinearGradient, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from .theme import GraphTheme
from .verify_scale import ErrorScale

BAR_H = 9.0
PAD = 8.0
SWATCH = QSize(16, 11)


def decade_label(x: float) -> str:
    """``1e-4`` for 0.0001."""
    return f"1e{round(math.log10(x))}"


class ErrorLegend(QWidget):
    """Colour bar and symbols of the error colouring (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("errorLegend")
        self.scale: ErrorScale | None = None
        self.theme: GraphTheme | None = None
        self.title = ("max rel. error", "")
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(self.sizeHint().height())
        self.setToolTip("Nodes are filled by their max relative error against PyTorch (log scale); the bold "
                        "tick is the tolerance")

    def _fonts(self) -> tuple[QFont, QFont]:
        small = QFont(self.font())
        small.setPointSizeF(7.8)
        bold = QFont(small)
        bold.setBold(True)
        return small, bold

    def sizeHint(self) -> QSize:
        line = self.fontMetrics().height()
        return QSize(360, int(2 * PAD + 2.4 * line + BAR_H))

    def minimumSizeHint(self) -> QSize:
        return QSize(120, self.sizeHint().height())

    def set_scale(self, scale: ErrorScale, theme: GraphTheme, title: str, subtitle: str = "") -> None:
        self.scale, self.theme, self.title = scale, theme, (title, subtitle)
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.scale is None or self.theme is None:
            return
        s, t = self.scale, self.theme
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        p.fillRect(self.rect(), pal.color(QPalette.ColorRole.AlternateBase))
        p.setPen(QPen(pal.color(QPalette.ColorRole.Mid), 1.0))
        p.drawLine(QPointF(0, self.height() - 0.5), QPointF(self.width(), self.height() - 0.5))
        text = pal.color(QPalette.ColorRole.WindowText)
        muted = QColor(text)
        muted.setAlphaF(0.68)
        small, bold = self._fonts()
        p.setFont(small)
        line = p.fontMetrics().height()

        # line 1: what is coloured, then the symbols at the right
        y = PAD + line * 0.8
        p.setFont(bold)
        p.setPen(text)
        p.drawText(QPointF(PAD, y), self.title[0])
        x = PAD + p.fontMetrics().horizontalAdvance(self.title[0]) + 6
        p.setFont(small)
        if self.title[1]:
            p.setPen(muted)
            p.drawText(QPointF(x, y), f"· {self.title[1]}")
        fm = p.fontMetrics()
        right = self.width() - PAD
        first_w = SWATCH.width() + 6 + fm.horizontalAdvance("first divergent")
        sw = QRectF(right - first_w, y - SWATCH.height() + 1, SWATCH.width(), SWATCH.height())
        p.setPen(QPen(t.accent("error"), 2.0))
        p.setBrush(s.soften(s.colour_at(1.0), t))
        p.drawRoundedRect(sw, 3, 3)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(t.accent("error"))
        p.drawEllipse(QPointF(sw.right(), sw.top()), 3.5, 3.5)
        p.setPen(text)
        p.drawText(QPointF(sw.right() + 6, y), "first divergent")
        nc_w = SWATCH.width() + 6 + fm.horizontalAdvance("not compared") + 14
        sw.translate(-nc_w, 0)
        p.setPen(QPen(t.border, 0.8))
        p.setBrush(s.neutral(t))
        p.drawRoundedRect(sw, 3, 3)
        p.setPen(text)
        p.drawText(QPointF(sw.right() + 6, y), "not compared")

        # line 2: the bar, small errors left, with its decades below
        bar = QRectF(PAD, y + line * 0.45, self.width() - 2 * PAD, BAR_H)
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        for k in range(33):
            pos = k / 32
            grad.setColorAt(pos, s.soften(s.colour_at(pos), t))
        p.setPen(QPen(t.border, 0.8))
        p.setBrush(grad)
        p.drawRect(bar)
        tol = s.tolerance_position
        ticks = s.ticks()
        label_w = fm.horizontalAdvance("1e-10") + 8
        every = max(1, math.ceil(label_w * (len(ticks) - 1) / max(bar.width(), 1.0)))
        taken: list[tuple[float, float]] = []  #: x spans of the labels drawn, the tolerance's first
        order = sorted(range(len(ticks)), key=lambda k: abs(ticks[k][0] - tol) > 1e-9)
        for k in order:
            pos, err = ticks[k]
            xx = bar.left() + bar.width() * pos
            at_tol = abs(pos - tol) < 1e-9
            p.setPen(QPen(text, 2.0) if at_tol else QPen(muted, 1.0))
            p.drawLine(QPointF(xx, bar.top() - (3 if at_tol else 0)), QPointF(xx, bar.bottom() + 3))
            if k % every and not at_tol:
                continue
            label = f"{decade_label(err)} tolerance" if at_tol else decade_label(err)
            p.setFont(bold if at_tol else small)
            w = p.fontMetrics().horizontalAdvance(label)
            lx = min(max(xx - w / 2, 0.0), self.width() - w)
            if any(lx < b + 4 and a < lx + w + 4 for a, b in taken):
                continue  # would run into a label already drawn
            taken.append((lx, lx + w))
            p.setPen(text if at_tol else muted)
            p.drawText(QPointF(lx, bar.bottom() + line * 0.95), label)
        p.end()
