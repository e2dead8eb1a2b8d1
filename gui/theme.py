"""Colours and fonts, derived from the application palette so light and dark both work.

:func:`graph_theme` gives the graph views their colours (node fills per category, inputs,
parameters, outputs, problems, selection, provenance links, diff marks); :func:`apply_scheme`
switches the whole application between the system palette and explicit light / dark ones
(the View ▸ Theme menu and ``--theme``). :func:`is_dark` tells which one is showing.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

log = logging.getLogger(__name__)

SCHEMES = ("system", "light", "dark")


def is_dark(palette: QPalette | None = None) -> bool:
    pal = palette or QGuiApplication.palette()
    return pal.color(QPalette.ColorRole.Window).lightness() < 128


def muted(palette: QPalette | None = None) -> QColor:
    """An opaque grey between the text and the background, for secondary text in rich text (the
    palette's PlaceholderText is half-transparent: as a CSS colour it turns into plain black)."""
    pal = palette or QGuiApplication.palette()
    a, b = pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.Base)
    t = 0.58
    return QColor.fromRgbF(a.redF() * t + b.redF() * (1 - t), a.greenF() * t + b.greenF() * (1 - t),
                           a.blueF() * t + b.blueF() * (1 - t))


# category → (light fill, dark fill); hues chosen to stay apart in both schemes
_CATEGORY_HUES = {
    "conv": ("#cfe0f7", "#27466e"),
    "linear": ("#d9d3f3", "#3c3470"),
    "attention": ("#f3d3ea", "#67315a"),
    "norm": ("#cdeee6", "#1f5a4e"),
    "activation": ("#fbe2c6", "#6b4621"),
    "pool": ("#d8efcc", "#30552a"),
    "shape": ("#e6e6e6", "#3b3f45"),
    "reduce": ("#f6f0c0", "#5e5722"),
    "math": ("#e8dcf0", "#4a3b57"),
    "other": ("#ececec", "#3a3d42"),
    "problem": ("#f8d0d0", "#6e2a2a"),
    "io": ("#c9ecd9", "#1f5a3b"),
    "param": ("#f4f1e8", "#34322b"),
    "buffer": ("#e9eef5", "#2b3138"),
    "constant": ("#eeeeee", "#303030"),
}

_ACCENTS = {
    # name: (light, dark)
    "error": ("#d62828", "#ff6b6b"),
    "error_fill": ("#fde2e2", "#5a2326"),
    "selected": ("#1f6feb", "#58a6ff"),
    "linked": ("#e36209", "#ffa657"),
    "added": ("#1a7f37", "#3fb950"),
    "removed": ("#cf222e", "#f85149"),
    "changed": ("#bf8700", "#d29922"),
    "input_border": ("#1a7f37", "#3fb950"),
    "output_border": ("#8250df", "#bc8cff"),
}


@dataclass
class GraphTheme:
    dark: bool
    background: QColor
    text: QColor
    muted: QColor
    border: QColor
    edge: QColor
    edge_param: QColor
    categories: dict[str, QColor] = field(default_factory=dict)
    accents: dict[str, QColor] = field(default_factory=dict)
    font: QFont = field(default_factory=QFont)
    bold: QFont = field(default_factory=QFont)
    small: QFont = field(default_factory=QFont)

    def fill(self, category: str) -> QColor:
        return self.categories.get(category) or self.categories["other"]

    def accent(self, name: str) -> QColor:
        return self.accents[name]


def graph_theme(palette: QPalette | None = None) -> GraphTheme:
    pal = palette or QGuiApplication.palette()
    dark = is_dark(pal)
    k = 1 if dark else 0
    base = pal.color(QPalette.ColorRole.Base)
    text = pal.color(QPalette.ColorRole.Text)
    muted = QColor(text)
    muted.setAlphaF(0.62)
    border = QColor("#8b949e") if dark else QColor("#6e7781")
    edge = QColor("#8b949e") if dark else QColor("#57606a")
    edge_param = QColor(edge)
    edge_param.setAlphaF(0.45)
    font = QFont(QApplication.font())
    font.setPointSizeF(9.0)
    bold = QFont(font)
    bold.setBold(True)
    small = QFont(font)
    small.setPointSizeF(8.0)
    return GraphTheme(
        dark=dark,
        background=base,
        text=text,
        muted=muted,
        border=border,
        edge=edge,
        edge_param=edge_param,
        categories={c: QColor(v[k]) for c, v in _CATEGORY_HUES.items()},
        accents={a: QColor(v[k]) for a, v in _ACCENTS.items()},
        font=font,
        bold=bold,
        small=small,
    )


def _dark_palette() -> QPalette:
    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#1e2227",
        QPalette.ColorRole.WindowText: "#d7dae0",
        QPalette.ColorRole.Base: "#16191d",
        QPalette.ColorRole.AlternateBase: "#1f2328",
        QPalette.ColorRole.ToolTipBase: "#2b3036",
        QPalette.ColorRole.ToolTipText: "#e6e6e6",
        QPalette.ColorRole.PlaceholderText: "#7d8590",
        QPalette.ColorRole.Text: "#d7dae0",
        QPalette.ColorRole.Button: "#262a30",
        QPalette.ColorRole.ButtonText: "#d7dae0",
        QPalette.ColorRole.BrightText: "#ff7b72",
        QPalette.ColorRole.Light: "#3a3f46",
        QPalette.ColorRole.Midlight: "#30353b",
        QPalette.ColorRole.Mid: "#2a2e34",
        QPalette.ColorRole.Dark: "#101215",
        QPalette.ColorRole.Shadow: "#000000",
        QPalette.ColorRole.Highlight: "#2f6fd1",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#58a6ff",
        QPalette.ColorRole.LinkVisited: "#bc8cff",
    }
    for role, colour in roles.items():
        p.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6e7681"))
    return p


def _light_palette() -> QPalette:
    app = QApplication.instance()
    p = app.style().standardPalette() if app is not None else QPalette()
    p.setColor(QPalette.ColorRole.Highlight, QColor("#2f6fd1"))
    p.setColor(QPalette.ColorRole.Link, QColor("#0b5cd5"))
    return p


_system_palette: QPalette | None = None


def apply_scheme(scheme: str) -> None:
    """Use the system palette (``system``) or an explicit ``light`` / ``dark`` one."""
    global _system_palette
    app = QApplication.instance()
    if app is None:
        return
    if _system_palette is None:
        _system_palette = QPalette(app.palette())
    if scheme == "dark":
        app.setPalette(_dark_palette())
    elif scheme == "light":
        app.setPalette(_light_palette())
    else:
        hints = app.styleHints()
        try:
            hints.unsetColorScheme()
        except AttributeError:  # Qt < 6.8
            pass
        app.setPalette(_system_palette)
        if hasattr(hints, "colorScheme") and hints.colorScheme() == Qt.ColorScheme.Dark and not is_dark(app.palette()):
            app.setPalette(_dark_palette())
    log.debug("colour scheme %s (dark=%s)", scheme, is_dark())
