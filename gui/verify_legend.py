"""The legend of the error colouring: :class:`ErrorLegend`, a narrow box painted over a graph
view's right edge (graphs run top to bottom, so the edge is free) — the vertical log colour bar
of max relative error with its decades and the tolerance, the "not compared" swatch and the
first-divergent badge."""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QLinearGradient, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QWidget

from .theme import GraphTheme
from .verify_scale import ErrorScale

BAR_W, BAR_H = 12.0, 118.0
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
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.scale: ErrorScale | None = None
        self.theme: GraphTheme | None = None
        self.title = ("max rel. error", "")
        self.resize(self.sizeHint())

    def sizeHint(self) -> QSize:
        return QSize(136, 198)

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
        box = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        bg = QColor(pal.color(QPalette.ColorRole.ToolTipBase))
        bg.setAlphaF(0.94)
        p.setPen(QPen(pal.color(QPalette.ColorRole.Mid), 1.0))
        p.setBrush(bg)
        p.drawRoundedRect(box, 6, 6)
        text = pal.color(QPalette.ColorRole.ToolTipText)
        muted = QColor(text)
        muted.setAlphaF(0.68)
        small = QFont(p.font())
        small.setPointSizeF(7.8)
        bold = QFont(small)
        bold.setBold(True)
        p.setFont(small)
        fm = p.fontMetrics()
        line = fm.height()

        # title: what is coloured
        y = PAD + line * 0.8
        p.setFont(bold)
        p.setPen(text)
        p.drawText(QPointF(PAD, y), self.title[0])
        p.setFont(small)
        if self.title[1]:
            y += line
            p.setPen(muted)
            p.drawText(QPointF(PAD, y), self.title[1])

        # the bar, large errors on top; the node fills (what the views show)
        bar = QRectF(PAD, y + line * 0.6, BAR_W, BAR_H)
        grad = QLinearGradient(bar.bottomLeft(), bar.topLeft())
        for k in range(33):
            pos = k / 32
            grad.setColorAt(pos, s.soften(s.colour_at(pos), t))
        p.setPen(QPen(t.border, 0.8))
        p.setBrush(grad)
        p.drawRect(bar)
        tol = s.tolerance_position
        for k, (pos, err) in enumerate(s.ticks()):
            yy = bar.bottom() - bar.height() * pos
            at_tol = abs(pos - tol) < 1e-9
            if at_tol:
                p.setPen(QPen(text, 1.8))
                p.drawLine(QPointF(bar.left() - 3, yy), QPointF(bar.right() + 5, yy))
            else:
                p.setPen(QPen(muted, 1.0))
                p.drawLine(QPointF(bar.right(), yy), QPointF(bar.right() + 3, yy))
            if k % 2 == 0 or at_tol:
                p.setFont(bold if at_tol else small)
                p.setPen(text if at_tol else muted)
                label = f"{decade_label(err)} tolerance" if at_tol else decade_label(err)
                p.drawText(QPointF(bar.right() + 7, yy + line * 0.32), label)
        p.setFont(small)

        # symbols: not compared, first divergent
        y = bar.bottom() + line * 0.9
        sw = QRectF(PAD, y, SWATCH.width(), SWATCH.height())
        p.setPen(QPen(t.border, 0.8))
        p.setBrush(s.neutral(t))
        p.drawRoundedRect(sw, 3, 3)
        p.setPen(text)
        p.drawText(QPointF(sw.right() + 6, sw.bottom() - 1), "not compared")
        sw.translate(0, line + 5)
        p.setPen(QPen(t.accent("error"), 2.0))
        p.setBrush(s.soften(s.colour_at(1.0), t))
        p.drawRoundedRect(sw, 3, 3)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(t.accent("error"))
        p.drawEllipse(QPointF(sw.right(), sw.top()), 4.0, 4.0)
        p.setPen(text)
        p.drawText(QPointF(sw.right() + 6, sw.bottom() - 1), "first divergent")
        p.end()
