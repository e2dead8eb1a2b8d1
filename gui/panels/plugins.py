"""Plug-ins panel: the converter plug-in files of the session, one row each with a checkbox
(unchecked: the next conversions run without it), and under each file the rules it registers:
function, overload, priority, the ATen nodes the rule converted in the current conversion, and
the check of its layers against PyTorch (Verify rule). A file that does not load, or a rule
that failed on a node, is shown in red with the reason and ``file:line``.

The panel holds no state of its own: :meth:`PluginsPanel.set_rows` shows :class:`FileRow` s
(built by :class:`gui.plugin_session.PluginSession`); the user's requests leave as signals.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QLabel, QPushButton, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

RED, GREEN = QColor("#d62828"), QColor("#2a9d4b")
COLUMNS = ("Plug-in / rule", "Overload", "Priority", "Converted nodes", "Check against PyTorch")
TAG, PATH, WHERE = Qt.ItemDataRole.UserRole, Qt.ItemDataRole.UserRole + 1, Qt.ItemDataRole.UserRole + 2


@dataclass
class RuleRow:
    tag: str
    function: str
    target: str
    priority: int
    where: str  #: ``file:line`` of the function
    nodes: list[str] = field(default_factory=list)
    problem: str = ""  #: why it left a node unconverted ("" when it did not)
    check: str = ""  #: the Verify rule verdict, "" before one
    check_ok: bool | None = None


@dataclass
class FileRow:
    path: str
    enabled: bool
    error: str = ""  #: why it does not load ("file:line: reason")
    rules: list[RuleRow] = field(default_factory=list)


class PluginsPanel(QWidget):
    toggled = Signal(str, bool)  #: path, enabled
    verifyRequested = Signal(str)  #: rule tag
    editRequested = Signal(str)  #: ``file`` or ``file:line``
    addRequested = Signal()
    editorRequested = Signal()  #: choose the editor command

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.tree = QTreeWidget()
        self.tree.setObjectName("pluginsTree")
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setAlternatingRowColors(True)
        self.tree.setWordWrap(True)
        self.tree.itemChanged.connect(self._changed)
        self.tree.itemSelectionChanged.connect(self._update_buttons)
        self.tree.itemDoubleClicked.connect(lambda item, _c: self._edit(item))
        self.summary = QLabel("No converter plug-ins yet: Problems ▸ Write a converter… on a node, or Add….")
        self.summary.setWordWrap(True)
        self.verify_button = self._button("Verify rule", "verifyRuleButton", self._verify,
                                          "Run the layers this rule made alone, on PyTorch's inputs, and compare")
        self.edit_button = self._button("Edit", "editPluginButton", lambda: self._edit(self.tree.currentItem()),
                                        "Open the plug-in file in the editor")
        add = self._button("Add…", "addPluginButton", self.addRequested.emit, "Load a plug-in file of your own")
        editor = self._button("Editor…", "pluginEditorButton", self.editorRequested.emit,
                              "Which editor opens plug-in files (default: the built-in one)")
        row = QHBoxLayout()
        for b in (self.verify_button, self.edit_button, add, editor):
            row.addWidget(b)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addLayout(row)
        lay.addWidget(self.tree, 1)
        self._update_buttons()

    def _button(self, text: str, name: str, slot, tip: str) -> QPushButton:
        b = QPushButton(text)
        b.setObjectName(name)
        b.setToolTip(tip)
        b.clicked.connect(slot)
        return b

    # ---------------------------------------------------------------- showing
    def set_rows(self, rows: list[FileRow], summary: str = "") -> None:
        cur = self.tree.currentItem()
        keep = (cur.data(0, TAG), cur.data(0, PATH)) if cur is not None else None
        self.tree.blockSignals(True)
        try:
            self.tree.clear()
            for fr in rows:
                self._add_file(fr)
            self.tree.expandAll()
        finally:
            self.tree.blockSignals(False)
        for c, width in ((0, 260), (1, 190), (2, 60), (3, 200)):
            self.tree.setColumnWidth(c, width)
        if keep is not None:
            self.select(*keep)
        if summary:
            self.summary.setText(summary)
        self._update_buttons()

    def _add_file(self, fr: FileRow) -> None:
        item = QTreeWidgetItem(self.tree, [os.path.basename(fr.path)])
        item.setData(0, PATH, fr.path)
        item.setData(0, WHERE, fr.path)
        item.setToolTip(0, fr.path)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(0, Qt.CheckState.Checked if fr.enabled else Qt.CheckState.Unchecked)
        if fr.error:
            item.setText(3, fr.error)
            item.setToolTip(3, fr.error)
            item.setForeground(3, RED)
            item.setForeground(0, RED)
        elif not fr.rules:
            item.setText(3, "registers no rule" if fr.enabled else "off")
        for r in fr.rules:
            self._add_rule(item, fr.path, r)

    def _add_rule(self, parent: QTreeWidgetItem, path: str, r: RuleRow) -> None:
        nodes = ", ".join(r.nodes) if r.nodes else ("—" if not r.problem else "")
        item = QTreeWidgetItem(parent, [r.function, r.target, str(r.priority), nodes, r.check])
        item.setData(0, TAG, r.tag)
        item.setData(0, PATH, path)
        item.setData(0, WHERE, r.where)
        item.setToolTip(0, r.where)
        if r.problem:
            item.setText(3, r.problem if not r.nodes else f"{nodes}; {r.problem}")
            item.setToolTip(3, r.problem)
            item.setForeground(3, RED)
        if r.check:
            item.setToolTip(4, r.check)
            item.setForeground(4, GREEN if r.check_ok else RED)
            if r.check_ok is False:
                item.setForeground(0, RED)

    # ---------------------------------------------------------------- queries
    def items(self) -> list[QTreeWidgetItem]:
        out = []
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            out.append(top)
            out += [top.child(k) for k in range(top.childCount())]
        return out

    def file_item(self, path: str) -> QTreeWidgetItem | None:
        return next((it for it in self.items() if it.data(0, TAG) is None and it.data(0, PATH) == path), None)

    def rule_item(self, tag: str) -> QTreeWidgetItem | None:
        return next((it for it in self.items() if it.data(0, TAG) == tag), None)

    def select(self, tag: str | None, path: str | None = None) -> None:
        item = self.rule_item(tag) if tag else self.file_item(path or "")
        if item is not None:
            self.tree.setCurrentItem(item)

    def current_tag(self) -> str | None:
        item = self.tree.currentItem()
        return item.data(0, TAG) if item is not None else None

    # ---------------------------------------------------------------- requests
    def _changed(self, item: QTreeWidgetItem, column: int) -> None:
        if column == 0 and item.data(0, TAG) is None:
            path, on = item.data(0, PATH), item.checkState(0) == Qt.CheckState.Checked
            # after this signal: the rows are built again in response
            QTimer.singleShot(0, lambda: self.toggled.emit(path, on))

    def _verify(self) -> None:
        tag = self.current_tag()
        if tag:
            self.verifyRequested.emit(tag)

    def _edit(self, item: QTreeWidgetItem | None) -> None:
        if item is not None:
            self.editRequested.emit(item.data(0, WHERE))

    def _update_buttons(self) -> None:
        item = self.tree.currentItem()
        self.verify_button.setEnabled(item is not None and item.data(0, TAG) is not None)
        self.edit_button.setEnabled(item is not None)
