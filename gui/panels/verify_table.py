"""The table of the Verify dock: one row per ncnn layer of a verification
(:class:`LayerTableModel`), sortable by every column through :class:`LayerFilterProxy`, which
can also keep only the layers that are not ``ok``; and :func:`describe_layer`, the one-line
text of a layer shared by the table's tooltips and the plot's hover readout."""
from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor, QFont, QIcon, QPixmap

from engine.verify import LayerRecord
from engine.verify.result import DIVERGENT, FAILED, INHERITED, NOT_COMPARED

from ..verify_model import layer_value
from ..verify_scale import ErrorScale, format_error
from .tables import RowTableModel, filter_change

#: sort keys are read with this role (numbers for numeric columns)
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
STATUS_TEXT = {"ok": "ok", DIVERGENT: "divergent", INHERITED: "inherited", FAILED: "failed",
               NOT_COMPARED: "not compared"}
STATUS_COLOURS = {DIVERGENT: "#d62828", FAILED: "#d62828", INHERITED: "#b35c00"}


def short_source(source: str) -> str:
    """``/long/path/model.py:93`` → ``model.py:93``."""
    return os.path.basename(source) if source else ""


def describe_layer(rec: LayerRecord) -> str:
    """``#9 conv2d_3 · Convolution · divergent · max rel 0.53 (alone 0.51) · max abs 2.1 · cos 0.93``."""
    parts = [f"#{rec.index} {rec.layer}", rec.type, STATUS_TEXT.get(rec.status, rec.status)]
    if rec.error is not None:
        own = f" (alone {format_error(rec.own.max_rel)})" if rec.own is not None else ""
        parts += [f"max rel {format_error(rec.max_rel)}{own}", f"max abs {format_error(rec.max_abs)}",
                  f"cos {rec.cosine:.6f}"]
    if rec.module:
        parts.append(rec.module)
    return " · ".join(parts)


class LayerTableModel(RowTableModel):
    COLUMNS = ("#", "Layer", "Type", "Status", "Max rel", "Alone", "Max abs", "Cosine", "ATen nodes", "Module",
               "Source")
    TOOLTIPS = ("position in the ncnn graph (topological order)", "ncnn layer", "ncnn layer type",
                "ok · divergent (wrong by itself) · inherited (wrong inputs) · failed · not compared",
                "max relative error in the whole-model run", "max relative error of the layer run alone on "
                "PyTorch's inputs", "max absolute error in the whole-model run", "cosine similarity with PyTorch",
                "the ATen nodes the layer came from", "module path", "source line")
    NUMERIC = {0, 4, 5, 6, 7}

    def __init__(self, parent=None):
        super().__init__(parent)
        self.scale: ErrorScale | None = None
        self.measure = "error"
        self.first: LayerRecord | None = None
        self._icons: dict[str, QIcon] = {}

    @property
    def records(self) -> list[LayerRecord]:
        return self.rows

    def set_records(self, records: list[LayerRecord], scale: ErrorScale | None, first: LayerRecord | None) -> None:
        self.scale, self.first, self._icons = scale, first, {}
        self.set_rows(records)

    def set_measure(self, measure: str) -> None:
        self.measure, self._icons = measure, {}
        if self.rows:
            self.dataChanged.emit(self.index(0, 3), self.index(len(self.rows) - 1, 3))

    def row_of(self, layer: str) -> int:
        return next((i for i, r in enumerate(self.rows) if r.layer == layer), -1)

    def _cell(self, r: LayerRecord, c: int) -> tuple[str, Any]:
        """(display text, sort key) of a cell."""
        if c == 0:
            return str(r.index), r.index
        if c == 1:
            return r.layer, r.layer
        if c == 2:
            return r.type, r.type
        if c == 3:
            return STATUS_TEXT.get(r.status, r.status), r.status
        if c in (4, 5, 6):
            stats = r.own if c == 5 else r.error
            v = None if stats is None else (stats.max_abs if c == 6 else stats.max_rel)
            return format_error(v), -1.0 if v is None else v
        if c == 7:
            return ("—", 2.0) if r.cosine is None else (f"{r.cosine:.6f}", r.cosine)
        if c == 8:
            text = ", ".join(r.aten_nodes)
            return text, text
        if c == 9:
            return r.module, r.module
        return short_source(r.source), r.source

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r, c = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cell(r, c)[0]
        if role == SORT_ROLE:
            return self._cell(r, c)[1]
        if role == Qt.ItemDataRole.DecorationRole and c == 3:
            return self._swatch(r)
        if role == Qt.ItemDataRole.ForegroundRole and c in (1, 3) and r.status in STATUS_COLOURS:
            return QColor(STATUS_COLOURS[r.status])
        if role == Qt.ItemDataRole.FontRole and r is self.first:
            f = QFont()
            f.setBold(True)
            return f
        if role == Qt.ItemDataRole.ToolTipRole:
            tip = describe_layer(r)
            if r.source:
                tip += f"\n{r.source}"
            if r.note:
                tip += f"\n{r.note}"
            return tip
        if role == Qt.ItemDataRole.TextAlignmentRole and c in self.NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _swatch(self, r: LayerRecord) -> QIcon | None:
        if self.scale is None:
            return None
        v = layer_value(r, self.measure)
        key = "none" if v is None else self.scale.strong(v).name()
        if key not in self._icons:
            pm = QPixmap(10, 10)
            pm.fill(QColor("#9aa0a6") if v is None else self.scale.strong(v))
            self._icons[key] = QIcon(pm)
        return self._icons[key]


class LayerFilterProxy(QSortFilterProxyModel):
    """Sorts by :data:`SORT_ROLE`; with ``problems_only`` keeps the layers that are not ok."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.problems_only = False
        self.setSortRole(SORT_ROLE)

    def set_problems_only(self, on: bool) -> None:
        with filter_change(self):
            self.problems_only = on

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex) -> bool:
        if not self.problems_only:
            return True
        r = self.sourceModel().records[source_row]
        return r.status not in ("ok", NOT_COMPARED)
