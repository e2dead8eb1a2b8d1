"""Editing a plug-in file: the user's own editor when one is set (``plugins/editor``, a command
with ``{file}`` and ``{line}``, e.g. ``code -g {file}:{line}``), else :class:`PluginEditor`,
a plain built-in editor window with a Save button. Saving writes the file atomically (the
session's file watcher then converts again); a file changed on disk while it is open and not
modified here is read again.
"""
from __future__ import annotations

import shlex

from PySide6.QtCore import QProcess
from PySide6.QtGui import QFont, QFontDatabase, QKeySequence, QShortcut, QTextCursor
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from engine.errors import PT2Error
from engine.writers.atomic import write_text_atomic


def split_where(where: str) -> tuple[str, int | None]:
    """``/a/b.py:12`` → (``/a/b.py``, 12); ``/a/b.py`` → (``/a/b.py``, None)."""
    path, _, line = where.rpartition(":")
    if path and line.isdigit():
        return path, int(line)
    return where, None


def launch_external(command: str, path: str, line: int | None) -> str:
    """Start the user's editor command on ``path``; "" when started, else why not."""
    try:
        args = [a.replace("{file}", path).replace("{line}", str(line or 1)) for a in shlex.split(command)]
    except ValueError as e:
        return f"the editor command cannot be read: {e}"
    if not args:
        return "the editor command is empty"
    if not any("{file}" in a for a in shlex.split(command)):
        args.append(path)
    ok, _pid = QProcess.startDetached(args[0], args[1:])
    return "" if ok else f"could not start {args[0]!r}"


class PluginEditor(QDialog):
    """The built-in editor of one plug-in file (non-modal)."""

    def __init__(self, path: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.path = path
        self.setObjectName("pluginEditor")
        self.setWindowTitle(f"{path} — plug-in")
        self.text = QPlainTextEdit()
        self.text.setObjectName("pluginEditorText")
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(font)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.save_button = QPushButton("Save")
        self.save_button.setObjectName("pluginSaveButton")
        self.save_button.setToolTip("Write the file (Ctrl+S); the model is converted again with it")
        self.save_button.clicked.connect(self.save)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        QShortcut(QKeySequence(QKeySequence.StandardKey.Save), self, activated=self.save)
        row = QHBoxLayout()
        row.addWidget(self.message, 1)
        row.addWidget(self.save_button)
        row.addWidget(close)
        lay = QVBoxLayout(self)
        lay.addWidget(self.text, 1)
        lay.addLayout(row)
        self.resize(820, 640)
        self.reload()

    def reload(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                self.text.setPlainText(f.read())
        except OSError as e:
            self.message.setText(f"Cannot read the file: {e}")
            return
        self.text.document().setModified(False)
        self.message.setText("")

    def file_changed(self) -> None:
        """The file changed on disk: read it again unless edited here."""
        if self.text.document().isModified():
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                same = f.read() == self.text.toPlainText()
        except OSError:
            same = False
        if not same:  # not the file this editor just saved
            self.reload()

    def go_to(self, line: int | None) -> None:
        if line:
            block = self.text.document().findBlockByNumber(max(line - 1, 0))
            cursor = QTextCursor(block)
            self.text.setTextCursor(cursor)
            self.text.centerCursor()
        self.text.setFocus()

    def save(self) -> bool:
        try:
            write_text_atomic(self.path, self.text.toPlainText())
        except (OSError, PT2Error) as e:
            self.message.setText(f"Not saved: {e}")
            return False
        self.text.document().setModified(False)
        self.message.setText("Saved — converting again…")
        return True
