"""Tensors panel: every stored tensor and user input / output of the program in a sortable,
filterable table (Qt model/view: :class:`TensorTableModel` + :class:`TensorFilterProxy`).

Selecting a row emits :attr:`TensorsPanel.tensorSelected` with the row (the window opens it
in the weight viewer).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QVBoxLayout, QWidget

from .tables import RowTableModel, filter_change, hrow, row_table, set_widths

KINDS = ("input", "parameter", "buffer", "constant", "custom_obj", "output")


def human_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return str(n)  # pragma: no cover


@dataclass
class TensorRow:
    kind: str  #: one of KINDS
    name: str  #: FQN for stored tensors, the graph name for inputs / outputs
    graph_name: str
    dtype: str
    shape: tuple
    numel: int | None  #: None when a dim is symbolic
    nbytes: int
    persistent: bool | None
    readable: bool
    reason: str = ""

    @property
    def shape_text(self) -> str:
        return "[" + ", ".join(str(s) for s in self.shape) + "]"

    @property
    def stored(self) -> bool:
        return self.kind in ("parameter", "buffer", "constant") and self.readable


def _numel(shape: tuple) -> int | None:
    if not all(isinstance(s, int) for s in shape):
        return None
    return math.prod(shape)


def tensor_rows(program: Any) -> list[TensorRow]:
    """Rows of a program: user inputs, stored tensors, user outputs."""
    rows: list[TensorRow] = []
    sig = program.signature
    for i in sig.user_inputs:
        meta = i.meta
        shape = tuple(meta.sizes) if meta is not None else ()
        dtype = meta.dtype.torch_name if meta is not None else type(i.value).__name__
        n = _numel(shape) if meta is not None else None
        rows.append(TensorRow("input", i.name, i.name, dtype, shape, n, 0, None, True))
    for e in program.tensors.entries():
        shape = tuple(e.shape)
        dtype = e.dtype.torch_name if e.dtype is not None else "object"
        rows.append(TensorRow(e.kind, e.fqn, e.graph_name or "", dtype, shape, _numel(shape), e.nbytes,
                              e.persistent, e.readable, e.reason or ""))
    for o in sig.user_outputs:
        meta = o.meta
        shape = tuple(meta.sizes) if meta is not None else ()
        dtype = meta.dtype.torch_name if meta is not None else ""
        rows.append(TensorRow("output", o.name, o.name, dtype, shape, _numel(shape) if meta else None, 0, None, True))
    return rows


class TensorTableModel(RowTableModel):
    COLUMNS = ("Kind", "Name", "dtype", "Shape", "Elements", "Bytes", "Persistent", "Graph name")
    SORT_ROLE = Qt.ItemDataRole.UserRole + 1

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        c = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return (r.kind, r.name, r.dtype, r.shape_text,
                    "?" if r.numel is None else f"{r.numel:,}",
                    human_bytes(r.nbytes) if r.nbytes else "—",
                    "" if r.persistent is None else ("yes" if r.persistent else "no"),
                    r.graph_name)[c]
        if role == self.SORT_ROLE:
            return (KINDS.index(r.kind) if r.kind in KINDS else 99, r.name.lower(), r.dtype, len(r.shape),
                    -1 if r.numel is None else r.numel, r.nbytes,
                    -1 if r.persistent is None else int(r.persistent), r.graph_name)[c]
        if role == Qt.ItemDataRole.TextAlignmentRole and c in (4, 5):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            return r.reason or f"{r.name}: {r.dtype} {r.shape_text}"
        if role == Qt.ItemDataRole.ForegroundRole and not r.readable:
            from PySide6.QtGui import QColor

            return QColor("#c62828")
        return None


class TensorFilterProxy(QSortFilterProxyModel):
    """Filters by kind and by a case-insensitive text over name, graph name, dtype and shape."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.kind = ""
        self.text = ""
        self.setSortRole(TensorTableModel.SORT_ROLE)

    def set_kind(self, kind: str) -> None:
        with filter_change(self):
            self.kind = kind

    def set_text(self, text: str) -> None:
        with filter_change(self):
            self.text = text.strip().lower()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex) -> bool:
        r = self.sourceModel().row(source_row)
        if self.kind and r.kind != self.kind:
            return False
        if self.text:
            hay = f"{r.name} {r.graph_name} {r.dtype} {r.shape_text}".lower()
            return all(part in hay for part in self.text.split())
        return True


class TensorsPanel(QWidget):
    tensorSelected = Signal(object)  #: TensorRow

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._program: Any | None = None
        self._listed = True  #: the rows of ``_program`` are in the model
        self.model = TensorTableModel(self)
        self.proxy = TensorFilterProxy(self)
        self.proxy.setSourceModel(self.model)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter by name, dtype or shape…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.set_text)
        self.kind = QComboBox()
        self.kind.addItem("All kinds", "")
        for k in KINDS:
            self.kind.addItem(k.replace("_", " "), k)
        self.kind.currentIndexChanged.connect(lambda _i: self.proxy.set_kind(self.kind.currentData()))
        self.summary = QLabel("")
        self.summary.setObjectName("tensorSummary")
        self.table = row_table("tensorTable", self.proxy, stretch=1)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.table.selectionModel().currentRowChanged.connect(self._on_current)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(hrow(self.filter, self.kind, self.summary, stretch=0))
        lay.addWidget(self.table, 1)

    def set_program(self, program: Any | None) -> None:
        """Show ``program``'s tensors — listed once the panel is on screen (:meth:`ensure_listed`:
        its tab brought to the front, or a tensor selected); a model of 17k tensors takes a third
        of a second to list, which opening it should not wait for."""
        self._program, self._listed = program, False
        self.filter.clear()  # another model: the old filter would hide its rows
        self.kind.setCurrentIndex(0)
        self.model.set_rows([])
        self.summary.setText("")
        if self.isVisible() and not self.visibleRegion().isEmpty():  # a tab behind another: not seen
            self.ensure_listed()

    def showEvent(self, event) -> None:
        self.ensure_listed()
        super().showEvent(event)

    def ensure_listed(self) -> None:
        """List the tensors of the program set last, unless they are listed already."""
        if self._listed:
            return
        self._listed = True
        program = self._program
        rows = tensor_rows(program) if program is not None else []
        self.model.set_rows(rows)
        total = sum(r.nbytes for r in rows if r.kind in ("parameter", "buffer", "constant"))
        n_params = sum(r.numel or 0 for r in rows if r.kind == "parameter")
        self.summary.setText(f"{n_params:,} parameters · {human_bytes(total)}" if rows else "")
        set_widths(self.table, {0: 80, 2: 70, 3: 120, 4: 90, 5: 80, 6: 70})

    def select_name(self, name: str) -> bool:
        """Select the row of a tensor by FQN or graph name."""
        self.ensure_listed()
        for i, r in enumerate(self.model.rows):
            if name in (r.name, r.graph_name):
                src = self.model.index(i, 0)
                idx = self.proxy.mapFromSource(src)
                if not idx.isValid():  # filtered out: clear the filters
                    self.filter.clear()
                    self.kind.setCurrentIndex(0)
                    idx = self.proxy.mapFromSource(src)
                self.table.setCurrentIndex(idx)
                self.table.scrollTo(idx)
                return True
        return False

    def visible_names(self) -> list[str]:
        self.ensure_listed()
        return [self.proxy.index(i, 1).data() for i in range(self.proxy.rowCount())]

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.tensorSelected.emit(self.model.row(self.proxy.mapToSource(current).row()))
