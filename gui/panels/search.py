"""Search panel (Ctrl+F): find nodes by name, op type or module path in both graph views.

:func:`search` matches every whitespace-separated term (case-insensitive) against a node's
name, type, label and module path; ``type:``, ``name:`` and ``module:`` prefixes restrict a
term to one field. Results are listed (:class:`SearchResultsModel`) with the view they belong
to; Enter / F3 / the arrows go to the next and previous result, and the window focuses it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from PySide6.QtCore import QAbstractListModel, QModelIndex, Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QLineEdit, QListView, QToolButton, QVBoxLayout, QWidget

from ..graph.model import DisplayGraph
from .tables import hrow

VIEW_LABELS = {"aten": "ATen", "pnnx": "pnnx", "ncnn": "ncnn", "snapshot": "pass"}


@dataclass(frozen=True)
class SearchHit:
    view: str  #: "aten" or the right view's key
    name: str
    type: str
    module: str


def _fields(node) -> dict[str, str]:
    return {"name": node.name.lower(), "type": f"{node.type} {node.label}".lower(), "module": node.module.lower()}


def search(query: str, graphs: Iterable[tuple[str, DisplayGraph]], limit: int = 5000) -> list[SearchHit]:
    terms = [t for t in query.lower().split() if t]
    if not terms:
        return []
    parsed = []
    for t in terms:
        field, sep, value = t.partition(":")
        parsed.append((field, value) if sep and field in ("name", "type", "module") and value else (None, t))
    hits: list[SearchHit] = []
    for view, g in graphs:
        for n in g.nodes:
            f = _fields(n)
            every = " ".join(f.values())
            if all((value in f[field]) if field else (value in every) for field, value in parsed):
                hits.append(SearchHit(view, n.name, n.type, n.module))
                if len(hits) >= limit:
                    return hits
    return hits


class SearchResultsModel(QAbstractListModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.hits: list[SearchHit] = []

    def set_hits(self, hits: list[SearchHit]) -> None:
        self.beginResetModel()
        self.hits = hits
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.hits)

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        h = self.hits[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            mod = f"  ·  {h.module}" if h.module else ""
            return f"[{VIEW_LABELS.get(h.view, h.view)}] {h.name}  —  {h.type}{mod}"
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{h.name}\n{h.type}\n{h.module or '(root module)'}"
        return None


class SearchPanel(QWidget):
    hitActivated = Signal(object)  #: SearchHit
    queryChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.graphs: list[tuple[str, DisplayGraph]] = []
        self.model = SearchResultsModel(self)
        self.edit = QLineEdit()
        self.edit.setObjectName("searchEdit")
        self.edit.setPlaceholderText("Name, op type or module path (type:conv module:layer1)")
        self.edit.setClearButtonEnabled(True)
        self.edit.returnPressed.connect(self.next)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(150)
        self._timer.timeout.connect(self.run)
        self.edit.textChanged.connect(lambda _t: self._timer.start())
        self.prev_btn = QToolButton()
        self.prev_btn.setText("▲")
        self.prev_btn.setToolTip("Previous result (Shift+F3)")
        self.prev_btn.clicked.connect(self.previous)
        self.next_btn = QToolButton()
        self.next_btn.setText("▼")
        self.next_btn.setToolTip("Next result (F3, Enter)")
        self.next_btn.clicked.connect(self.next)
        self.count = QLabel("")
        self.count.setObjectName("searchCount")
        self.list = QListView()
        self.list.setObjectName("searchResults")
        self.list.setModel(self.model)
        self.list.setUniformItemSizes(True)
        self.list.selectionModel().currentRowChanged.connect(self._on_current)
        self.list.activated.connect(lambda idx: self._emit(idx.row()))
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(hrow(self.edit, self.prev_btn, self.next_btn, stretch=0))
        lay.addWidget(self.count)
        lay.addWidget(self.list, 1)
        self.current = -1

    def set_graphs(self, graphs: list[tuple[str, DisplayGraph]]) -> None:
        self.graphs = graphs
        if self.edit.text().strip():
            self.run()

    def focus_edit(self) -> None:
        self.edit.setFocus()
        self.edit.selectAll()

    def run(self) -> list[SearchHit]:
        self._timer.stop()
        hits = search(self.edit.text(), self.graphs)
        self.model.set_hits(hits)
        self.current = -1
        self._update_count()
        self.queryChanged.emit(self.edit.text())
        return hits

    @property
    def hits(self) -> list[SearchHit]:
        return self.model.hits

    def next(self) -> None:
        self._step(+1)

    def previous(self) -> None:
        self._step(-1)

    def _step(self, d: int) -> None:
        if self._timer.isActive():
            self.run()
        n = len(self.model.hits)
        if not n:
            return
        self.current = (self.current + d) % n if self.current >= 0 else (0 if d > 0 else n - 1)
        self.list.setCurrentIndex(self.model.index(self.current))

    def _on_current(self, current: QModelIndex, _prev: QModelIndex) -> None:
        if current.isValid():
            self.current = current.row()
            self._emit(current.row())

    def _emit(self, row: int) -> None:
        self._update_count()
        if 0 <= row < len(self.model.hits):
            self.hitActivated.emit(self.model.hits[row])

    def _update_count(self) -> None:
        n = len(self.model.hits)
        if not self.edit.text().strip():
            self.count.setText("")
        elif not n:
            self.count.setText("No results")
        elif self.current >= 0:
            self.count.setText(f"{self.current + 1} of {n:,}")
        else:
            self.count.setText(f"{n:,} result{'s' if n != 1 else ''}")
