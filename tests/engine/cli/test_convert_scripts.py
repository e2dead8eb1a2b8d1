"""``pt2ncnn convert`` writes ``<stem>_pnnx.py`` and ``<stem>_ncnn.py`` as pnnx does: by default
beside their models, placed with ``--pnnx-py``/``--ncnn-py`` or ``pnnxpy=``/``ncnnpy=``, none with
``--no-py``; contradictory or unwritable requests fail with one line and write nothing."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "resources" / "samples" / "tiny_cnn.pt2"
MODELS = ["tiny_cnn.ncnn.bin", "tiny_cnn.ncnn.param", "tiny_cnn.pnnx.bin", "tiny_cnn.pnnx.param"]


@pytest.fixture
def sample(tmp_path) -> Path:
    dst = tmp_path / "tiny_cnn.pt2"
    shutil.copy(SAMPLE, dst)
    return dst


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.suffix != ".pt2")


def test_both_scripts_by_default_and_they_run(sample, tmp_path, capsys):
    assert main(["convert", str(sample)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'tiny_cnn_pnnx.py'}" in out and f"wrote {tmp_path / 'tiny_cnn_ncnn.py'}" in out
    assert _names(tmp_path) == sorted(MODELS + ["tiny_cnn_ncnn.py", "tiny_cnn_pnnx.py"])
    pytest.importorskip("torch")
    pytest.importorskip("ncnn")
    code = ("import tiny_cnn_pnnx as p, tiny_cnn_ncnn as n; a = p.test_inference(); b = n.test_inference(); "
            "print(float((a - b).abs().max() / a.abs().max()))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert float(r.stdout.strip().splitlines()[-1]) < 5e-3  # fp16 weights (the default) in ncnn


def test_placed_by_flags_or_pnnx_keys_and_skipped(sample, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert main([str(sample), f"pnnxpy={out / 'a.py'}", f"--ncnn-py={out / 'b.py'}", "-q"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["a.py", "b.py"]
    assert "os.path.join(HERE, 'tiny_cnn.pnnx.bin')" not in (out / "a.py").read_text()  # absolute: elsewhere
    assert repr(str(tmp_path / "tiny_cnn.pnnx.bin")) in (out / "a.py").read_text()
    other = tmp_path / "other"
    assert main(["convert", str(sample), "-o", str(other), "--no-py", "-q"]) == 0
    assert _names(other) == MODELS
    assert main(["convert", str(sample), "-o", str(other), "--no-pnnx", "-q"]) == 0
    assert "tiny_cnn_ncnn.py" in _names(other) and "tiny_cnn_pnnx.py" not in _names(other)


@pytest.mark.parametrize("argv, message", [
    (["--no-py", "--pnnx-py", "x.py"], "--no-py contradicts"),
    (["pnnxpy=x.py", "--no-pnnx"], "loads the .pnnx.bin, which --no-pnnx does not write"),
])
def test_contradictory_requests_are_usage_errors(sample, tmp_path, capsys, argv, message):
    assert main([str(sample), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert _names(tmp_path) == []


def test_an_unwritable_script_path_writes_nothing(sample, tmp_path, capsys):
    (tmp_path / "tiny_cnn.ncnn.param").write_text("old")
    assert main(["convert", str(sample), "--ncnn-py", str(tmp_path / "no" / "such" / "m.py")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {sample}: {tmp_path / 'no' / 'such' / 'm.py'}: the folder does not exist"]
    assert _names(tmp_path) == ["tiny_cnn.ncnn.param"] and (tmp_path / "tiny_cnn.ncnn.param").read_text() == "old"
