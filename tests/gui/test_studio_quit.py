"""Quitting is quick (issue 12, item 18): once the window has saved its state, ``pt2ncnn-studio``
ends the process without the interpreter's teardown, which takes seconds once torch was imported
by Verify (``tests/benchmarks/bench_quit.py`` measures it). The real entry point in a
subprocess: open a model, import torch as Verify does, File ▸ Quit."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.gui.conftest import ROOT, TINY_CNN

CHILD = r'''
import atexit, sys
from PySide6.QtCore import QTimer
import gui.app as app
from gui import main_window

atexit.register(lambda: print("TEARDOWN", flush=True))  # runs only on a full interpreter teardown
opened = main_window.MainWindow.open_file


def open_then_quit(self, *args, **kwargs):
    task = opened(self, *args, **kwargs)

    def quit():
        self.wait_settled()
        import torch  # what Verify imports
        print("QUIT", flush=True)
        self.actions.quit.trigger()

    QTimer.singleShot(50, quit)
    return task


main_window.MainWindow.open_file = open_then_quit
sys.exit(app.main([sys.argv[1], "--settings", sys.argv[2]]))
'''


def test_quit_saves_the_state_and_skips_the_interpreter_teardown(tmp_path):
    pytest.importorskip("torch")
    settings = tmp_path / "studio.ini"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    r = subprocess.run([sys.executable, "-c", CHILD, str(TINY_CNN), str(settings)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "QUIT" in r.stdout
    assert "TEARDOWN" not in r.stdout, "the process went through the interpreter's teardown"
    text = settings.read_text()
    assert "geometry" in text and "tiny_cnn.pt2" in text  # the window's state and the recent file were saved
