"""Cyclic garbage collection in the GUI: only ever in the GUI thread, never during heavy work.

Python's cyclic collector runs in whichever thread happens to allocate when a threshold is
crossed. A cycle that holds Qt wrapper objects (graph items, models, signals' closures) being
destroyed from a worker thread crashes Qt — seen as a segfault "Garbage-collecting" inside a
loading worker. So, as pyqtgraph recommends, the app turns automatic collection off and
collects on a timer in the GUI thread (:func:`install_collector`, started by the main
window). Reference counting still frees almost everything at once; the timer only picks up
cycles.

:func:`gc_paused` marks heavy sections (loading, converting, laying out, building thousands of
scene items): while any is running the timer skips its collection, because a full collection
walks every object while holding the GIL and, with a large heap (a model's IR, or torch
imported next to us), stalls the GUI for a tenth of a second. Nested and concurrent sections
(several worker threads) are counted. Both parts are safe to use without a QApplication
(then nothing is collected automatically until the section ends, as before).

What a heavy section leaves is mostly long-lived (a 10k-node model opened and converted:
2.3 million new objects, 412 of them cyclic garbage), and walking it stalled the GUI for a
second — at the first collection after it, and again each time those objects reached the next
generation. So when the timer finds more than :data:`BIG` new objects it freezes them
(``gc.freeze``: later collections skip them) instead of walking them. The garbage among frozen
objects (a replaced document's or conversion's cycles) is collected by a *release*: once the
heap has doubled since the last one, the next tick unfreezes everything, collects in full (one
stall, as large as the heap) and freezes what survives. The heap is measured as Python's
allocated blocks (``sys.getallocatedblocks``, 1 ms), not as the frozen objects
(``gc.get_freeze_count`` walks them all: 70 ms with torch imported); what reference counting
frees (a replaced model, mostly) leaves it, so switching between models does not grow it.
"""
from __future__ import annotations

import contextlib
import gc
import sys
import threading

_lock = threading.Lock()
_count = 0
_was_enabled = True
_collector = None  #: the GUI-thread collector, once installed
#: new objects (generation 0) above which the timer freezes instead of collecting
BIG = 200_000


@contextlib.contextmanager
def gc_paused():
    global _count, _was_enabled
    with _lock:
        if _count == 0 and _collector is None:
            _was_enabled = gc.isenabled()
            gc.disable()
        _count += 1
    try:
        yield
    finally:
        with _lock:
            _count -= 1
            if _count == 0 and _collector is None and _was_enabled:
                gc.enable()


def paused() -> bool:
    return _count > 0


def install_collector(interval_ms: int = 1000):
    """Disable automatic collection and collect from a timer in the GUI thread instead
    (idempotent; needs a QApplication). Returns the collector object."""
    global _collector
    if _collector is not None:
        return _collector
    from PySide6.QtCore import QObject, QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        raise RuntimeError("install_collector needs a QApplication")

    class _Collector(QObject):
        def __init__(self):
            super().__init__(app)
            self.threshold = gc.get_threshold()
            self.heap_base = 0  #: allocated blocks after the last release (0: none yet)
            self.release_pending = False
            self.timer = QTimer(self)
            self.timer.timeout.connect(self.check)
            self.timer.start(interval_ms)
            # quitting: no collection of the whole heap (a third of a second with torch loaded)
            app.aboutToQuit.connect(self.timer.stop)

        def check(self) -> None:
            if paused():
                return
            if self.release_pending:
                self.release()
                return
            c0, c1, c2 = gc.get_count()
            if c0 > BIG:  # a heavy section's results: frozen, not walked
                gc.freeze()
                heap = sys.getallocatedblocks()
                if not self.heap_base:
                    self.heap_base = heap
                elif heap > 2 * self.heap_base:
                    self.release_pending = True
                return
            if c0 > self.threshold[0]:
                gc.collect(0)
                if c1 > self.threshold[1]:
                    gc.collect(1)
                    if c2 > self.threshold[2]:
                        gc.collect(2)

        def release(self) -> None:
            """Unfreeze, collect everything, freeze the survivors (see the module docstring)."""
            self.release_pending = False
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.heap_base = sys.getallocatedblocks()

    with _lock:
        gc.disable()
        _collector = _Collector()
    return _collector
