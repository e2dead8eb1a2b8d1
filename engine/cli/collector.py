"""The cyclic garbage collector off while a command runs."""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_off(args):
    """Cyclic garbage collection off for the command: converting and verifying allocate many
    small objects that live until the end, and the collector's full walks over them only cost
    time (``pt2ncnn verify`` of a 10k-node graph ran 4 of them, 13–29% of its time, for no
    memory back). In the console script (``args.exiting``) the process ends right after, so the
    collector is left off; a caller that goes on gets its setting back."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled and not getattr(args, "exiting", False):
            gc.enable()
