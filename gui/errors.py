"""The one place errors go: :class:`ErrorReporter` logs them and shows a dialog.

Errors the engine raises on purpose (:class:`engine.PT2Error`: a bad file, a bad plug-in, a
failed pass) are shown as their one-line message. Anything else is a bug: it is logged with its
traceback and shown as "Unexpected error" with the traceback under *Show Details*. The
reporter also installs the global exception hooks (``sys.excepthook``,
``threading.excepthook``) so an exception in a slot never takes the application down.

Dialogs are opened non-modally with :meth:`QDialog.open` (never ``exec()``), so the event loop
keeps running and tests can find and dismiss them (:attr:`ErrorReporter.dialogs`). In headless
mode (``--screenshot``) nothing is shown and messages go to stderr.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from typing import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from engine.errors import PT2Error

log = logging.getLogger(__name__)


def describe(exc: BaseException) -> tuple[str, str]:
    """(one-line message, details) for an exception."""
    if isinstance(exc, PT2Error):
        return str(exc), ""
    details = exc.__dict__.get("_formatted_traceback") or "".join(traceback.format_exception(exc))
    msg = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return msg, details


class ErrorReporter(QObject):
    """Logs errors and shows them; see the module docstring."""

    reported = Signal(str, str)  #: (title, one-line message)

    def __init__(self, parent_widget: Callable[[], QWidget | None] | None = None, *, headless: bool = False):
        super().__init__()
        self.parent_widget = parent_widget or (lambda: None)
        self.headless = headless
        self.dialogs: list[QMessageBox] = []
        self.history: list[tuple[str, str]] = []
        self._last: tuple[str, float] = ("", 0.0)
        self._previous_hooks: tuple | None = None

    # ---------------------------------------------------------------- reporting
    def report(self, title: str, error: BaseException | str, details: str = "") -> None:
        if isinstance(error, BaseException):
            message, tb = describe(error)
            details = details or tb
            expected = isinstance(error, PT2Error)
        else:
            message, expected = str(error), True
        if expected:
            log.warning("%s: %s", title, message)
        else:
            log.error("%s: %s\n%s", title, message, details)
        self.history.append((title, message))
        self.reported.emit(title, message)
        key = f"{title}\n{message}"
        now = time.monotonic()
        if key == self._last[0] and now - self._last[1] < 1.0:
            return  # the same error again right away: one dialog is enough
        self._last = (key, now)
        if self.headless:
            print(f"{title}: {message}", file=sys.stderr)
            return
        self._show(title, message if expected else f"Unexpected error — {message}", details)

    def report_task(self, task_name: str, error: BaseException) -> None:
        """Slot for :attr:`gui.workers.TaskRunner.error`."""
        self.report(_task_title(task_name, error), error)

    def _show(self, title: str, message: str, details: str) -> None:
        box = QMessageBox(self.parent_widget())
        box.setIcon(QMessageBox.Icon.Critical if details else QMessageBox.Icon.Warning)
        box.setWindowTitle(title)
        box.setText(title)
        box.setInformativeText(message)
        if details:
            box.setDetailedText(details)
        box.setStandardButtons(QMessageBox.StandardButton.Close)
        box.setObjectName("errorDialog")
        _fit_longest_word(box, message)
        box.finished.connect(lambda _r, b=box: self._forget(b))
        self.dialogs.append(box)
        box.open()

    def _forget(self, box: QMessageBox) -> None:
        if box in self.dialogs:
            self.dialogs.remove(box)
        box.deleteLater()

    def dismiss_all(self) -> None:
        for box in list(self.dialogs):
            box.done(0)

    # ---------------------------------------------------------------- hooks
    def install_hooks(self) -> None:
        """Route uncaught exceptions (GUI thread and Python threads) here."""
        if self._previous_hooks is None:
            self._previous_hooks = (sys.excepthook, threading.excepthook)
        sys.excepthook = self._excepthook
        threading.excepthook = self._thread_excepthook

    def uninstall_hooks(self) -> None:
        if self._previous_hooks is not None:
            sys.excepthook, threading.excepthook = self._previous_hooks
            self._previous_hooks = None

    def _excepthook(self, exc_type, exc, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        if exc is None:
            exc = exc_type()
        exc.__dict__.setdefault("_formatted_traceback", "".join(traceback.format_exception(exc_type, exc, tb)))
        try:
            self.report("Internal error", exc)
        except Exception:  # never raise from the hook itself
            sys.__excepthook__(exc_type, exc, tb)

    def _thread_excepthook(self, args) -> None:
        log.error("uncaught exception in thread %s", getattr(args.thread, "name", "?"),
                  exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


#: widest a dialog's message may make it, as a share of the screen
MAX_SCREEN_SHARE = 0.8


def _fit_longest_word(box: QMessageBox, message: str) -> None:
    """Widen the message so its longest word — a file path, a member name — stays on one line
    (a label breaks paths at every ``/``: one path over five lines)."""
    label = box.findChild(QLabel, "qt_msgbox_informativelabel")
    if label is None:
        return
    fm = label.fontMetrics()
    longest = max((fm.horizontalAdvance(w) for w in message.split()), default=0)
    screen = box.screen() or QGuiApplication.primaryScreen()
    limit = int(screen.availableGeometry().width() * MAX_SCREEN_SHARE) if screen is not None else 1200
    label.setMinimumWidth(min(longest + 8, limit))


def _task_title(task_name: str, error: BaseException) -> str:
    if task_name.lower().startswith("cannot"):
        return task_name
    return task_name[:1].upper() + task_name[1:] + " failed"
