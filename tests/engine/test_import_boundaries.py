"""The engine's import boundary: importing every engine module (a fresh interpreter) loads
neither Qt, pyqtgraph nor the GUI, nor torch or ncnn (those only inside a verification run;
see tests/engine/verify/test_torch_free.py)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import importlib, pkgutil, sys
import engine
names = [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")]
for name in names:
    importlib.import_module(name)
banned = {"PySide6", "shiboken6", "pyqtgraph", "gui", "torch", "ncnn"}
print(len(names), sorted({m.split(".")[0] for m in sys.modules} & banned))
"""


def test_importing_every_engine_module_loads_no_gui_qt_torch_or_ncnn():
    p = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    count, loaded = p.stdout.split(" ", 1)
    assert int(count) > 100 and loaded.strip() == "[]", p.stdout
