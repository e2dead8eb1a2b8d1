"""Work-arounds for defects of the Qt binding this application runs on.

``PySide6`` 6.12 built for the stable ABI returns ``None`` from void methods without a new
reference when it runs on Python < 3.12 (where ``None`` is not yet immortal). Every call such as
``painter.drawRect(...)`` then lowers ``None``'s reference count by one, and after a few
thousand calls CPython aborts with ``Fatal Python error: none_dealloc``. :func:`apply` detects
the defect with one void call and, only when it is present, gives ``None`` the effectively
unbounded reference count it has on Python 3.12+.
"""
from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_applied = False


def void_call_leaks_none() -> bool:
    """True when a void PySide6 method returns a borrowed ``None``."""
    from PySide6.QtCore import QPointF

    p = QPointF()
    before = sys.getrefcount(None)
    for _ in range(8):
        p.setX(0.0)
    return sys.getrefcount(None) < before


def apply() -> None:
    """Apply the work-around once per process when the defect is present."""
    global _applied
    if _applied or sys.version_info >= (3, 12):
        return
    _applied = True
    if void_call_leaks_none():
        ctypes.c_ssize_t.from_address(id(None)).value += 1 << 48
        log.info("PySide6 returns borrowed None from void methods on this Python; "
                 "made None's reference count unbounded (as on Python 3.12+)")
