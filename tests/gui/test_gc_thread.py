"""Cyclic garbage collection runs only in the GUI thread once a window exists: a cycle of Qt
wrappers collected from a worker thread crashes Qt (it did, in a loading worker). Workers hand
the interpreter lock to the GUI thread soon."""
import gc
import sys
import threading

import pytest

import gui  # noqa: F401  (binding work-around first)
from gui.gcpause import gc_paused, install_collector


def _cycle_class(freed: list):
    """A class whose objects are cycles that record, when collected, whether it was in the
    GUI (main) thread."""

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            freed.append(threading.current_thread() is threading.main_thread())

    return Cycle


def test_collector_owns_collection_and_collects_in_the_gui_thread(qtbot):
    collector = install_collector()
    collector.timer.setInterval(20)
    assert not gc.isenabled()
    threads = []
    Cycle = _cycle_class(threads)

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


def test_a_heavy_sections_objects_are_frozen_and_its_garbage_collected_at_a_release(qtbot):
    """More than BIG new objects (what opening or converting a big model leaves) are frozen by
    the timer, not walked; cyclic garbage among them waits for a release, which comes once the
    heap has doubled and runs in the GUI thread."""
    from gui import gcpause

    collector = install_collector()
    gc.unfreeze()
    gc.collect()
    collector.heap_base = 0
    collector.release_pending = False
    collector.timer.setInterval(20)
    freed = []
    Cycle = _cycle_class(freed)

    kept = []

    def heavy(n: int, cycles: int):
        def work():
            with gc_paused():
                kept.append([[i] for i in range(n)])  # long-lived, tracked
                for _ in range(cycles):
                    Cycle()
        t = threading.Thread(target=work)
        t.start()
        t.join()

    try:
        heavy(gcpause.BIG + 50_000, 30)
        qtbot.waitUntil(lambda: gc.get_freeze_count() > gcpause.BIG, timeout=5000)
        base = collector.heap_base
        assert base >= gcpause.BIG and gc.get_count()[0] < gcpause.BIG
        qtbot.wait(100)
        assert freed == [], "frozen garbage waits for a release"
        for _ in range(3):  # switching models: each replaces the last, freed by reference counting
            del kept[-1]
            heavy(gcpause.BIG + 50_000, 0)
            qtbot.waitUntil(lambda: gc.get_count()[0] < gcpause.BIG, timeout=5000)  # frozen
            qtbot.wait(60)
            assert not collector.release_pending and freed == [], "the heap did not grow: no release"
        heavy(base, 20)  # the heap more than doubles (a list and an int each): a release follows
        qtbot.waitUntil(lambda: len(freed) == 50, timeout=5000)
        assert all(freed), "collected in the GUI thread"
        assert not collector.release_pending and collector.heap_base >= 3 * gcpause.BIG
        assert gc.get_freeze_count() >= 3 * gcpause.BIG  # the survivors (what is kept), frozen again
    finally:
        collector.timer.setInterval(1000)
        kept.clear()
        gc.unfreeze()
        collector.heap_base = 0


def test_a_finished_task_lets_go_of_its_callbacks_and_what_they_hold(qtbot):
    """Callbacks like ``lambda r, d=doc: ...`` are held by Qt's connections, out of the
    collector's sight; a finished task drops them, so the document they captured is freed by
    reference counting alone (before, every opened model stayed in memory for good)."""
    import weakref

    from gui.workers import TaskRunner

    class Doc:
        pass

    runner = TaskRunner()
    doc = Doc()
    gone = weakref.ref(doc)
    seen = []
    task = runner.submit("t", lambda ctx, d: d, doc, on_result=lambda r, d=doc: seen.append(r is d),
                         on_progress=lambda *a, d=doc: None, on_finished=lambda d=doc: None)
    with qtbot.waitSignal(task.finished, timeout=5000):
        pass
    assert seen == [True]
    del doc, task
    qtbot.wait(50)
    assert gone() is None, "the document outlived its task"
    runner.pool.waitForDone()


def test_a_task_runner_shortens_the_interpreters_switch_interval(qtbot):
    """Each call from Qt into Python in the GUI thread waits for a busy worker to let go of the
    interpreter lock, up to the switch interval; painting a new graph makes hundreds of them
    (measured by tests/benchmarks/bench_scale.py's "GUI stalls": a 0.6–0.9 s freeze at
    Python's 5 ms, 0.2 s at 1 ms, on the 10k detection DAG)."""
    from gui import workers

    sys.setswitchinterval(0.005)
    try:
        workers.TaskRunner()
        assert sys.getswitchinterval() <= workers.SWITCH_INTERVAL <= 0.001
        sys.setswitchinterval(0.0002)  # shorter already: kept
        workers.TaskRunner()
        assert sys.getswitchinterval() == pytest.approx(0.0002)
    finally:
        sys.setswitchinterval(workers.SWITCH_INTERVAL)
