"""Shared pieces of the panels' tables: a row-list table model base, a configured row table
view, the proxy filter-change helper, and a toolbar-row helper."""
from __future__ import annotations

import contextlib
from typing import Any, Sequence

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QHeaderView, QTableView, QWidget


class RowTableModel(QAbstractTableModel):
    """A table over a Python list (``self.rows``); subclasses set ``COLUMNS`` and ``data``."""

    COLUMNS: Sequence[str] = ()
    TOOLTIPS: Sequence[str] = ()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[Any] = []

    def set_rows(self, rows: Sequence[Any]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section]
        if role == Qt.ItemDataRole.ToolTipRole and section < len(self.TOOLTIPS):
            return self.TOOLTIPS[section]
        return None

    def row(self, i: int) -> Any:
        return self.rows[i]


def row_table(name: str, model, *, stretch: int, row_height: int = 22, grid: bool = True) -> QTableView:
    """A read-only table selecting single whole rows, with one stretching column."""
    t = QTableView()
    t.setObjectName(name)
    t.setModel(model)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.setAlternatingRowColors(True)
    t.setShowGrid(grid)
    t.setWordWrap(False)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(row_height)
    hh = t.horizontalHeader()
    hh.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    hh.setHighlightSections(False)
    return t


def set_widths(table: QTableView, widths: dict[int, int]) -> None:
    for c, w in widths.items():
        table.setColumnWidth(c, w)


def hrow(*widgets: QWidget, stretch: int = 0) -> QHBoxLayout:
    """A margin-less row of widgets; ``stretch`` is the index of the one that grows."""
    row = QHBoxLayout()
    row.setContentsMargins(0, 0, 0, 0)
    for k, w in enumerate(widgets):
        row.addWidget(w, 1 if k == stretch else 0)
    return row


@contextlib.contextmanager
def filter_change(proxy: QSortFilterProxyModel):
    """Change a proxy's filter parameters (Qt ≥ 6.9 wants begin/endFilterChange)."""
    if hasattr(proxy, "beginFilterChange"):
        proxy.beginFilterChange()
        try:
            yield
        finally:
            proxy.endFilterChange()
    else:  # pragma: no cover - older Qt
        yield
        proxy.invalidateFilter()
