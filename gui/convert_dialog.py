"""The Convert dialog: fp16 weights, converter plug-in files, input shapes for dynamic dims.

:class:`ConvertDialog` shows the model's user inputs with their symbolic dims and ranges next
to the shape field, validates the shapes with the engine's parser before accepting, and returns
a :class:`engine.convert.ConvertOptions` (:meth:`ConvertDialog.options`). It is opened with
``open()`` (non-blocking); the window converts when it is accepted.
"""
from __future__ import annotations

import html
import os
from typing import Any

from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QVBoxLayout, QWidget)

from engine.convert import ConvertOptions
from engine.convert.inputshape import parse_inputshape
from engine.errors import PT2Error


def describe_inputs(program: Any) -> str:
    """HTML lines ``x: float32 [s0, 3, 64, 64]`` and the symbol ranges of a program."""
    if program is None:
        return ""
    sig = program.signature
    lines = []
    for i in sig.user_inputs:
        if i.meta is None:
            lines.append(f"<b>{html.escape(i.name)}</b>: constant {html.escape(repr(i.value))}")
            continue
        dims = ", ".join(str(s) for s in i.meta.sizes)
        lines.append(f"<b>{html.escape(i.name)}</b>: {i.meta.dtype.torch_name} [{html.escape(dims)}]")
    for s in sig.symbols.values():
        lines.append(f"<span style='color:#b35c00'>{html.escape(str(s))}</span>")
    return "<br>".join(lines)


def browse_row(edit: QLineEdit, on_browse) -> QHBoxLayout:
    """A path field with its Browse… button after it."""
    browse = QPushButton("Browse…")
    browse.clicked.connect(on_browse)
    row = QHBoxLayout()
    row.addWidget(edit, 1)
    row.addWidget(browse)
    return row


def error_label() -> QLabel:
    """The red, wrapping line a dialog says what is wrong with its fields in."""
    label = QLabel("")
    label.setStyleSheet("color:#d62828")
    label.setWordWrap(True)
    return label


def has_dynamic_dims(program: Any) -> bool:
    return bool(program is not None and program.signature.symbols)


class ConvertDialog(QDialog):
    def __init__(self, program: Any, options: ConvertOptions | None = None, *, auto_convert: bool = True,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Convert to ncnn")
        self.setObjectName("convertDialog")
        opts = options or ConvertOptions()
        self.fp16 = QCheckBox("Store weights as fp16 (halves the .bin; pnnx's default)")
        self.fp16.setChecked(opts.fp16)
        self.plugins = QLineEdit(";".join(str(p) for p in opts.converters))
        self.plugins.setPlaceholderText("converter plug-in .py files, separated by ;")
        prow = browse_row(self.plugins, self._browse)
        self.shapes = QLineEdit()
        if opts.input_shapes:
            self.shapes.setText(",".join("[" + ",".join(str(d) for d in s) + "]" for s in opts.input_shapes))
        self.shapes.setPlaceholderText("[1,3,224,224],[1,16]  — leave empty to keep dims dynamic")
        dynamic = has_dynamic_dims(program)
        self.shapes.setEnabled(dynamic)
        if not dynamic:
            self.shapes.setPlaceholderText("every input shape is static")
        self.inputs = QLabel(describe_inputs(program))
        self.inputs.setWordWrap(True)
        self.auto = QCheckBox("Convert automatically when a model is opened")
        self.auto.setChecked(auto_convert)
        self.error = error_label()
        form = QFormLayout()
        form.addRow(self.fp16)
        form.addRow("Plug-ins", prow)
        form.addRow("Model inputs", self.inputs)
        form.addRow("Input shapes", self.shapes)
        form.addRow(self.auto)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Convert")
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(buttons)
        self.resize(560, self.sizeHint().height())
        self._base = opts

    def _browse(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Converter plug-ins", "", "Python files (*.py)")
        if files:
            self.plugins.setText(";".join(files))

    def options(self) -> ConvertOptions:
        """The options as entered (raises PT2Error for bad shapes or missing plug-ins)."""
        shapes = None
        text = self.shapes.text().strip()
        if text and self.shapes.isEnabled():
            shapes = parse_inputshape(text)
        plugins = [p.strip() for p in self.plugins.text().split(";") if p.strip()]
        for p in plugins:
            if not os.path.exists(p):
                raise PT2Error(f"{p}: converter plug-in file or folder not found")
        return ConvertOptions(fp16=self.fp16.isChecked(), input_shapes=shapes, converters=plugins,
                              model=self._base.model)

    def _accept(self) -> None:
        try:
            self.options()
        except PT2Error as e:
            self.error.setText(str(e))
            return
        self.accept()
