"""The "Write a converter…" dialog: which template, and where the plug-in file goes.

:class:`WriteConverterDialog` names the node and its overload, offers the three templates of
:mod:`engine.convert.scaffold` — ``decompose`` only once :func:`enable_decompose` was told
PyTorch decomposes the overload (the window asks in a worker: it imports torch) — and a file
path (a free name in the plug-ins folder by default). Opened with ``open()``; accepted, the
window writes the file (:func:`gui.plugin_runs.write_plugin_file`) in a worker.
"""
from __future__ import annotations

import os

from PySide6.QtWidgets import (QButtonGroup, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QLabel, QLineEdit,
                               QRadioButton, QVBoxLayout, QWidget)

from .convert_dialog import browse_row, error_label

TEMPLATE_TEXT = {
    "pnnx": "Lower to existing pnnx / ncnn ops (write the rule's body with ctx.emit)",
    "ncnn_custom": "One ncnn custom layer of your own (C++ for ncnn; a Python reference for Verify)",
    "decompose": "Decompose it into ATen ops PyTorch's decomposition gives, and convert the parts",
}


class WriteConverterDialog(QDialog):
    def __init__(self, op_name: str, node: str, path: str, *, overrides: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("writeConverterDialog")
        self.setWindowTitle(f"Write a converter for {op_name}")
        self.op_name = op_name
        what = f"<b>{op_name}</b> — made from node <b>{node}</b>"
        if overrides:
            what += f"<br>It converts today with {overrides}: your rule takes priority over it."
        self.head = head = QLabel(what)
        head.setWordWrap(True)
        self.templates: dict[str, QRadioButton] = {}
        self.group = QButtonGroup(self)
        box = QVBoxLayout()
        for key, text in TEMPLATE_TEXT.items():
            b = QRadioButton(text)
            b.setObjectName(f"template_{key}")
            self.templates[key] = b
            self.group.addButton(b)
            box.addWidget(b)
        self.templates["pnnx"].setChecked(True)
        self.templates["decompose"].setEnabled(False)
        self.templates["decompose"].setToolTip("Checking whether PyTorch decomposes this overload…")
        self.path = QLineEdit(path)
        self.path.setObjectName("pluginPath")
        prow = browse_row(self.path, self._browse)
        self.error = error_label()
        form = QFormLayout()
        form.addRow(head)
        form.addRow("Template", box)
        form.addRow("File", prow)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.write_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.write_button.setText("Write and open")
        self.write_button.setObjectName("writeConverterButton")
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)
        self.resize(640, self.sizeHint().height())

    def enable_decompose(self, possible: bool) -> None:
        b = self.templates["decompose"]
        b.setEnabled(possible)
        b.setToolTip("" if possible else "PyTorch's core decomposition table has no entry for this overload "
                                         "(or PyTorch is not installed)")

    @property
    def template(self) -> str:
        return next(k for k, b in self.templates.items() if b.isChecked())

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Plug-in file", self.path.text(), "Python files (*.py)")
        if path:
            self.path.setText(path)

    def _accept(self) -> None:
        p = self.path.text().strip()
        if not p.endswith(".py"):
            self.error.setText("The plug-in file must be a .py file.")
            return
        if os.path.exists(p):
            self.error.setText(f"{p} exists: choose another name (it is never replaced).")
            return
        folder = os.path.dirname(p) or "."
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            self.error.setText(f"Cannot write in {folder}.")
            return
        self.accept()
