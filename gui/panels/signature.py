"""Signature panel: the program's user inputs and outputs, their pytree structure, dynamic
dimensions with their ranges, and facts about the file (torch / schema version, dialect).

A tree (``QTreeView`` over a ``QStandardItemModel``) with four columns: name, kind, dtype,
shape. Symbolic dims are listed under "Dynamic dimensions" with min / max / example.
"""
from __future__ import annotations

from typing import Any

from PySide6.QtGui import QFont, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeView, QVBoxLayout, QWidget


def _item(text: Any, *, bold: bool = False, mono: bool = False, tip: str = "") -> QStandardItem:
    it = QStandardItem("" if text is None else str(text))
    it.setEditable(False)
    if bold or mono:
        f = QFont()
        f.setBold(bold)
        if mono:
            f.setFamily("DejaVu Sans Mono")
        it.setFont(f)
    if tip or mono:
        it.setToolTip(tip or it.text())
    return it


def _shape(meta: Any) -> str:
    if meta is None:
        return ""
    return "[" + ", ".join(str(s) for s in meta.sizes) + "]"


class SignaturePanel(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = QStandardItemModel(self)
        self.model.setHorizontalHeaderLabels(["Name", "Kind", "dtype", "Shape / value"])
        self.tree = QTreeView()
        self.tree.setObjectName("signatureTree")
        self.tree.setModel(self.model)
        self.tree.setAlternatingRowColors(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        head = self.tree.header()
        for c in (0, 1, 2):  # as wide as their cells; the shape gets the rest
            head.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        head.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        head.setStretchLastSection(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tree)

    def _group(self, title: str, count: int | None = None) -> QStandardItem:
        label = f"{title} ({count})" if count is not None else title
        g = _item(label, bold=True)
        self.model.appendRow([g, _item(""), _item(""), _item("")])
        # a group's title spans the row: it does not widen the name column
        self.tree.setFirstColumnSpanned(self.model.rowCount() - 1, self.model.invisibleRootItem().index(), True)
        return g

    def set_program(self, program: Any | None, package: Any | None = None) -> None:
        self.model.removeRows(0, self.model.rowCount())
        if program is None:
            return
        sig = program.signature
        ins = self._group("Inputs", len(sig.user_inputs))
        for i in sig.user_inputs:
            if i.meta is not None:
                ins.appendRow([_item(i.name, mono=True), _item("tensor"), _item(i.meta.dtype.torch_name),
                               _item(_shape(i.meta), mono=True)])
            else:
                ins.appendRow([_item(i.name, mono=True), _item(i.kind.value), _item(type(i.value).__name__),
                               _item(repr(i.value), mono=True)])
        outs = self._group("Outputs", len(sig.user_outputs))
        for o in sig.user_outputs:
            outs.appendRow([_item(o.name, mono=True), _item("tensor" if o.meta else o.kind.value),
                            _item(o.meta.dtype.torch_name if o.meta else ""), _item(_shape(o.meta), mono=True)])
        if sig.mutations:
            mut = self._group("Mutations", len(sig.mutations))
            for o in sig.mutations:
                mut.appendRow([_item(o.name, mono=True), _item(o.kind.value), _item(""), _item(o.target or "")])
        syms = self._group("Dynamic dimensions", len(sig.symbols))
        for s in sig.symbols.values():
            lo = "−∞" if s.min is None else s.min
            hi = "∞" if s.max is None else s.max
            hint = "" if s.hint is None else f"example {s.hint}"
            syms.appendRow([_item(s.name, mono=True), _item("symbol"), _item(hint), _item(f"{lo} … {hi}", mono=True)])
        tree = self._group("Structure")
        if sig.in_tree is not None:
            tree.appendRow([_item("inputs"), _item("pytree"), _item(""),
                            _item(str(sig.in_tree), mono=True, tip=str(sig.in_tree))])
        if sig.out_tree is not None:
            tree.appendRow([_item("outputs"), _item("pytree"), _item(""),
                            _item(str(sig.out_tree), mono=True, tip=str(sig.out_tree))])
        info = self._group("Program")
        facts = [("model", program.name), ("dialect", program.dialect), ("schema", str(program.schema_version)),
                 ("torch", program.torch_version or "unknown"), ("nodes", f"{len(program.nodes):,}"),
                 ("parameters", f"{len(sig.parameters):,}"), ("buffers", f"{len(sig.buffers):,}"),
                 ("constants", f"{len(sig.constants):,}")]
        if package is not None:
            facts.insert(1, ("layout", package.layout))
            if len(package.model_names) > 1:
                facts.append(("models in file", ", ".join(package.model_names)))
        for k, v in facts:
            info.appendRow([_item(k), _item(""), _item(""), _item(v)])
        self.tree.expandAll()

    def group_texts(self) -> dict[str, list[str]]:
        """Group title → first-column texts of its rows (for tests)."""
        out = {}
        for r in range(self.model.rowCount()):
            g = self.model.item(r, 0)
            out[g.text()] = [g.child(k, 0).text() for k in range(g.rowCount())]
        return out
