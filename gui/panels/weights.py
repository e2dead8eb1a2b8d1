"""Weight viewer: statistics, a pyqtgraph histogram and an image of a tensor's values.

:func:`load_weight` (worker thread) reads a stored tensor through the engine, decodes raw-bit
dtypes (bf16, fp8) to float32 and computes statistics (min / max / mean / std, NaN / Inf / zero
counts) and a histogram of the finite values. :class:`WeightViewer` shows them: 1-D tensors
as a strip, 2-D as a matrix, higher ranks as a 2-D slice chosen with spin boxes, and 4-D conv
kernels also as a grid of kernels (out-channels × in-channels). Hovering the image shows the
value under the cursor.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QComboBox, QGridLayout, QHBoxLayout, QLabel, QSpinBox, QSplitter, QVBoxLayout,
                               QWidget)

log = logging.getLogger(__name__)

pg.setConfigOptions(imageAxisOrder="row-major", antialias=True)

HIST_BINS = 80
MAX_GRID_TILES = 64  #: kernels shown per side of the kernel grid


@dataclass
class WeightData:
    name: str
    dtype: str
    shape: tuple[int, ...]
    values: np.ndarray  #: float32 (complex: magnitude)
    stats: dict[str, Any] = field(default_factory=dict)
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0))
    edges: np.ndarray = field(default_factory=lambda: np.zeros(0))


def compute_stats(values: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """Statistics and histogram (counts, edges) of a float array."""
    flat = values.reshape(-1)
    n = flat.size
    nan = int(np.isnan(flat).sum())
    inf = int(np.isinf(flat).sum())
    finite = flat[np.isfinite(flat)] if (nan or inf) else flat
    stats: dict[str, Any] = {"elements": n, "nan": nan, "inf": inf}
    if finite.size:
        f64 = finite.astype(np.float64)
        stats.update(min=float(f64.min()), max=float(f64.max()), mean=float(f64.mean()), std=float(f64.std()),
                     abs_mean=float(np.abs(f64).mean()), zeros=int((finite == 0).sum()))
        lo, hi = stats["min"], stats["max"]
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        counts, edges = np.histogram(finite, bins=HIST_BINS, range=(lo, hi))
    else:
        counts, edges = np.zeros(0), np.zeros(0)
    return stats, counts, edges


def load_weight(ctx, program: Any, name: str) -> WeightData:
    """Read and analyse one stored tensor (worker thread)."""
    from engine.reader.tensors import to_float32

    ctx.progress(0, 2, f"reading {name}")
    raw = program.tensor(name)
    st = program.tensor_dtype(name)
    values = to_float32(raw, st)
    if np.iscomplexobj(values):
        values = np.abs(values)
    values = np.ascontiguousarray(values, dtype=np.float32)
    ctx.check()
    ctx.progress(1, 2, "statistics")
    stats, counts, edges = compute_stats(values)
    return WeightData(name, st.torch_name, tuple(values.shape), values, stats, counts, edges)


def kernel_grid(values: np.ndarray, limit: int = MAX_GRID_TILES) -> np.ndarray:
    """A 4-D [out, in, kh, kw] tensor as one image: a tile per (out, in), NaN gaps between."""
    o, i, kh, kw = values.shape
    o, i = min(o, limit), min(i, limit)
    img = np.full((o * (kh + 1) - 1, i * (kw + 1) - 1), np.nan, dtype=np.float32)
    for a in range(o):
        for b in range(i):
            img[a * (kh + 1): a * (kh + 1) + kh, b * (kw + 1): b * (kw + 1) + kw] = values[a, b]
    return img


def _fmt(x: float) -> str:
    if x == 0 or math.isnan(x):
        return str(x)
    return f"{x:.4g}" if 1e-3 <= abs(x) < 1e5 else f"{x:.3e}"


class WeightViewer(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.data: WeightData | None = None
        self.image: np.ndarray | None = None
        self.title = QLabel("No tensor selected")
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stats_labels: dict[str, QLabel] = {}
        grid = QGridLayout()
        grid.setHorizontalSpacing(14)
        grid.setVerticalSpacing(2)
        keys = (("min", "min"), ("max", "max"), ("mean", "mean"), ("std", "std"), ("abs_mean", "mean |x|"),
                ("zeros", "zeros"), ("nan", "NaN"), ("inf", "Inf"), ("elements", "elements"))
        for k, (key, label) in enumerate(keys):
            name = QLabel(label)
            name.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            value = QLabel("—")
            value.setObjectName(f"stat_{key}")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.stats_labels[key] = value
            grid.addWidget(name, k // 3, (k % 3) * 2)
            grid.addWidget(value, k // 3, (k % 3) * 2 + 1)

        self.hist = pg.PlotWidget()
        self.hist.setObjectName("histogram")
        self.hist.setMenuEnabled(False)
        self.hist.setMouseEnabled(x=True, y=False)
        self.hist.setLabel("left", "count")
        self.hist.showGrid(x=True, y=True, alpha=0.2)
        self.hist_item = pg.PlotDataItem(stepMode="center", fillLevel=0)
        self.hist.addItem(self.hist_item)

        self.mode = QComboBox()
        self.mode.addItem("Slice", "slice")
        self.mode.addItem("Kernel grid", "grid")
        self.mode.currentIndexChanged.connect(lambda _i: self._update_image())
        self.slice_boxes: list[QSpinBox] = []
        self.slice_row = QHBoxLayout()
        self.slice_row.setContentsMargins(0, 0, 0, 0)
        self.slice_row.addWidget(self.mode)
        self.slice_holder = QHBoxLayout()
        self.slice_row.addLayout(self.slice_holder)
        self.slice_row.addStretch(1)
        self.hover = QLabel("")
        self.slice_row.addWidget(self.hover)

        self.plot = pg.PlotWidget()
        self.plot.setObjectName("weightImage")
        self.plot.setMenuEnabled(False)
        self.plot.setAspectLocked(True)
        self.plot.invertY(True)
        self.plot.hideAxis("bottom")
        self.plot.hideAxis("left")
        self.image_item = pg.ImageItem()
        self.plot.addItem(self.image_item)
        self.colorbar = pg.ColorBarItem(interactive=False, width=12)
        self.colorbar.setImageItem(self.image_item, insert_in=self.plot.getPlotItem())
        self.plot.scene().sigMouseMoved.connect(self._on_mouse)

        image_box = QWidget()
        il = QVBoxLayout(image_box)
        il.setContentsMargins(0, 0, 0, 0)
        il.addLayout(self.slice_row)
        il.addWidget(self.plot, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.hist)
        split.addWidget(image_box)
        split.setSizes([1, 1])
        self.content = QWidget()  #: statistics, histogram and image: hidden while nothing is shown
        cl = QVBoxLayout(self.content)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addLayout(grid)
        cl.addWidget(split, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.addWidget(self.title)
        lay.addWidget(self.content, 1)
        self.title.setWordWrap(True)
        self.content.setVisible(False)
        self.apply_palette()

    # ---------------------------------------------------------------- theme
    def apply_palette(self) -> None:
        from PySide6.QtWidgets import QApplication

        pal = QApplication.palette()
        bg = pal.color(QPalette.ColorRole.Base)
        fg = pal.color(QPalette.ColorRole.Text)
        for w in (self.hist, self.plot):
            w.setBackground(bg)
            for ax in ("left", "bottom"):
                axis = w.getAxis(ax)
                axis.setPen(fg)
                axis.setTextPen(fg)
        accent = pal.color(QPalette.ColorRole.Highlight)
        fill = pg.mkColor(accent)
        fill.setAlpha(110)
        self.hist_item.setPen(pg.mkPen(accent, width=1.2))
        self.hist_item.setBrush(fill)

    # ---------------------------------------------------------------- content
    def clear(self, message: str = "No tensor selected") -> None:
        self.data = None
        self.image = None
        self.title.setText(message)
        for v in self.stats_labels.values():
            v.setText("—")
        self.hist_item.setData([], [])
        self.image_item.clear()
        self._set_slices(())
        self.content.setVisible(False)  # no old axes under "No tensor selected"

    def show_loading(self, name: str) -> None:
        self.title.setText(f"{name} — loading…")

    def show_data(self, data: WeightData) -> None:
        self.data = data
        self.content.setVisible(True)
        s = data.stats
        self.title.setText(f"{data.name} — {data.dtype} [{', '.join(str(d) for d in data.shape)}]")
        for key, label in self.stats_labels.items():
            v = s.get(key)
            if v is None:
                label.setText("—")
            elif key == "zeros":
                label.setText(f"{v:,} ({100.0 * v / max(s['elements'], 1):.1f}%)")
            elif isinstance(v, int):
                label.setText(f"{v:,}")
            else:
                label.setText(_fmt(v))
            bad = key in ("nan", "inf") and v
            label.setStyleSheet("color:#d62828; font-weight:bold;" if bad else "")
        if len(data.counts):
            self.hist_item.setData(data.edges, data.counts)
            self.hist.enableAutoRange()
        else:
            self.hist_item.setData([], [])
        self.mode.setEnabled(len(data.shape) == 4)
        if len(data.shape) == 4:
            self.mode.setCurrentIndex(1)
        else:
            self.mode.setCurrentIndex(0)
        lead = data.shape[:-2] if len(data.shape) > 2 else ()
        self._set_slices(lead)
        self._update_image()

    def _set_slices(self, lead: tuple[int, ...]) -> None:
        for b in self.slice_boxes:
            b.deleteLater()
        self.slice_boxes = []
        for k, n in enumerate(lead):
            b = QSpinBox()
            b.setRange(0, max(n - 1, 0))
            b.setPrefix(f"[{k}] ")
            b.setToolTip(f"index along dimension {k} (size {n})")
            b.valueChanged.connect(lambda _v: self._update_image())
            self.slice_holder.addWidget(b)
            self.slice_boxes.append(b)

    def _update_image(self) -> None:
        d = self.data
        if d is None:
            return
        v = d.values
        grid = self.mode.currentData() == "grid" and v.ndim == 4
        for b in self.slice_boxes:
            b.setVisible(not grid)
        if v.ndim == 0:
            img = v.reshape(1, 1)
        elif v.ndim == 1:
            img = v.reshape(1, -1)
        elif v.ndim == 2:
            img = v
        elif grid:
            img = kernel_grid(v)
        else:
            idx = tuple(b.value() for b in self.slice_boxes)
            img = v[idx]
        self.image = np.asarray(img, dtype=np.float32)
        finite = self.image[np.isfinite(self.image)]
        if finite.size:
            lo, hi = float(finite.min()), float(finite.max())
        else:
            lo, hi = 0.0, 1.0
        if lo < 0 < hi:
            m = max(-lo, hi)
            levels, cmap = (-m, m), pg.colormap.get("CET-D1")
        else:
            levels, cmap = (lo, hi if hi > lo else lo + 1), pg.colormap.get("viridis")
        self.image_item.setImage(self.image, levels=levels)
        self.colorbar.setColorMap(cmap)
        self.colorbar.setLevels(levels)
        self.plot.autoRange()

    def _on_mouse(self, pos: QPointF) -> None:
        if self.image is None or self.data is None:
            return
        p = self.image_item.mapFromScene(pos)
        r, c = int(math.floor(p.y())), int(math.floor(p.x()))
        h, w = self.image.shape
        if 0 <= r < h and 0 <= c < w and np.isfinite(self.image[r, c]):
            where = f"({r}, {c})"
            if self.mode.currentData() == "grid" and self.data.values.ndim == 4:
                kh, kw = self.data.values.shape[2:]
                where = f"out {r // (kh + 1)}, in {c // (kw + 1)}, ({r % (kh + 1)}, {c % (kw + 1)})"
            self.hover.setText(f"{where} = {_fmt(float(self.image[r, c]))}")
        else:
            self.hover.setText("")
