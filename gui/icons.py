"""Toolbar icons: the SVGs in ``resources/icons``, drawn in the palette's text colour so they
read on light and dark themes alike."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QGuiApplication, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"


@lru_cache(maxsize=64)
def _icon(name: str, colour: str) -> QIcon:
    path = ICONS / f"{name}.svg"
    if not path.exists():
        return QIcon()
    svg = path.read_text().replace("currentColor", colour)
    renderer = QSvgRenderer(QByteArray(svg.encode()))
    icon = QIcon()
    for size in (16, 24, 32, 48):
        pm = QPixmap(size, size)
        pm.fill(Qt.GlobalColor.transparent)
        p = QPainter(pm)
        renderer.render(p, QRectF(0, 0, size, size))
        p.end()
        icon.addPixmap(pm)
    return icon


def icon(name: str) -> QIcon:
    colour = QGuiApplication.palette().color(QPalette.ColorRole.WindowText).name()
    return _icon(name, colour)
