"""Which collections the cyclic garbage collector ran while a block ran (for tests of code that
keeps it out of heavy work)."""
from __future__ import annotations

import contextlib
import gc
import sys
from types import FrameType
from typing import Callable


@contextlib.contextmanager
def collections_during(inside: Callable[[FrameType], bool] | None = None):
    """Yields the list of generations collected in the block, in order; with ``inside``, only
    collections that started while a frame it accepts was on the stack."""
    seen: list[int] = []

    def count(phase, info):
        if phase != "start":
            return
        f = sys._getframe(1)
        while inside is not None and f is not None and not inside(f):
            f = f.f_back
        if inside is None or f is not None:
            seen.append(info["generation"])

    gc.callbacks.append(count)
    try:
        yield seen
    finally:
        gc.callbacks.remove(count)
