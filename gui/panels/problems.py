"""Problems panel: every diagnostic of the conversion (node, op, reason, module, source,
stage) in a table (:class:`ProblemsModel`). Clicking or activating a row emits
:attr:`ProblemsPanel.problemActivated` with the diagnostic; the window focuses the node.
"""
from __future__ import annotations

import os
from typing import Sequence

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHeaderView, QLabel, QStyle, QVBoxLayout, QWidget

from engine.diagnostics import Diagnostic

from .tables import RowTableModel, row_table


def _short_source(source: str) -> str:
    """``/long/path/model.py:93`` → ``model.py:93`` (the tooltip keeps the whole path)."""
    return os.path.basename(source) if source else ""


#: widest the node, op, module, source and stage columns get (pixels)
COLUMN_CAPS = {1: 220, 2: 240, 4: 200, 5: 180, 6: 190}


class ProblemsModel(RowTableModel):
    COLUMNS = ("", "Node", "Op", "Reason", "Module", "Source", "Stage")

    def __init__(self, parent=None):
        super().__init__(parent)
        self._icons = {}

    @property
    def items(self) -> list[Diagnostic]:
        return self.rows

    def set_items(self, items: Sequence[Diagnostic]) -> None:
        # errors first, then warnings; stable within each
        self.set_rows(sorted(items, key=lambda d: 0 if d.severity == "error" else 1))

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        d = self.rows[index.row()]
        c = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return ("", d.node, d.op, d.reason, d.module, _short_source(d.source), d.stage)[c]
        if role == Qt.ItemDataRole.DecorationRole and c == 0:
            return self._icon(d.severity)
        if role == Qt.ItemDataRole.ToolTipRole:
            return str(d)
        if role == Qt.ItemDataRole.ForegroundRole and c == 3 and d.severity == "error":
            return QColor("#d62828")
        return None

    def _icon(self, severity: str):
        if severity not in self._icons:
            from PySide6.QtWidgets import QApplication

            sp = (QStyle.StandardPixmap.SP_MessageBoxCritical if severity == "error"
                  else QStyle.StandardPixmap.SP_MessageBoxWarning)
            self._icons[severity] = QApplication.style().standardIcon(sp)
        return self._icons[severity]


class ProblemsPanel(QWidget):
    problemActivated = Signal(object)  #: Diagnostic

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = ProblemsModel(self)
        self.summary = QLabel("Not converted yet.")
        self.summary.setObjectName("problemsSummary")
        self.table = row_table("problemsTable", self.model, stretch=3)
        self.table.setWordWrap(True)  # a long reason wraps in its row instead of being cut
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.clicked.connect(self._activate)
        self.table.activated.connect(self._activate)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addWidget(self.table, 1)

    def set_diagnostics(self, items: Sequence[Diagnostic] | None, *, converted: bool = True) -> None:
        items = list(items or [])
        self.model.set_items(items)
        errors = sum(1 for d in items if d.severity == "error")
        warnings = len(items) - errors
        if not converted:
            self.summary.setText("Not converted yet.")
        elif not items:
            self.summary.setText("No problems: every operator converted.")
        else:
            self.summary.setText(f"<b>{errors}</b> error{'s' if errors != 1 else ''}, "
                                 f"{warnings} warning{'s' if warnings != 1 else ''} — "
                                 "click one to find it in the graphs")
        self._fit_columns()

    def _fit_columns(self) -> None:
        """Every column but the reason as wide as its longest cell (within a cap; the tooltip
        has the rest); the reason takes what is left and wraps."""
        t = self.table
        t.setColumnWidth(0, 24)
        for c, cap in COLUMN_CAPS.items():
            t.resizeColumnToContents(c)
            t.setColumnWidth(c, max(min(t.columnWidth(c), cap), 60))
        t.resizeRowsToContents()

    def _activate(self, index: QModelIndex) -> None:
        if index.isValid():
            self.problemActivated.emit(self.model.items[index.row()])
