"""A graph view as a picture file: :func:`export_image` writes what a graph panel shows — every
visible node, module box and edge, at full detail whatever the view's zoom — as SVG (vector,
text kept as text) or PNG.

The file is written next to its destination and renamed into place once complete (never a
half-written picture). A PNG of a very large graph is scaled down to stay within
:data:`MAX_PNG_PIXELS` (and Qt's 32k side limit); an SVG keeps the graph's own units.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from PySide6.QtCore import QRectF, QSize
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsPathItem

from .scene import GraphScene

log = logging.getLogger(__name__)

#: most pixels a PNG gets (larger graphs are scaled down)
MAX_PNG_PIXELS = 120_000_000
MAX_PNG_SIDE = 32_000
#: scale of a PNG of an ordinary graph (2: sharp on high-density screens)
PNG_SCALE = 2.0
FORMATS = {".svg": "SVG", ".png": "PNG"}


def image_format(path: str | os.PathLike) -> str:
    """``SVG`` or ``PNG`` from the file's suffix (ValueError for anything else)."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: export a graph as .svg or .png")
    return fmt


def png_scale(width: float, height: float) -> float:
    """The scale a PNG of a ``width``×``height`` scene gets."""
    s = PNG_SCALE
    if width * height * s * s > MAX_PNG_PIXELS:
        s = (MAX_PNG_PIXELS / (width * height)) ** 0.5
    return min(s, MAX_PNG_SIDE / max(width, 1.0), MAX_PNG_SIDE / max(height, 1.0))


def export_image(scene: GraphScene, path: str | os.PathLike, title: str = "") -> tuple[int, int]:
    """Write the scene's graph to ``path`` (.svg or .png); returns the picture's size."""
    fmt = image_format(path)
    rect = scene.sceneRect()
    if scene.graph is None or rect.isEmpty():
        raise ValueError("there is no graph to export")
    final = Path(path)
    tmp = final.with_name(f".{final.name}.part")
    detail = scene.detail
    scene.set_detail(True)  # the items themselves, not the overview a far zoom shows
    scene.materialize()  # every node's item, not only those a view has shown
    # an empty path (no selection to emphasise) would be an invalid ``d=""`` in the SVG
    empty = [it for it in scene.items() if isinstance(it, QGraphicsPathItem) and it.isVisible() and it.path().isEmpty()]
    for it in empty:
        it.setVisible(False)
    try:
        if fmt == "SVG":
            size = QSize(int(rect.width() + 0.5), int(rect.height() + 0.5))
            gen = QSvgGenerator()
            gen.setFileName(str(tmp))
            gen.setSize(size)
            gen.setViewBox(QRectF(0, 0, size.width(), size.height()))
            gen.setTitle(title or final.stem)
            gen.setDescription("pt2ncnn Studio graph")
            _paint(scene, gen, QRectF(0, 0, size.width(), size.height()), rect)
        else:
            s = png_scale(rect.width(), rect.height())
            size = QSize(max(int(rect.width() * s), 1), max(int(rect.height() * s), 1))
            img = QImage(size, QImage.Format.Format_ARGB32_Premultiplied)
            img.fill(scene.theme.background)
            _paint(scene, img, QRectF(0, 0, size.width(), size.height()), rect)
            if not img.save(str(tmp), "PNG"):
                raise OSError(f"{final}: the PNG could not be written")
        os.replace(tmp, final)
    finally:
        for it in empty:
            it.setVisible(True)
        scene.set_detail(detail)
        if tmp.exists():
            tmp.unlink()
    log.info("graph exported to %s (%d×%d)", final, size.width(), size.height())
    return size.width(), size.height()


def _paint(scene: GraphScene, device, target: QRectF, source: QRectF) -> None:
    p = QPainter(device)
    try:
        p.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        scene.render(p, target, source)
    finally:
        p.end()
