"""Cyclic garbage collection runs only in the GUI thread once a window exists: a cycle of Qt
wrappers collected from a worker thread crashes Qt (it did, in a loading worker)."""
import gc
import threading

import gui  # noqa: F401  (binding work-around first)
from gui.gcpause import gc_paused, install_collector


def test_collector_owns_collection_and_collects_in_the_gui_thread(qtbot):
    collector = install_collector()
    collector.timer.setInterval(20)
    assert not gc.isenabled()
    threads = []

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            threads.append(threading.current_thread() is threading.main_thread())

    def worker():
        with gc_paused():
            for _ in range(50):
                Cycle()
            for _ in range(100_000):  # enough allocations to cross every automatic threshold
                [[]]

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert not gc.isenabled(), "a worker's paused section must not switch automatic collection back on"
    assert threads == [], "nothing may be collected in the worker thread"
    saved = collector.threshold
    collector.threshold = (0, 0, 0)
    try:
        qtbot.waitUntil(lambda: len(threads) == 50, timeout=5000)
    finally:
        collector.threshold = saved
        collector.timer.setInterval(1000)
    assert all(threads)
