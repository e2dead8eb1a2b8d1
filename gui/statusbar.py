"""The main window's status bar: :class:`StatusArea`.

Left, the last status message; right, the model summary, then — only while a task that is worth
showing runs — the step it is on (a label wide enough for its whole text; the task's name in its
tooltip), a small percentage bar and Stop. The progress message goes to the label, never into the
bar (whose few pixels would clip it). Stop (and Model ▸ Stop) are enabled only while something
runs.
"""
from __future__ import annotations

import logging

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QProgressBar, QSizePolicy, QStatusBar, QToolButton

from .workers import TaskRunner

log = logging.getLogger(__name__)

#: width of the percentage bar (it shows "45%" only)
BAR_WIDTH = 90
#: widest the task's text gets before it is elided
MAX_TEXT_WIDTH = 460


def task_label(name: str) -> str:
    """What the status bar says a task is: ``Cannot open x.pt2`` (its error title) → ``Opening x.pt2``."""
    return name.replace("Cannot open", "Opening")


class StatusArea:
    """Builds the status bar's widgets and keeps them in step with a :class:`TaskRunner`."""

    def __init__(self, bar: QStatusBar, runner: TaskRunner, stop_action):
        self.runner = runner
        self.stop_action = stop_action
        self.message = QLabel("")
        self.message.setObjectName("statusMessage")
        self.message.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.summary = QLabel("")
        self.summary.setObjectName("summaryLabel")
        self.task = QLabel("")
        self.task.setObjectName("progressLabel")
        self.bar = QProgressBar()
        self.bar.setFixedWidth(BAR_WIDTH)
        self.bar.setMaximumHeight(16)
        self.bar.setTextVisible(True)
        self.bar.setFormat("%p%")
        self.stop = QToolButton()
        self.stop.setDefaultAction(stop_action)
        self.stop.setText("Stop")
        self.stop.setToolTip("Stop what is running (Ctrl+.)")
        self.stop.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        bar.addWidget(self.message, 1)
        bar.addPermanentWidget(self.summary)
        bar.addPermanentWidget(self.task)
        bar.addPermanentWidget(self.bar)
        bar.addPermanentWidget(self.stop)
        self._name = ""
        self.show_busy(False)
        stop_action.setEnabled(runner.busy)
        runner.busyChanged.connect(self._on_busy)
        runner.taskStarted.connect(self._on_task_started)

    def show_busy(self, show: bool) -> None:
        for w in (self.task, self.bar, self.stop):
            w.setVisible(show)

    def _on_task_started(self, task) -> None:
        self.stop_action.setEnabled(True)
        if task.quiet:
            return  # too quick to be worth a progress bar
        self._name = task_label(task.name)
        self._set_text(self._name)
        self.bar.setRange(0, 0)
        self.show_busy(True)
        task.progressed.connect(self._on_progress)

    def _on_progress(self, done: int, total: int, message: str) -> None:
        if total > 0:
            self.bar.setRange(0, total)
            self.bar.setValue(done)
        # the message at the left already names the task ("Converting m.pt2…"): the step here
        self._set_text(message or self._name, f"{self._name}: {message}" if message else self._name)

    def _set_text(self, text: str, tip: str = "") -> None:
        # as wide as the text needs (a very long one is elided in the middle): never clipped
        fm = self.task.fontMetrics()
        shown = fm.elidedText(text, Qt.TextElideMode.ElideMiddle, MAX_TEXT_WIDTH)
        self.task.setText(shown)
        self.task.setToolTip(tip or text)
        self.task.setMinimumWidth(fm.horizontalAdvance(shown) + 8)
        bar = self.task.parentWidget()
        if bar is not None and bar.layout() is not None:
            bar.layout().activate()  # at once: the next frame must not draw the bar over the text

    def _on_busy(self, busy: bool) -> None:
        self.stop_action.setEnabled(busy)
        self.show_busy(busy and any(not t.quiet for t in self.runner.active))
        if not busy:
            self.bar.setRange(0, 1)
            self.task.setText("")
