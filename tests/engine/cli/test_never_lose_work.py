"""``pt2ncnn convert`` never loses work: an existing model is replaced only once every new file
(ncnn and pnnx) is complete; a failed, incomplete or cancelled conversion or export leaves the
old files as they were and no temporary file. Failures are produced for real: a target that is
a folder, an operator the converter does not support, a disk that fills up (a 256 KiB tmpfs in
a private mount namespace), a cancel while writing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import engine
from engine.cli.main import main
from engine.convert import convert
from engine.passes.manager import Cancelled
from tests.fixtures.malformed import MODEL_JSON, json_edit

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "resources" / "samples" / "tiny_cnn.pt2"
SUFFIXES = (".ncnn.param", ".ncnn.bin", ".pnnx.param", ".pnnx.bin")
SCRIPTS = ("_pnnx.py", "_ncnn.py")


def _old_model(folder: Path, stem: str) -> dict[str, bytes]:
    for s in SUFFIXES:
        (folder / f"{stem}{s}").write_bytes(f"old {s}".encode())
    return _listing(folder)


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.name.endswith(".pt2")}


def test_a_failed_pnnx_write_keeps_the_old_ncnn_model_too(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    before = _old_model(out, "m")
    (out / "m.pnnx.bin").unlink()
    (out / "m.pnnx.bin").mkdir()  # the ncnn model is written first; the pnnx .bin cannot be
    before.pop("m.pnnx.bin")
    rc = main(["convert", str(SAMPLE), f"ncnnparam={out / 'm.ncnn.param'}", f"ncnnbin={out / 'm.ncnn.bin'}",
               f"pnnxparam={out / 'm.pnnx.param'}", f"pnnxbin={out / 'm.pnnx.bin'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].endswith(f"{out / 'm.pnnx.bin'}: the path is a folder"), err
    assert _listing(out) == before and sorted(p.name for p in out.iterdir()) == sorted([*before, "m.pnnx.bin"])


def _with_unknown_op(doc: dict) -> None:
    node = next(n for n in doc["graph_module"]["graph"]["nodes"] if n["target"].endswith("relu.default"))
    node["target"] = "torch.ops.aten.no_such_op.default"


def test_an_incomplete_conversion_writes_nothing_and_keeps_the_old_model(tmp_path, capsys):
    src = tmp_path / "block.pt2"  # tiny.pt2 with an operator no converter knows
    src.write_bytes(json_edit(MODEL_JSON, _with_unknown_op)(tmp_path))
    before = _old_model(tmp_path, "block")
    assert main(["convert", str(src)]) == 1
    assert "no model files written" in capsys.readouterr().err
    assert _listing(tmp_path) == before


def test_a_successful_conversion_replaces_all_six_files(tmp_path):
    _old_model(tmp_path, "tiny_cnn")
    for s in SCRIPTS:
        (tmp_path / f"tiny_cnn{s}").write_bytes(b"old script")
    shutil.copy(SAMPLE, tmp_path / "tiny_cnn.pt2")
    assert main(["convert", str(tmp_path / "tiny_cnn.pt2"), "-q"]) == 0
    after = _listing(tmp_path)
    assert sorted(after) == sorted(f"tiny_cnn{s}" for s in SUFFIXES + SCRIPTS)
    assert all(not v.startswith(b"old ") for v in after.values())


def test_cancel_while_writing_keeps_the_old_model(tmp_path):
    before = _old_model(tmp_path, "tiny_cnn")
    calls = []

    def cancel() -> bool:  # let the ncnn model be written entirely, stop in the pnnx one
        calls.append(1)
        return len(calls) > 30

    with engine.load(SAMPLE) as pkg:
        result = convert(pkg)
        with pytest.raises(Cancelled):
            result.write_all(tmp_path, "tiny_cnn", cancel=cancel)
    assert len(calls) > 30 and _listing(tmp_path) == before


def test_disk_full_while_writing_the_pnnx_model_keeps_everything(tmp_path):
    if not shutil.which("unshare") or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("cannot create a private mount namespace for a small tmpfs")
    folder = tmp_path / "small"  # 256 KiB: room for the new ncnn model (~110 KiB), not for the pnnx .bin too
    folder.mkdir()
    script = textwrap.dedent(f"""
        import json, os, sys
        sys.path.insert(0, {str(ROOT)!r})
        folder = {str(folder)!r}
        for s in {SUFFIXES!r}:
            open(os.path.join(folder, "m" + s), "w").write("old " + s)
        from engine.cli.main import main
        rc = main(["convert", {str(SAMPLE)!r}, "ncnnparam=" + folder + "/m.ncnn.param",
                   "ncnnbin=" + folder + "/m.ncnn.bin", "pnnxparam=" + folder + "/m.pnnx.param",
                   "pnnxbin=" + folder + "/m.pnnx.bin"])
        files = {{n: open(os.path.join(folder, n)).read() for n in sorted(os.listdir(folder))}}
        print(json.dumps({{"rc": rc, "files": files}}))
    """)
    mount = f"mount -t tmpfs -o size=256k none {folder} && exec \"$0\" \"$@\""
    r = subprocess.run(["unshare", "-rm", "sh", "-c", mount, sys.executable, "-c", script], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["rc"] == 2
    assert result["files"] == {f"m{s}": f"old {s}" for s in SUFFIXES}
    assert "the disk is full" in r.stderr and "m.pnnx.bin" in r.stderr
