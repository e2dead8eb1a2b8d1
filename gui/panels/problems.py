"""Problems panel: every diagnostic of the conversion (node, op, reason, module, source,
stage) in a table (:class:`ProblemsModel`). Clicking or activating a row emits
:attr:`ProblemsPanel.problemActivated` with the diagnostic; the window focuses the node.
"Write a converter…" (button, and the rows' context menu) on the row of an ATen node emits
:attr:`ProblemsPanel.writeConverterRequested` with its diagnostic.
"""
from __future__ import annotations

import os
from typing import Sequence

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QAction, QColor
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QStyle, QToolButton, QVBoxLayout, QWidget

from engine.diagnostics import Diagnostic

from .tables import RowTableModel, row_table


def convertible(d: Diagnostic | None) -> bool:
    """Whether a converter plug-in can be written for the node of ``d`` (an ATen overload)."""
    return d is not None and bool(d.node) and d.op.startswith("aten.") and d.op.count(".") == 2


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
    writeConverterRequested = Signal(object)  #: Diagnostic

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
        self.write_action = QAction("Write a converter…", self)
        self.write_action.setObjectName("writeConverterAction")
        self.write_action.setIconText(self.write_action.text())  # Qt drops the "…" from a derived icon text
        self.write_action.setToolTip("Write a converter plug-in for the selected node's operator, open it in the "
                                     "editor; saving it converts the model again")
        self.write_action.triggered.connect(self._write)
        self.write_action.setEnabled(False)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.table.addAction(self.write_action)
        self.table.selectionModel().currentRowChanged.connect(lambda *_: self._update_action())
        self.write_button = QToolButton()
        self.write_button.setObjectName("writeConverterButton")
        self.write_button.setDefaultAction(self.write_action)
        head = QHBoxLayout()
        head.addWidget(self.summary, 1)
        head.addWidget(self.write_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(head)
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
        self._update_action()

    def current(self) -> Diagnostic | None:
        row = self.table.currentIndex().row()
        return self.model.items[row] if 0 <= row < len(self.model.items) else None

    def _update_action(self) -> None:
        self.write_action.setEnabled(convertible(self.current()))

    def _write(self) -> None:
        d = self.current()
        if convertible(d):
            self.writeConverterRequested.emit(d)

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
