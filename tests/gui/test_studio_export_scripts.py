"""Studio's export offers the Python scripts: File ▸ "Also write Python scripts" adds
``<stem>_ncnn.py`` (and, with the pnnx files, ``<stem>_pnnx.py``) to the export, remembered in
the settings; the written script runs the exported ncnn model."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests.gui.conftest import TINY_CNN, open_model


def _names(window) -> list[str]:
    return sorted(os.path.basename(f) for f in window.last_export)


def test_the_file_menu_adds_the_scripts_to_the_export(window, tmp_path, settings):
    open_model(window, TINY_CNN)
    action = window.actions.write_py
    file_menu = window.menuBar().actions()[0].menu()
    assert action in file_menu.actions() and not action.isChecked()
    task = window.export_to(str(tmp_path / "a.ncnn.param"), pnnx=True)
    assert window.wait_settled() and task.state == "done", task.error
    assert _names(window) == ["a.ncnn.bin", "a.ncnn.param", "a.pnnx.bin", "a.pnnx.param"]

    action.trigger()  # as a click on the menu entry does
    assert action.isChecked() and settings.get("export/python", False, bool)
    task = window.export_to(str(tmp_path / "m.ncnn.param"), pnnx=True)
    assert window.wait_settled() and task.state == "done", task.error
    assert _names(window) == ["m.ncnn.bin", "m.ncnn.param", "m.pnnx.bin", "m.pnnx.param", "m_ncnn.py", "m_pnnx.py"]
    task = window.export_to(str(tmp_path / "n.ncnn.param"), pnnx=False)  # no .pnnx.bin: no _pnnx.py
    assert window.wait_settled() and task.state == "done", task.error
    assert _names(window) == ["n.ncnn.bin", "n.ncnn.param", "n_ncnn.py"]

    pytest.importorskip("torch")
    pytest.importorskip("ncnn")
    r = subprocess.run([sys.executable, "n_ncnn.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "tensor(" in r.stdout, r.stderr[-2000:]
