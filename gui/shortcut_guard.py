"""Window shortcuts that keep working while the keyboard focus is in a text field.

A focused text field may claim a key combination before the window's shortcuts see it (Qt's
``ShortcutOverride``): on X11 / GNOME / KDE desktops a ``QLineEdit`` claims Ctrl+E ("end of
line", emacs-style), so Ctrl+E (Export) did nothing while typing in the search box, though
Ctrl+R worked. :class:`ShortcutGuard` is an application event filter (it sees the event before
any widget does) that lets the window's own action shortcuts win inside that window's text
fields — except the keys a text field really needs (copy, paste, undo, select all, moving and
deleting by word), which stay the field's.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QComboBox, QLineEdit, QPlainTextEdit, QTextEdit, QWidget

_TEXT_WIDGETS = (QLineEdit, QTextEdit, QPlainTextEdit, QAbstractSpinBox, QComboBox)

#: editing keys a text field keeps even when a window action uses the same combination
_EDITING = (QKeySequence.StandardKey.Copy, QKeySequence.StandardKey.Cut, QKeySequence.StandardKey.Paste,
            QKeySequence.StandardKey.Undo, QKeySequence.StandardKey.Redo, QKeySequence.StandardKey.SelectAll,
            QKeySequence.StandardKey.Delete, QKeySequence.StandardKey.DeleteStartOfWord,
            QKeySequence.StandardKey.DeleteEndOfWord, QKeySequence.StandardKey.MoveToNextWord,
            QKeySequence.StandardKey.MoveToPreviousWord, QKeySequence.StandardKey.SelectNextWord,
            QKeySequence.StandardKey.SelectPreviousWord)


class ShortcutGuard(QObject):
    """Installed on the application for one window (see the module docstring)."""

    def __init__(self, window: QWidget):
        super().__init__(window)
        self.window = window
        QApplication.instance().installEventFilter(self)
        window.destroyed.connect(self._uninstall)

    def _uninstall(self, *_args) -> None:
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self)

    def window_keys(self) -> set[int]:
        """Every key combination bound to one of the window's actions (as ``QKeyCombination``
        ints)."""
        keys: set[int] = set()
        for a in QWidget.actions(self.window):
            for seq in a.shortcuts():
                if seq.count() == 1:
                    keys.add(seq[0].toCombined())
        return keys

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.ShortcutOverride or not isinstance(obj, _TEXT_WIDGETS):
            return False
        if obj.window() is not self.window:
            return False
        assert isinstance(event, QKeyEvent)
        if any(event.matches(k) for k in _EDITING):
            return False
        if event.keyCombination().toCombined() not in self.window_keys():
            return False
        event.ignore()  # not claimed by the field: the window's shortcut runs
        return True
