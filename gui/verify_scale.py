"""The colour scale of verification errors: :class:`ErrorScale`, a log scale of max relative
error around the tolerance.

Positions run over :attr:`ErrorScale.DECADES_BELOW` decades below the tolerance and
:attr:`ErrorScale.DECADES_ABOVE` above it: greens well within tolerance, amber at it, orange to
red beyond. An exact match sits at the bottom, a value ncnn could not compute at the top. The
graph views fill nodes with :meth:`ErrorScale.fill` (the colour softened towards the view's
background so node text stays readable), the plot and legend use :meth:`ErrorScale.strong`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtGui import QColor

from .theme import GraphTheme

#: (position on the scale, colour); the tolerance sits at ``DECADES_BELOW / (BELOW + ABOVE)``
_STOPS = ((0.0, "#1f7a3a"), (0.40, "#3fa34d"), (0.62, "#9cc63b"), (0.75, "#e9b824"), (0.86, "#f08a24"),
          (1.0, "#d62828"))
_FILL_MIX = {False: 0.5, True: 0.42}  #: how much of the strong colour a node fill keeps (light, dark)


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    """``t`` of ``a`` and ``1 - t`` of ``b``."""
    return QColor.fromRgbF(a.redF() * t + b.redF() * (1 - t), a.greenF() * t + b.greenF() * (1 - t),
                           a.blueF() * t + b.blueF() * (1 - t))


@dataclass(frozen=True)
class ErrorScale:
    """Maps a max relative error to a colour, on a log scale centred on ``tolerance``."""

    tolerance: float
    DECADES_BELOW = 6
    DECADES_ABOVE = 2

    @property
    def low(self) -> float:
        """Errors at or below this get the bottom colour."""
        return self.tolerance * 10.0 ** -self.DECADES_BELOW

    @property
    def high(self) -> float:
        """Errors at or above this get the top colour."""
        return self.tolerance * 10.0 ** self.DECADES_ABOVE

    def position(self, error: float) -> float:
        """Where ``error`` sits on the scale, 0 … 1 (0 exact, 1 at ``high`` or beyond)."""
        if math.isnan(error) or error >= self.high:
            return 1.0
        if error <= self.low:
            return 0.0
        span = self.DECADES_BELOW + self.DECADES_ABOVE
        return (math.log10(error) - math.log10(self.low)) / span

    @property
    def tolerance_position(self) -> float:
        return self.DECADES_BELOW / (self.DECADES_BELOW + self.DECADES_ABOVE)

    def colour_at(self, position: float) -> QColor:
        """The strong colour at a position of the scale."""
        p = min(max(position, 0.0), 1.0)
        for (p0, c0), (p1, c1) in zip(_STOPS, _STOPS[1:]):
            if p <= p1:
                t = 0.0 if p1 == p0 else (p - p0) / (p1 - p0)
                return _mix(QColor(c1), QColor(c0), t)
        return QColor(_STOPS[-1][1])

    def strong(self, error: float) -> QColor:
        """The colour of ``error`` in plots and the legend."""
        return self.colour_at(self.position(error))

    def fill(self, error: float, theme: GraphTheme) -> QColor:
        """The fill of a node whose error is ``error``, softened towards the view's background."""
        return self.soften(self.strong(error), theme)

    @staticmethod
    def soften(colour: QColor, theme: GraphTheme) -> QColor:
        return _mix(colour, theme.background if theme.dark else QColor("white"), _FILL_MIX[theme.dark])

    @staticmethod
    def neutral(theme: GraphTheme) -> QColor:
        """The fill of a node with no compared value (no PyTorch counterpart)."""
        return QColor("#3a3d42") if theme.dark else QColor("#eef0f2")

    def ticks(self) -> list[tuple[float, float]]:
        """(position, error) of every decade on the scale."""
        span = self.DECADES_BELOW + self.DECADES_ABOVE
        return [(k / span, self.low * 10.0 ** k) for k in range(span + 1)]


def format_error(x: float | None) -> str:
    """``3.1e-05``; ``0`` for an exact match; ``—`` when not compared; ``∞`` when not computed."""
    if x is None:
        return "—"
    if x == 0:
        return "0"
    if math.isinf(x) or math.isnan(x):
        return "∞"
    return f"{x:.2g}" if 0.01 <= x < 1000 else f"{x:.1e}"
