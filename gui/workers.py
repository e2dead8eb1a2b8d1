"""Every thread the GUI starts: :class:`TaskRunner` runs functions on a ``QThreadPool``.

A task is a plain function ``fn(ctx, *args)`` run in a worker thread; ``ctx`` is a
:class:`TaskContext` with ``progress(done, total, message)``, ``partial(value)`` (a result
streamed before the end: the pnnx graph of a conversion still lowering to ncnn) and
``cancelled``/``check()``. The :class:`Task` handle lives in the GUI thread: its signals
(``progressed``, ``partial``, ``succeeded``, ``failed``, ``cancelled``, ``finished``) are
always delivered there, so callers never touch widgets from a worker. Failures of every task also go to one place, the runner's ``error``
signal (the window connects it to :class:`gui.errors.ErrorReporter`).

Cancellation is cooperative: :meth:`Task.cancel` sets a flag the function polls (the engine's
``cancel=`` callbacks and the layout's ``cancel`` take ``ctx.cancelled``); a cancelled task's
result is discarded. Starting a task with a ``group`` cancels the previous task of that group
(a new file replaces a load still running, a new layout replaces a stale one).
"""
from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
import warnings
from typing import Any, Callable

from PySide6.QtCore import QCoreApplication, QEventLoop, QObject, QRunnable, QThreadPool, QTimer, Signal, Slot

from .gcpause import gc_paused

log = logging.getLogger(__name__)


class Cancelled(Exception):
    """Raised inside a task by :meth:`TaskContext.check` once the task was cancelled."""


def _is_cancellation(exc: BaseException) -> bool:
    if isinstance(exc, Cancelled):
        return True
    # the engine's pass manager and the layout raise their own "cancelled" exceptions
    return type(exc).__name__ in ("Cancelled", "LayoutCancelled")


class TaskContext:
    """What a task function gets: progress reporting and the cancel flag."""

    #: shortest interval between two progress signals (the last one always goes out)
    PROGRESS_INTERVAL = 0.03

    def __init__(self, task: "Task"):
        self._task = task
        self._event = task._cancel_event
        self._last = 0.0

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def __call__(self) -> bool:  # usable directly as an engine ``cancel=`` callback
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled(self._task.name)

    def progress(self, done: int, total: int, message: str = "") -> None:
        now = time.monotonic()
        if done < total and now - self._last < self.PROGRESS_INTERVAL:
            return
        self._last = now
        self._task._progress_from_worker.emit(int(done), int(total), str(message))

    def partial(self, value: Any) -> None:
        """Hand a part of the result to the GUI thread now (the task's ``partial`` signal)."""
        self._task._partial_from_worker.emit(value)


