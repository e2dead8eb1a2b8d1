"""The console script imports numpy from a shallow frame (``engine.cli.main._import_numpy_here``):
imported deep inside the commands' import chain, CPython 3.11 mapped and unmapped a frame-stack
chunk 600–1,700 times while numpy's typing module loaded. Checked in a fresh interpreter that
runs ``entry()`` as the ``pt2ncnn`` script does, with an import hook that reports how many
Python frames are on the stack when ``numpy`` is first imported."""
import subprocess
import sys
from pathlib import Path

from tests.fixtures.runner import child_env
from tests.ncnn_runtime import load_net

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "resources" / "samples" / "tiny_cnn.pt2"

_PROBE = """
import sys
class _Probe:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            f, depth = sys._getframe(), 0
            while f is not None:
                depth, f = depth + 1, f.f_back
            print(f"depth={depth}", flush=True)
            sys.meta_path.remove(self)
        return None
sys.meta_path.insert(0, _Probe())
sys.argv = ["pt2ncnn", *sys.argv[1:]]
from engine.cli.main import entry
entry()
"""


def _convert_with(probe: str, out) -> str:
    """Run ``probe`` (a script ending in ``entry()``) as ``pt2ncnn convert`` of the sample into
    ``out``; the written model must load in ncnn. Returns what the probe printed."""
    p = subprocess.run([sys.executable, "-c", probe, "convert", str(SAMPLE), "-o", str(out), "-q"],
                       capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    _, rp, rb = load_net(out / "tiny_cnn.ncnn.param", out / "tiny_cnn.ncnn.bin")
    assert (rp, rb) == (0, 0), "the written model does not load in ncnn"
    return p.stdout


def test_numpy_is_imported_from_a_shallow_frame(tmp_path):
    depth = int(_convert_with(_PROBE, tmp_path).split("depth=")[1].split()[0])
    assert depth <= 12, f"numpy first imported {depth} frames deep"


_COLLECTIONS = """
import gc, os, sys
seen = []
gc.callbacks.append(lambda phase, info: phase == "start" and seen.append(info["generation"]))
_exit = os._exit
def report_and_exit(rc):
    print("collections=" + ",".join(map(str, seen)) + ";", flush=True)
    _exit(rc)
os._exit = report_and_exit
sys.argv = ["pt2ncnn", *sys.argv[1:]]
from engine.cli.main import entry
entry()
"""


def test_the_console_script_runs_a_conversion_without_one_collection(tmp_path):
    # importing makes ~80k objects that live on: the collector is off while they are made (it
    # ran 53 times, once over the older generation) and the commands' are frozen after, so no
    # collection walks them; the conversion itself runs without the collector. What is left is
    # a collection of the young objects after `import engine` (which restores the collector for
    # a library caller), one while the CLI module itself loads, and one in the interpreter's start.
    out = _convert_with(_COLLECTIONS, tmp_path)
    seen = [int(g) for g in out.split("collections=")[1].split(";")[0].split(",") if g]
    assert len(seen) <= 3 and set(seen) <= {0}, seen  # before: 53, one of them of generation 1


_TEXT_FORM = """
import os, sys
_exit = os._exit
def report_and_exit(rc):
    print("loaded=" + ",".join(m for m in ("engine.ir.text", "engine.ir.snapshot") if m in sys.modules) + ";", flush=True)
    _exit(rc)
os._exit = report_and_exit
sys.argv = ["pt2ncnn", *sys.argv[1:]]
from engine.cli.main import entry
entry()
"""


def test_a_conversion_without_snapshots_does_not_import_the_text_form(tmp_path):
    # engine.ir imports its text form on first use: 4 M instructions of every run otherwise
    assert _convert_with(_TEXT_FORM, tmp_path).split("loaded=")[1].split(";")[0] == ""
