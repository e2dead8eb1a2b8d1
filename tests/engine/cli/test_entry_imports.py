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


def test_numpy_is_imported_from_a_shallow_frame(tmp_path):
    p = subprocess.run([sys.executable, "-c", _PROBE, "convert", str(SAMPLE), "-o", str(tmp_path), "-q"],
                       capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    depth = int(p.stdout.split("depth=")[1].split()[0])
    assert depth <= 12, f"numpy first imported {depth} frames deep"
    _, rp, rb = load_net(tmp_path / "tiny_cnn.ncnn.param", tmp_path / "tiny_cnn.ncnn.bin")
    assert (rp, rb) == (0, 0), "the written model does not load in ncnn"