class Task(QObject):
    """Handle of one task, living in the GUI thread."""

    progressed = Signal(int, int, str)
    partial = Signal(object)  #: a part of the result, before the end (see TaskContext.partial)
    succeeded = Signal(object)
    failed = Signal(object)  #: the exception (its ``__traceback__`` is kept)
    cancelled = Signal()
    finished = Signal()  #: after any of the three above

    # emitted from the worker thread, delivered (queued) to this object's slots
    _progress_from_worker = Signal(int, int, str)
    _partial_from_worker = Signal(object)
    _done_from_worker = Signal(str, object)

    def __init__(self, name: str, fn: Callable[..., Any], args: tuple, kwargs: dict, group: str | None = None):
        super().__init__()
        self.name = name
        self.group = group
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.error: BaseException | None = None
        self.state = "pending"  #: pending | running | done | failed | cancelled
        self.quiet = False  #: too short to show progress for
        self.progress = (0, 0, "")
        self.started_at = 0.0  #: perf_counter() when the worker started the function
        self.ended_at = 0.0  #: perf_counter() when the function returned or raised (worker side)
        self.seconds = 0.0
        self._cancel_event = threading.Event()
        self._ended = threading.Event()  #: set by the worker once the function returned or raised
        self._progress_from_worker.connect(self._on_progress)
        self._partial_from_worker.connect(self._on_partial)
        self._done_from_worker.connect(self._on_done)

    @property
    def is_done(self) -> bool:
        return self.state in ("done", "failed", "cancelled")

    def cancel(self) -> None:
        """Ask the task to stop; its result, if it still comes, is discarded."""
        if not self.is_done:
            self._cancel_event.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_event.is_set()

    # ---------------------------------------------------------------- worker side
    def _run(self) -> None:
        try:
            self._run_function()
        finally:
            self._ended.set()

    def _run_function(self) -> None:
        ctx = TaskContext(self)
        self.started_at = time.perf_counter()
        try:
            if self._cancel_event.is_set():
                raise Cancelled(self.name)
            with gc_paused():
                result = self.fn(ctx, *self.args, **self.kwargs)
        except BaseException as e:  # noqa: BLE001 — everything goes back to the GUI thread
            self.ended_at = time.perf_counter()
            if _is_cancellation(e) or self._cancel_event.is_set():
                self._done_from_worker.emit("cancelled", None)
            else:
                e.__dict__.setdefault("_formatted_traceback", "".join(traceback.format_exception(e)))
                self._done_from_worker.emit("failed", e)
            return
        self.ended_at = time.perf_counter()
        self._done_from_worker.emit("cancelled" if self._cancel_event.is_set() else "done", result)

    # ---------------------------------------------------------------- GUI side
    @Slot(int, int, str)
    def _on_progress(self, done: int, total: int, message: str) -> None:
        if self.is_done:
            return
        self.progress = (done, total, message)
        self.progressed.emit(done, total, message)

    @Slot(object)
    def _on_partial(self, value: object) -> None:
        if self.is_done or self._cancel_event.is_set():
            return
        self.partial.emit(value)

    @Slot(str, object)
    def _on_done(self, state: str, payload: object) -> None:
        self.seconds = time.perf_counter() - self.started_at
        self.state = state
        if state == "done":
            self.succeeded.emit(payload)
        elif state == "failed":
            assert isinstance(payload, BaseException)
            self.error = payload
            self.failed.emit(payload)
        else:
            self.cancelled.emit()
        self.finished.emit()
        # drop references to the (possibly large) inputs
        self.fn, self.args, self.kwargs = None, (), {}  # type: ignore[assignment]
        self._release_callbacks()

    def _release_callbacks(self) -> None:
        """A finished task emits nothing more: let go of its callbacks. Qt's connections hold
        them where Python's collector cannot see, and they hold the task (``lambda t=task``)
        and what they captured (a document, a conversion), so a task with callbacks was never
        freed — nor anything its callbacks referred to."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "failed to disconnect": a signal nobody connected
            for signal in (self.progressed, self.partial, self.succeeded, self.failed, self.cancelled,
                           self.finished):
                signal.disconnect()


class _Runnable(QRunnable):
    def __init__(self, task: Task):
        super().__init__()
        self.task = task
        self.setAutoDelete(True)

    def run(self) -> None:
        self.task._run()


#: the interpreter's thread switch interval while tasks may run (seconds; Python's default is 5 ms)
SWITCH_INTERVAL = 0.001


class TaskRunner(QObject):
    """Starts tasks on a thread pool and keeps track of them (one per window).

    Creating one shortens the interpreter's switch interval to :data:`SWITCH_INTERVAL`. Every
    call from Qt into Python in the GUI thread (a slot, an item's ``paint``, a timer) takes the
    interpreter lock, and while a worker runs Python each such call waits until the worker is
    made to let go of it — up to the whole interval. Painting a freshly laid-out graph makes
    hundreds of such calls, so at 5 ms the window stood still for a second at a time while a big
    model converted; at 1 ms the worker hands the lock over sooner (it is only asked to when
    the GUI thread waits for it)."""

    taskStarted = Signal(object)
    taskFinished = Signal(object)
    busyChanged = Signal(bool)
    #: every failure of every task: (task name, exception)
    error = Signal(str, object)

    def __init__(self, parent: QObject | None = None, max_threads: int | None = None):
        super().__init__(parent)
        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
        self.pool = QThreadPool(self)
        if max_threads:
            self.pool.setMaxThreadCount(max_threads)
        self._active: list[Task] = []
        self._groups: dict[str, Task] = {}

    def submit(self, name: str, fn: Callable[..., Any], *args: Any, group: str | None = None,
               on_result: Callable[[Any], None] | None = None,
               on_progress: Callable[[int, int, str], None] | None = None,
               on_partial: Callable[[Any], None] | None = None,
               on_error: Callable[[BaseException], None] | None = None,
               on_finished: Callable[[], None] | None = None,
               report_errors: bool = True, quiet: bool = False, **kwargs: Any) -> Task:
        """Run ``fn(ctx, *args, **kwargs)`` in a worker. Callbacks run in the GUI thread.
        With ``report_errors`` a failure also goes to :attr:`error`; ``quiet`` marks a task too
        short to be worth showing progress for."""
        if group is not None:
            old = self._groups.get(group)
            if old is not None and not old.is_done:
                old.cancel()
        task = Task(name, fn, args, kwargs, group)
        task.quiet = quiet
        if on_result is not None:
            task.succeeded.connect(on_result)
        if on_progress is not None:
            task.progressed.connect(on_progress)
        if on_partial is not None:
            task.partial.connect(on_partial)
        if on_error is not None:
            task.failed.connect(on_error)
        if report_errors:
            task.failed.connect(lambda e, n=name: self.error.emit(n, e))
        if on_finished is not None:
            task.finished.connect(on_finished)
        task.finished.connect(lambda t=task: self._finished(t))
        was_busy = bool(self._active)
        self._active.append(task)
        if group is not None:
            self._groups[group] = task
        task.state = "running"
        self.taskStarted.emit(task)
        if not was_busy:
            self.busyChanged.emit(True)
        log.debug("task %s started", name)
        self.pool.start(_Runnable(task))
        return task

    def _finished(self, task: Task) -> None:
        if task in self._active:
            self._active.remove(task)
        if task.group is not None and self._groups.get(task.group) is task:
            del self._groups[task.group]
        log.debug("task %s %s in %.3fs", task.name, task.state, task.seconds)
        self.taskFinished.emit(task)
        if not self._active:
            self.busyChanged.emit(False)

    @property
    def active(self) -> list[Task]:
        return list(self._active)

    @property
    def busy(self) -> bool:
        return bool(self._active)

    def cancel_all(self) -> None:
        for t in list(self._active):
            t.cancel()

    def wait_idle(self, timeout_ms: int = 60_000) -> bool:
        """Turn the event loop until no task is running (or the timeout). True when idle."""
        if not self._active:
            return True
        loop = QEventLoop()
        self.busyChanged.connect(lambda busy: loop.quit() if not busy else None)
        timer = QTimer()
        timer.setSingleShot(True)
        timer.timeout.connect(loop.quit)
        timer.start(timeout_ms)
        while self._active and timer.isActive():
            loop.exec()
        QCoreApplication.processEvents()
        return not self._active

    def shutdown(self, timeout_ms: int = 5000) -> None:
        """Cancel everything and wait for the threads (on window close)."""
        self.cancel_all()
        self.pool.waitForDone(timeout_ms)

    def stop(self, groups: tuple[str, ...], timeout_ms: int = 5000) -> None:
        """Cancel everything; wait only for the tasks of ``groups`` to end (quitting: an export
        must stop cleanly and replace nothing, a layout or a verification need not finish)."""
        self.cancel_all()
        deadline = time.monotonic() + timeout_ms / 1000
        for t in self.active:
            if t.group in groups:
                t._ended.wait(max(deadline - time.monotonic(), 0.0))
