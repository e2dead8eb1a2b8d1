"""A real Studio main window for the benchmarks (offscreen, fresh settings, 1600×1000), and a
10 ms timer whose late ticks show how long the GUI thread was held."""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def studio_window(settings_dir: str | os.PathLike):
    """``(app, window)``: a shown main window whose settings live in ``settings_dir``. Call in
    a fresh process before numpy is imported (as ``pt2ncnn-studio`` starts: OpenBLAS single-
    threaded)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as pt2ncnn-studio's entry sets it
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    assert "numpy" not in sys.modules, "numpy would have started its threads already"
    import gui  # noqa: F401  (the binding work-around first)
    from PySide6.QtWidgets import QApplication

    from gui.main_window import MainWindow
    from gui.settings import Settings

    app = QApplication.instance() or QApplication([])
    settings = Settings.at(Path(settings_dir) / "studio.ini")
    settings.mark_first_run_done()
    w = MainWindow(settings, restore_state=False)
    w.resize(1600, 1000)
    w.show()
    app.processEvents()
    return app, w


class Ticker:
    """A 10 ms timer in the GUI thread; :meth:`gaps` are the waits between its ticks (a long
    one: the window stood still that long)."""

    def __init__(self):
        from PySide6.QtCore import QTimer

        self.ticks: list[float] = []
        self._timer = QTimer()
        self._timer.setInterval(10)
        self._timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))

    def start(self) -> float:
        self.ticks.clear()
        self._timer.start()
        return time.perf_counter()

    def stop(self) -> None:
        self._timer.stop()

    def gaps(self, since: float, until: float | None = None) -> list[float]:
        until = time.perf_counter() if until is None else until
        ticks = [t for t in self.ticks if since <= t <= until]
        return [b - a for a, b in zip([since, *ticks], [*ticks, until])]


def temp_settings_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="pt2ncnn-bench-studio-")
