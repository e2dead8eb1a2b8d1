"""Cyclic garbage collection paused while work runs (:func:`gc_paused`), shared by the
workers and the layout; pure Python.

A full collection walks every object of the process while holding the GIL; with a large heap
(a model's IR, or torch imported next to us) that stalls the GUI thread for a tenth of a second
at a time, and loading, converting and laying out allocate enough to trigger many. Reference
counting still frees almost everything; the cycles left are collected once the last paused
section ends. Nested and concurrent sections (several worker threads) are counted.
"""
from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_count = 0
_was_enabled = True


@contextlib.contextmanager
def gc_paused():
    global _count, _was_enabled
    with _lock:
        if _count == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _count += 1
    try:
        yield
    finally:
        with _lock:
            _count -= 1
            if _count == 0 and _was_enabled:
                gc.enable()
