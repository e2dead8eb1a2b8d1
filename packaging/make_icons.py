"""Render the application icon ``resources/icons/pt2ncnn-studio.svg`` to the PNG sizes desktop
environments, PyInstaller and installers want (``resources/icons/pt2ncnn-studio-<N>.png``).

Run after editing the SVG (the PNGs are committed)::

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/make_icons.py
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SVG = ROOT / "resources" / "icons" / "pt2ncnn-studio.svg"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def png_path(size: int) -> Path:
    return SVG.with_name(f"pt2ncnn-studio-{size}.png")


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(ROOT))
    import gui  # noqa: F401  (the binding work-around before any Qt call)
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        print(f"{SVG}: not a valid SVG", file=sys.stderr)
        return 1
    for size in SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        if not image.save(str(png_path(size))):
            print(f"{png_path(size)}: could not write", file=sys.stderr)
            return 1
        print(f"wrote {png_path(size).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
