"""The engine, the converter and the verify module's import never import torch or ncnn: they are
imported only when a verification runs (the ``verify`` extra)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "resources" / "samples" / "tiny_cnn.pt2"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_convert_and_importing_verify_never_import_torch_or_ncnn():
    code = f"""
import sys
import engine, engine.verify, engine.cli.main, engine.cli.verify_cmd
from engine.convert import ConvertOptions, convert
result = convert({str(SAMPLE)!r}, ConvertOptions())
assert result.ok, result.errors
engine.cli.main._load_commands()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "ncnn"))
print(loaded)
assert not loaded, loaded
"""
    p = _run(code)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("missing", ["torch", "ncnn"])
def test_verify_without_torch_or_ncnn_raises_missing_dependency(missing):
    code = f"""
import sys
sys.modules[{missing!r}] = None  # as if not installed: import raises ImportError
from engine.verify import MissingDependency, verify
try:
    verify({str(SAMPLE)!r})
except MissingDependency as e:
    print(e)
else:
    raise SystemExit("no MissingDependency")
"""
    p = _run(code)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"verify needs {missing}, which is not installed" in p.stdout
    assert "pip install ncnn torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu" in p.stdout
