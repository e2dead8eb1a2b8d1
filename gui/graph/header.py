"""The header row of a graph panel: :class:`PanelHeader`.

Title (or the graph chooser), what the graph holds (``782 ops``, the pass's ``+141 −96 ~43``),
the zoom and the panel's tool buttons. It never clips what it says: when the row is too narrow
for everything, the counts move to a second line; when even that is not enough, the tool buttons
drop their text and keep their icons (their tooltips say what they do).
"""
from __future__ import annotations

from typing import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from .. import icons

TEXT_ONLY, ICON_ONLY = Qt.ToolButtonStyle.ToolButtonTextOnly, Qt.ToolButtonStyle.ToolButtonIconOnly


class PanelHeader(QWidget):
    """See the module docstring. ``lead`` are the widgets at the left (title, graph chooser),
    ``buttons`` the tool buttons at the right with their icon names."""

    def __init__(self, lead: Sequence[QWidget], info: QLabel, zoom: QLabel,
                 buttons: Sequence[tuple[QToolButton, str]], parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("panelHeader")
        self.lead = list(lead)
        self.info = info
        self.zoom = zoom
        self.buttons = list(buttons)
        self.wrapped = False  #: the counts are on a second line
        self.compact = False  #: the buttons show icons only
        info.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.row = QHBoxLayout()
        self.row.setSpacing(6)
        for w in self.lead:
            self.row.addWidget(w)
        self.row.addWidget(info, 1)
        self.row.addWidget(zoom)
        for b, _name in self.buttons:
            b.setToolButtonStyle(TEXT_ONLY)
            self.row.addWidget(b)
        self._widths: dict[tuple[int, bool], int] = {}
        self.second = QHBoxLayout()
        self.second.setContentsMargins(0, 0, 0, 0)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(8, 3, 4, 3)
        outer.setSpacing(1)
        outer.addLayout(self.row)
        outer.addLayout(self.second)
        self.refresh_icons()

    def refresh_icons(self) -> None:
        """Icons in the palette's text colour (again after a theme change)."""
        for b, name in self.buttons:
            b.setIcon(icons.icon(name))
        self._widths = {}

    # ---------------------------------------------------------------- fitting
    def _button_width(self, b: QToolButton, compact: bool) -> int:
        """A button's width with text or with its icon only (measured on a copy)."""
        key = (id(b), compact)
        if key not in self._widths:
            probe = QToolButton()
            probe.setText(b.text())
            probe.setIcon(b.icon())
            probe.setAutoRaise(b.autoRaise())
            probe.setPopupMode(b.popupMode())
            if b.menu() is not None:
                probe.setMenu(b.menu())
            probe.setToolButtonStyle(ICON_ONLY if compact else TEXT_ONLY)
            probe.ensurePolished()
            self._widths[key] = probe.sizeHint().width()
        return self._widths[key]

    def needed(self, wrapped: bool, compact: bool) -> int:
        """Width the first line needs laid out that way."""
        shown = [w for w in (*self.lead, *([] if wrapped else [self.info]), self.zoom) if not w.isHidden()]
        m = self.layout().contentsMargins()
        return (sum(w.sizeHint().width() for w in shown) + sum(self._button_width(b, compact) for b, _n in self.buttons)
                + self.row.spacing() * (len(shown) + len(self.buttons) - 1) + m.left() + m.right())

    def relayout(self) -> None:
        """Pick the roomiest arrangement that fits the current width."""
        width = self.width()
        for wrapped, compact in ((False, False), (True, False), (True, True)):
            if self.needed(wrapped, compact) <= width:
                break
        self._arrange(wrapped, compact)

    def _arrange(self, wrapped: bool, compact: bool) -> None:
        if wrapped != self.wrapped:
            self.wrapped = wrapped
            if wrapped:
                self.row.removeWidget(self.info)
                self.second.addWidget(self.info, 1)
            else:
                self.second.removeWidget(self.info)
                self.row.insertWidget(len(self.lead), self.info, 1)
        if compact != self.compact:
            self.compact = compact
            for b, _n in self.buttons:
                b.setToolButtonStyle(ICON_ONLY if compact else TEXT_ONLY)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.relayout()
