"""Studio export never loses work, and faults never take the window down.

* a failing export (a folder where the pnnx .bin goes) is shown in a dialog, the old model
  files stay as they were, no temporary file is left, and the next export works; so too for a
  model heavy enough that its ncnn and pnnx files are written on two threads;
* a cancelled export (cancelled before it started, or while it writes) replaces nothing;
* an uncaught exception in a Qt slot and in a worker-side Python thread is logged and shown,
  and the window keeps working.
"""
from __future__ import annotations

import logging
import threading
import zipfile

import pytest
from tests.gui.conftest import TINY_CNN, open_model
from tests.ncnn_runtime import load_net

from engine.convert.parallel import worth_parallel
from engine.passes.manager import Cancelled as EngineCancelled
from gui.main_window import _write_files, export_paths
from gui.workers import Task, TaskContext

SUFFIXES = (".ncnn.param", ".ncnn.bin", ".pnnx.param", ".pnnx.bin")


def _old_model(folder, stem="m") -> dict[str, bytes]:
    for s in SUFFIXES:
        (folder / f"{stem}{s}").write_bytes(f"old {s}".encode())
    return _files(folder)


def _files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _export_fails_then_works(window, qtbot, folder) -> None:
    """Export onto an old model whose .pnnx.bin path is a folder: the failure is shown, every old
    file stays as it was and no temporary file is left; then an export to ``ok.*`` works."""
    before = _old_model(folder)
    (folder / "m.pnnx.bin").unlink()
    (folder / "m.pnnx.bin").mkdir()
    before.pop("m.pnnx.bin")
    task = window.export_to(str(folder / "m.ncnn.param"), pnnx=True)
    assert window.wait_settled() and task.state == "failed"
    qtbot.waitUntil(lambda: bool(window.reporter.dialogs), timeout=5000)
    assert window.reporter.history[-1] == ("Export failed", f"{folder / 'm.pnnx.bin'}: the path is a folder")
    assert _files(folder) == before  # the ncnn model was written, then not put in place
    window.reporter.dismiss_all()
    task = window.export_to(str(folder / "ok.ncnn.param"), pnnx=True)
    assert window.wait_settled() and task.state == "done", task.error
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("ok.")) == sorted(f"ok{s}" for s in SUFFIXES)


def test_a_failed_export_is_shown_keeps_the_old_model_and_the_next_export_works(window, qtbot, tmp_path):
    open_model(window, TINY_CNN)
    _export_fails_then_works(window, qtbot, tmp_path)


def test_a_heavy_model_exports_on_two_threads_and_a_failure_still_keeps_the_old_model(window, exported, qtbot,
                                                                                      tmp_path):
    open_model(window, exported("heavy_linear"))
    assert worth_parallel(window.doc.conversion.result.ncnn)  # Export writes both models side by side
    _export_fails_then_works(window, qtbot, tmp_path)
    _, rp, rb = load_net(tmp_path / "ok.ncnn.param", tmp_path / "ok.ncnn.bin")
    assert (rp, rb) == (0, 0)
    with zipfile.ZipFile(tmp_path / "ok.pnnx.bin") as z:
        assert z.testzip() is None and len(z.namelist()) == 6  # three weights and three biases, CRCs right


def test_an_export_of_a_weight_holding_nan_warns_in_problems_and_status(window, exported, tmp_path):
    open_model(window, exported("nan_weight"))
    assert window.problems.model.rowCount() == 0
    task = window.export_to(str(tmp_path / "m.ncnn.param"), pnnx=False)
    assert window.wait_settled() and task.state == "done", task.error
    rows = [d for d in window.problems.model.items if d.severity == "warning"]
    assert len(rows) == 1 and "1 NaN" in rows[0].reason and rows[0].module == "conv", rows
    assert "1 weight warning(s)" in window.status_label.text()
    assert "1 warning" in window.problems.summary.text()


def test_an_export_cancelled_before_it_starts_writes_nothing(window, tmp_path):
    open_model(window, TINY_CNN)
    before = _old_model(tmp_path)
    release = threading.Event()
    window.runner.pool.setMaxThreadCount(1)
    blocker = window.runner.submit("block", lambda ctx: release.wait(30))
    try:
        task = window.export_to(str(tmp_path / "m.ncnn.param"), pnnx=True)
        task.cancel()
    finally:
        release.set()
    assert window.wait_settled() and blocker.state == "done" and task.state == "cancelled"
    assert _files(tmp_path) == before
    assert not window.reporter.history


def test_an_export_cancelled_while_writing_replaces_nothing(window, tmp_path):
    """The export function itself, with the context a cancelled task gives it."""
    open_model(window, TINY_CNN)
    before = _old_model(tmp_path)
    task = Task("Export", _write_files, (), {})
    task.cancel()
    with pytest.raises(EngineCancelled):
        _write_files(TaskContext(task), window.doc.conversion.result, export_paths(str(tmp_path / "m.ncnn.param")),
                     True, False)
    assert _files(tmp_path) == before


def test_an_exception_in_a_python_thread_is_logged_and_the_window_survives(window, qtbot, caplog):
    open_model(window, TINY_CNN)
    window.reporter.install_hooks()
    try:
        with caplog.at_level(logging.ERROR, logger="gui.errors"):
            t = threading.Thread(target=lambda: 1 / 0, name="stray-thread")
            t.start()
            t.join()
        assert any("stray-thread" in r.getMessage() and r.exc_info and r.exc_info[0] is ZeroDivisionError
                   for r in caplog.records)
    finally:
        window.reporter.uninstall_hooks()
    window.aten_panel.select(["conv2d"], emit=True)
    assert window.inspector.current == ("aten", "conv2d")


def test_an_exception_in_a_slot_is_logged_with_its_traceback(window, qtbot, caplog):
    open_model(window, TINY_CNN)
    window.reporter.install_hooks()
    try:
        def broken_slot():
            raise KeyError("a bug in a slot")

        window.actions.fit.triggered.connect(broken_slot)
        with caplog.at_level(logging.ERROR, logger="gui.errors"):
            window.actions.fit.trigger()
            qtbot.waitUntil(lambda: bool(window.reporter.dialogs), timeout=5000)
        assert window.isVisible()
        assert any("KeyError" in r.getMessage() and "broken_slot" in r.getMessage() for r in caplog.records)
        assert "Unexpected error" in window.reporter.dialogs[-1].informativeText()
    finally:
        window.reporter.uninstall_hooks()
        window.actions.fit.triggered.disconnect(broken_slot)
    window.reporter.dismiss_all()
    window.actions.fit.trigger()  # the same action works again
    assert window.isVisible()
