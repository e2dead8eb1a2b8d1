"""The cyclic garbage collector off while heavy work runs: reading a package, building its
graph, converting, writing, a whole command.

That work allocates many small objects which live on, next to the decoded program and its
graphs, and the collector's full walks of such a heap cost more than the work itself (2.1× on a
10k-node graph's passes, 2.5× on a 1,500-node build; on verifying a 10k-node graph, 4 walks
were 13–29% of the time). Reference counting still frees almost everything at once; cycles
wait for the next collection after.
"""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def no_cyclic_gc(*, restore: bool = True):
    """Automatic collection off inside the block; back on after it if it was on and
    ``restore`` (a console command whose process ends right after passes False: turning it
    back on would only cost one walk of everything the command allocated)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled and restore:
            gc.enable()
