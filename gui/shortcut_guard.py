"""Window shortcuts that keep working while the keyboard focus is in a text field.

A focused text field may claim a key combination before the window's shortcuts see it (Qt's
``ShortcutOverride``): on X11 / GNOME / KDE desktops a ``QLineEdit`` claims Ctrl+E ("end of
line", emacs-style), so Ctrl+E (Export) did nothing while typing in the search box, though
Ctrl+R worked. :class:`ShortcutGuard` is an event filter on the focused text field (it sees the
event before the field does) that lets the window's own action shortcuts win inside that
window's text fields — except the keys a text field really needs (copy, paste, undo, select
all, moving and deleting by word), which stay the field's.

It follows the focus instead of filtering the whole application: an application filter
written in Python takes the interpreter lock for every event of every object (timers, paints,
the busy progress bar's frames), and while a worker thread runs Python each of those waits
for the lock — the event loop turned a few times per tenth of a second instead of ten.
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
    """Filters the focused text field of one window (see the module docstring)."""

    def __init__(self, window: QWidget):
        super().__init__(window)
        self.window = window
        self._field: QWidget | None = None  #: the text field being filtered
        QApplication.instance().focusChanged.connect(self._follow_focus)
        self._follow_focus(None, QApplication.focusWidget())

    def _follow_focus(self, _old, new) -> None:
        if self._field is not None:
            try:
                self._field.removeEventFilter(self)
            except RuntimeError:  # the field was deleted
                pass
            self._field = None
        if isinstance(new, _TEXT_WIDGETS) and new.window() is self.window:
            new.installEventFilter(self)  # the newest filter runs first
            self._field = new

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
        if event.type() != QEvent.Type.ShortcutOverride:
            return False
        assert isinstance(event, QKeyEvent)
        if any(event.matches(k) for k in _EDITING):
            return False
        if event.keyCombination().toCombined() not in self.window_keys():
            return False
        event.ignore()  # not claimed by the field: the window's shortcut runs
        return True
