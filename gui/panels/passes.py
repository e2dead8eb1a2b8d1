"""Passes panel: the conversion's ordered pass list and, for the selected pass, a side-by-side
diff of the graph before and after it.

:class:`PassTableModel` lists every :class:`engine.passes.PassRecord` (+added, −removed,
~changed, time, operator count); :class:`PassFilterProxy` hides passes that changed nothing.
Arrow keys step through the list (it is a normal table view). :class:`SideBySideDiff` aligns the
two snapshots line by line (``difflib``), colours removed / added / changed lines and, inside
changed lines, the characters that differ; "changes only" folds unchanged runs. The colours are
applied to the lines on screen (and a margin around them) as the view scrolls, so a pass that
changed ten thousand operators shows at once.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Sequence

from PySide6.QtCore import QEvent, QModelIndex, QPoint, QSortFilterProxyModel, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QPalette, QTextCharFormat, QTextCursor, QTextFormat
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QPlainTextEdit, QSplitter, QTextEdit, QVBoxLayout,
                               QWidget)

from .tables import RowTableModel, filter_change, row_table, set_widths

CONTEXT = 3


class PassTableModel(RowTableModel):
    COLUMNS = ("#", "Pass", "+", "−", "~", "Time", "Ops")
    TOOLTIPS = ("index", "pass", "operators added", "operators removed", "operators changed", "time",
                "operators after the pass, counted as the graph headers count them: without inputs, outputs "
                "and weights (hover a row for all its nodes)")

    def __init__(self, parent=None):
        super().__init__(parent)
        self.counts: list[Any] = []  #: per record: gui.document.NodeCounts (or empty)

    @property
    def records(self) -> list[Any]:
        return self.rows

    def set_records(self, records: Sequence[Any], counts: Sequence[Any] = ()) -> None:
        self.counts = list(counts) if len(counts) == len(records) else []
        self.set_rows(records)

    def _ops(self, row: int) -> int:
        return self.counts[row].ops if self.counts else self.rows[row].num_ops

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        c = index.column()
        counts = r.diff.counts()
        if role == Qt.ItemDataRole.DisplayRole:
            if c == 0:
                return str(r.index)
            if c == 1:
                return r.name
            if c in (2, 3, 4):
                v = counts[("added", "removed", "changed")[c - 2]]
                return str(v) if v else ""
            if c == 5:
                return "" if r.index == 0 else (f"{r.seconds * 1000:.1f} ms" if r.seconds < 1 else f"{r.seconds:.2f} s")
            if c == 6:
                return f"{self._ops(index.row()):,}"
        if role == Qt.ItemDataRole.ToolTipRole:
            if c == 6 and self.counts:
                return self.counts[index.row()].describe()
            return r.description or r.name
        if role == Qt.ItemDataRole.ForegroundRole:
            if c == 2 and counts["added"]:
                return QColor("#1a7f37")
            if c == 3 and counts["removed"]:
                return QColor("#cf222e")
            if c == 4 and counts["changed"]:
                return QColor("#9a6700")
            if c == 1 and r.diff.empty and r.index:
                return QColor("#8c959f")
        if role == Qt.ItemDataRole.TextAlignmentRole and c != 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class PassFilterProxy(QSortFilterProxyModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.hide_unchanged = False

    def set_hide_unchanged(self, on: bool) -> None:
        with filter_change(self):
            self.hide_unchanged = on

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex) -> bool:
        if not self.hide_unchanged:
            return True
        r = self.sourceModel().records[source_row]
        return r.index == 0 or not r.diff.empty


@dataclass
class AlignedDiff:
    """Two columns of lines, aligned; ``kinds[i]`` is ``equal``, ``removed``, ``added``,
    ``changed`` or ``fold`` (a folded run of unchanged lines)."""

    left: list[str]
    right: list[str]
    kinds: list[str]

    @property
    def counts(self) -> dict[str, int]:
        out = {"removed": 0, "added": 0, "changed": 0}
        for k in self.kinds:
            if k in out:
                out[k] += 1
        return out


def align(before: str, after: str, changes_only: bool = True, context: int = CONTEXT) -> AlignedDiff:
    a, b = before.splitlines(), after.splitlines()
    left: list[str] = []
    right: list[str] = []
    kinds: list[str] = []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    ops = sm.get_opcodes()
    for k, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal":
            n = i2 - i1
            if changes_only and n > 2 * context + 1:
                head = context if k > 0 else 0
                tail = context if k < len(ops) - 1 else 0
                for t in range(head):
                    left.append(a[i1 + t]), right.append(b[j1 + t]), kinds.append("equal")
                folded = n - head - tail
                if folded:
                    msg = f"⋯ {folded} unchanged line{'s' if folded != 1 else ''}"
                    left.append(msg), right.append(msg), kinds.append("fold")
                for t in range(n - tail, n):
                    left.append(a[i1 + t]), right.append(b[j1 + t]), kinds.append("equal")
            else:
                for t in range(n):
                    left.append(a[i1 + t]), right.append(b[j1 + t]), kinds.append("equal")
        elif tag == "replace":
            n = max(i2 - i1, j2 - j1)
            for t in range(n):
                la = a[i1 + t] if i1 + t < i2 else None
                rb = b[j1 + t] if j1 + t < j2 else None
                left.append(la or ""), right.append(rb or "")
                kinds.append("changed" if la is not None and rb is not None else ("removed" if rb is None else "added"))
        elif tag == "delete":
            for t in range(i1, i2):
                left.append(a[t]), right.append(""), kinds.append("removed")
        elif tag == "insert":
            for t in range(j1, j2):
                left.append(""), right.append(b[t]), kinds.append("added")
    return AlignedDiff(left, right, kinds)


class SideBySideDiff(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.left = self._editor("diffBefore")
        self.right = self._editor("diffAfter")
        self.left_title = QLabel("before")
        self.right_title = QLabel("after")
        self.aligned: AlignedDiff | None = None
        self._syncing = False
        self._colours: dict[str, QColor] = {}
        self._strong: dict[str, QColor] = {}
        self._window = (0, 0)  #: rows whose colours are applied
        self._intra: dict[tuple[int, str], list[tuple[int, int]]] = {}  #: (row, side) → spans
        self._recolour = QTimer(self)
        self._recolour.setSingleShot(True)
        self._recolour.setInterval(0)
        self._recolour.timeout.connect(self._apply_visible)
        self.left.verticalScrollBar().valueChanged.connect(lambda v: self._sync(self.right, v))
        self.right.verticalScrollBar().valueChanged.connect(lambda v: self._sync(self.left, v))
        for ed in (self.left, self.right):
            ed.verticalScrollBar().valueChanged.connect(lambda _v: self._recolour.start())
            ed.viewport().installEventFilter(self)
        self.left.horizontalScrollBar().valueChanged.connect(
            lambda v: self.right.horizontalScrollBar().setValue(v))
        self.right.horizontalScrollBar().valueChanged.connect(
            lambda v: self.left.horizontalScrollBar().setValue(v))
        cols = QSplitter(Qt.Orientation.Horizontal)
        for title, ed in ((self.left_title, self.left), (self.right_title, self.right)):
            box = QWidget()
            bl = QVBoxLayout(box)
            bl.setContentsMargins(0, 0, 0, 0)
            bl.setSpacing(2)
            bl.addWidget(title)
            bl.addWidget(ed, 1)
            cols.addWidget(box)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(cols)

    @staticmethod
    def _editor(name: str) -> QPlainTextEdit:
        ed = QPlainTextEdit()
        ed.setObjectName(name)
        ed.setReadOnly(True)
        ed.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        f = QFont("DejaVu Sans Mono")
        f.setStyleHint(QFont.StyleHint.Monospace)
        f.setPointSizeF(8.5)
        ed.setFont(f)
        return ed

    def _sync(self, other: QPlainTextEdit, value: int) -> None:
        if self._syncing:
            return
        self._syncing = True
        other.verticalScrollBar().setValue(value)
        self._syncing = False

    def clear(self) -> None:
        self.aligned = None
        self.left.clear()
        self.right.clear()
        self.left_title.setText("before")
        self.right_title.setText("after")

    def show_diff(self, before: str, after: str, *, before_title: str, after_title: str,
                  changes_only: bool = True) -> AlignedDiff:
        d = align(before, after, changes_only)
        self.aligned = d
        self.left_title.setText(before_title)
        self.right_title.setText(after_title)
        self._window, self._intra = (0, 0), {}
        for ed in (self.left, self.right):
            ed.setExtraSelections([])
        self.left.setPlainText("\n".join(d.left))
        self.right.setPlainText("\n".join(d.right))
        dark = self.palette().color(QPalette.ColorRole.Base).lightness() < 128
        self._colours = {
            "removed": QColor("#5a1e22" if dark else "#ffebe9"),
            "added": QColor("#1b4721" if dark else "#dafbe1"),
            "changed": QColor("#4d3b00" if dark else "#fff8c5"),
            "fold": QColor("#2a2f36" if dark else "#f0f3f6"),
        }
        self._strong = {"left": QColor("#8e1b24" if dark else "#ffc1bd"),
                        "right": QColor("#1f6f2f" if dark else "#aceebb")}
        # start at the first change
        first = next((i for i, k in enumerate(d.kinds) if k in ("removed", "added", "changed")), 0)
        for ed in (self.left, self.right):
            ed.setTextCursor(QTextCursor(ed.document().findBlockByNumber(first)))
            ed.centerCursor()
        self._apply_visible()
        return d

    #: rows coloured beyond the ones on screen, above and below
    MARGIN = 150

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Resize:
            self._recolour.start()
        return super().eventFilter(obj, event)

    def _rows_on_screen(self) -> tuple[int, int]:
        ed = self.left
        top = ed.cursorForPosition(QPoint(0, 0)).blockNumber()
        bottom = ed.cursorForPosition(QPoint(0, max(ed.viewport().height() - 1, 0))).blockNumber()
        return top, bottom + 1

    def _apply_visible(self) -> None:
        """Colour the rows on screen and a margin around them (when they are not coloured yet)."""
        d = self.aligned
        if d is None:
            return
        top, bottom = self._rows_on_screen()
        lo, hi = self._window
        if lo <= top and bottom <= hi and (lo, hi) != (0, 0):
            return
        lo, hi = max(0, top - self.MARGIN), min(len(d.kinds), bottom + self.MARGIN)
        self._window = (lo, hi)
        for side, ed in (("left", self.left), ("right", self.right)):
            sels = []
            doc = ed.document()
            for i in range(lo, hi):
                kind = d.kinds[i]
                if kind == "equal" or (kind == "added" and side == "left") or (kind == "removed" and side == "right"):
                    continue
                block = doc.findBlockByNumber(i)
                sel = QTextEdit.ExtraSelection()
                sel.format.setBackground(self._colours[kind])
                sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
                if kind == "fold":
                    sel.format.setForeground(self.palette().color(QPalette.ColorRole.PlaceholderText))
                sel.cursor = QTextCursor(block)
                sels.append(sel)
                if kind == "changed":
                    sels.extend(self._intraline(block, i, side))
            ed.setExtraSelections(sels)

    def _intraline(self, block, row: int, side: str) -> list:
        """Selections of the characters of a changed row that differ on ``side``."""
        key = (row, side)
        if key not in self._intra:
            self._intra[key] = _differing_spans(self.aligned.left[row], self.aligned.right[row], side)
        out = []
        for lo, hi in self._intra[key]:
            sel = QTextEdit.ExtraSelection()
            fmt = QTextCharFormat()
            fmt.setBackground(self._strong[side])
            sel.format = fmt
            cur = QTextCursor(block)
            cur.setPosition(block.position() + lo)
            cur.setPosition(block.position() + hi, QTextCursor.MoveMode.KeepAnchor)
            sel.cursor = cur
            out.append(sel)
        return out


def _differing_spans(a: str, b: str, side: str) -> list[tuple[int, int]]:
    """Character ranges of ``a`` (``side`` "left") or ``b`` that the other line does not have."""
    if len(a) > 2000 or len(b) > 2000:
        return []
    out = []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        lo, hi = (i1, i2) if side == "left" else (j1, j2)
        if hi > lo:
            out.append((lo, hi))
    return out


class PassesPanel(QWidget):
    passSelected = Signal(int)  #: record index (-1: none)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.records: list[Any] = []
        self.model = PassTableModel(self)
        self.proxy = PassFilterProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = row_table("passTable", self.proxy, stretch=6, row_height=21, grid=False)
        self.table.selectionModel().currentRowChanged.connect(self._on_current)
        self.hide_unchanged = QCheckBox("Hide passes that changed nothing")
        self.hide_unchanged.toggled.connect(self._on_hide)
        self.changes_only = QCheckBox("Changes only")
        self.changes_only.setChecked(True)
        self.changes_only.toggled.connect(lambda _on: self._show_current())
        self.description = QLabel("")
        self.description.setWordWrap(True)
        self.description.setObjectName("passDescription")
        self.diff = SideBySideDiff()
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.table, 1)
        ll.addWidget(self.hide_unchanged)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        head.addWidget(self.description, 1)
        head.addWidget(self.changes_only)
        rl.addLayout(head)
        rl.addWidget(self.diff, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([430, 800])
        self.splitter = split
        self._split_by_user = False  #: the user moved the splitter: keep it where it is
        split.splitterMoved.connect(lambda *_a: setattr(self, "_split_by_user", True))
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(split)

    def set_records(self, records: Sequence[Any], counts: Sequence[Any] = ()) -> None:
        """The conversion's pass records and, per record, its :class:`gui.document.NodeCounts`."""
        self.records = list(records)
        self.model.set_records(records, counts)
        set_widths(self.table, {0: 28, 2: 36, 3: 36, 4: 36, 5: 64, 6: 56})
        self._fit_names()
        self.diff.clear()
        self.description.setText("Select a pass to see what it changed." if records else "Not converted yet.")

    def _fit_names(self) -> None:
        """The pass column as wide as the longest name, and the list as wide as its columns
        (up to 55 % of the panel): no pass name is cut at the default size."""
        t = self.table
        t.resizeColumnToContents(1)
        need = sum(t.columnWidth(c) for c in range(self.model.columnCount())) + t.verticalScrollBar().sizeHint().width() \
            + 2 * t.frameWidth() + 6
        total = sum(self.splitter.sizes()) or self.width()
        left = min(need, int(total * 0.55))
        self.splitter.setSizes([left, max(total - left, 1)])

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.records and not self._split_by_user:
            self._fit_names()

    def current_index(self) -> int:
        idx = self.table.currentIndex()
        if not idx.isValid():
            return -1
        return self.model.records[self.proxy.mapToSource(idx).row()].index

    def select_pass(self, index: int) -> bool:
        for row, r in enumerate(self.model.records):
            if r.index == index:
                pidx = self.proxy.mapFromSource(self.model.index(row, 0))
                if pidx.isValid():
                    self.table.setCurrentIndex(pidx)
                    return True
        return False

    def visible_pass_names(self) -> list[str]:
        return [self.proxy.index(i, 1).data() for i in range(self.proxy.rowCount())]

    def _on_hide(self, on: bool) -> None:
        cur = self.current_index()
        self.proxy.set_hide_unchanged(on)
        if cur >= 0:
            self.select_pass(cur)

    def _on_current(self, current: QModelIndex, _prev: QModelIndex) -> None:
        self._show_current()
        self.passSelected.emit(self.current_index())

    def _show_current(self) -> None:
        i = self.current_index()
        if i < 0:
            self.diff.clear()
            return
        r = self.records[i]
        c = r.diff.counts()
        counts = ("<i>changed nothing</i>" if r.diff.empty and r.index else
                  f"<span style='color:#1a7f37'>+{c['added']}</span> "
                  f"<span style='color:#cf222e'>−{c['removed']}</span> "
                  f"<span style='color:#9a6700'>~{c['changed']}</span>")
        self.description.setText(f"<b>{r.index}. {r.name}</b> — {r.description or ''} {counts}")
        before = self.records[i - 1].snapshot if i > 0 else ""
        prev_name = f"{i - 1}. {self.records[i - 1].name}" if i > 0 else "(empty)"
        self.diff.show_diff(before, r.snapshot, before_title=f"before — after {prev_name}",
                            after_title=f"after {r.index}. {r.name}", changes_only=self.changes_only.isChecked())
