"""Atomic group writes: both files or neither, the old model intact on any failure or cancel,
no temporary file left, and clear errors for permission problems and a full disk (both
produced for real: a folder we may not write to, a 64 KiB tmpfs)."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from engine.errors import WriteError
from engine.writers import atomic_files, write_ncnn
from engine.writers.atomic import WRITE_BUFFER, describe_os_error
from engine.writers.ncnn_bin import CHUNK

from tests.engine.writers.ncnn_graphs import NetBuilder

REPO = Path(__file__).resolve().parents[3]


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _old_model(folder: Path) -> tuple[Path, Path]:
    param, bin_ = folder / "m.ncnn.param", folder / "m.ncnn.bin"
    param.write_text("old param")
    bin_.write_bytes(b"old bin")
    return param, bin_


def _net(n_layers: int = 3) -> NetBuilder:
    b = NetBuilder()
    h = b.input("in0", (8,))
    for k in range(n_layers):
        h = b.layer("InnerProduct", [h], name=f"fc{k}", num_output=8, weight_data_size=64,
                    weights={"weight_data": np.ones((8, 8), np.float32)})
    return b


def test_a_chunk_of_fp16_weights_is_longer_than_the_write_buffer():
    """The temporary file writes such a chunk from the writer's memory (a buffered file copies
    a write no longer than its buffer into the buffer first)."""
    assert 2 * CHUNK > WRITE_BUFFER


def test_group_replaces_existing_files(tmp_path):
    param, bin_ = _old_model(tmp_path)
    with atomic_files([param, bin_]) as (p, b):
        p.write(b"new param")
        b.write(b"new bin")
        assert param.read_text() == "old param"  # not replaced before the block ends
    assert param.read_text() == "new param" and bin_.read_bytes() == b"new bin"
    assert _files(tmp_path) == ["m.ncnn.bin", "m.ncnn.param"]


def test_failure_inside_the_block_keeps_the_old_model(tmp_path):
    param, bin_ = _old_model(tmp_path)
    with pytest.raises(RuntimeError):
        with atomic_files([param, bin_]) as (p, b):
            p.write(b"new param")
            b.write(b"half")
            raise RuntimeError("boom")
    assert param.read_text() == "old param" and bin_.read_bytes() == b"old bin"
    assert _files(tmp_path) == ["m.ncnn.bin", "m.ncnn.param"]


class Cancelled(Exception):
    pass


def test_cancel_from_progress_leaves_nothing(tmp_path):
    param, bin_ = _old_model(tmp_path)
    seen = []

    def progress(done, total):
        seen.append((done, total))
        if done == 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        write_ncnn(_net().g, param, bin_, progress=progress)
    assert seen == [(1, 4), (2, 4)]
    assert param.read_text() == "old param" and _files(tmp_path) == ["m.ncnn.bin", "m.ncnn.param"]
    write_ncnn(_net().g, tmp_path / "new.param", tmp_path / "new.bin")
    assert "new.param" in _files(tmp_path) and not any(n.endswith(".tmp") for n in _files(tmp_path))


def test_failed_rename_puts_the_old_files_back(tmp_path):
    param, _ = _old_model(tmp_path)
    blocker = tmp_path / "x.bin"
    with pytest.raises(WriteError, match="x.bin: the path is a folder|x.bin: .*(directory|folder)"):
        with atomic_files([param, blocker]) as (p, b):
            p.write(b"new param")
            b.write(b"new bin")
            blocker.mkdir()  # appears before the commit: renaming onto it fails
            (blocker / "keep").write_text("x")
    assert param.read_text() == "old param"
    assert _files(tmp_path) == ["m.ncnn.bin", "m.ncnn.param", "x.bin"]


def test_new_files_are_removed_when_a_later_rename_fails(tmp_path):
    first, blocker = tmp_path / "a.param", tmp_path / "a.bin"
    with pytest.raises(WriteError):
        with atomic_files([first, blocker]) as (p, b):
            p.write(b"p")
            blocker.mkdir()
            (blocker / "keep").write_text("x")
    assert _files(tmp_path) == ["a.bin"]


@pytest.mark.parametrize("paths, match", [
    (["missing/a.param", "missing/a.bin"], "missing/a.param: the folder does not exist"),
    (["a.param", "a.param"], "the same file is named twice"),
])
def test_bad_targets(paths, match, tmp_path):
    with pytest.raises(WriteError, match=match):
        with atomic_files([tmp_path / p for p in paths]):
            pass
    assert _files(tmp_path) == []


def test_describe_os_error():
    assert describe_os_error(OSError(errno.ENOSPC, "x")) == "the disk is full (no space left on device)"
    assert describe_os_error(OSError(errno.EACCES, "x")) == "permission denied"
    assert describe_os_error(OSError(errno.EROFS, "x")) == "the file system is read-only"
    assert describe_os_error(OSError(errno.EXDEV, "Invalid cross-device link")) == "Invalid cross-device link"


def _run_child(code: str, *, prefix: list[str] = ()) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    script = f"import sys, json; sys.path.insert(0, {str(REPO)!r})\n" + textwrap.dedent(code)
    r = subprocess.run([*prefix, sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    if r.returncode != 0 or not r.stdout.strip():
        pytest.fail(f"child failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_permission_denied_names_the_path(tmp_path):
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"pt2ncnn-ro-{os.getpid()}"
    folder.mkdir()
    try:
        (folder / "m.ncnn.param").write_text("old")
        folder.chmod(0o555)
        # as root, leave the initial user namespace first so the folder's mode applies to us
        result = _run_child(f"""
            import ctypes, os
            from engine.writers import write_ncnn
            from engine.errors import WriteError
            from tests.engine.writers.ncnn_graphs import NetBuilder
            b = NetBuilder(); b.layer("ReLU", [b.input("in0", (4,))], name="out0")
            if os.geteuid() == 0 and ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:
                print(json.dumps({{"skip": "cannot leave the root user namespace"}})); sys.exit(0)
            try:
                write_ncnn(b.g, {str(folder / 'm.ncnn.param')!r}, {str(folder / 'm.ncnn.bin')!r})
                print(json.dumps({{"error": None}}))
            except WriteError as e:
                print(json.dumps({{"error": str(e), "path": e.path, "reason": e.reason}}))
        """)
    finally:
        folder.chmod(0o755)
        listing = _files(folder)
        old = (folder / "m.ncnn.param").read_text()
        shutil.rmtree(folder)
    if "skip" in result:
        pytest.skip(result["skip"])
    assert result["path"] == str(folder / "m.ncnn.param") and result["reason"] == "permission denied"
    assert listing == ["m.ncnn.param"] and old == "old"


def test_disk_full_is_reported_and_cleaned_up(tmp_path):
    if not shutil.which("unshare") or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("cannot create a private mount namespace for a small tmpfs")
    folder = str(tmp_path / "small")  # a 64 KiB tmpfs over it, visible to the child only
    os.mkdir(folder)
    mount = f"mount -t tmpfs -o size=64k none {folder} && exec \"$0\" \"$@\""
    result = _run_child(f"""
        import os
        import numpy as np
        from engine.writers import write_ncnn
        from engine.errors import WriteError
        from tests.engine.writers.ncnn_graphs import NetBuilder
        open({folder!r} + "/m.ncnn.param", "w").write("old")
        b = NetBuilder(); h = b.input("in0", (256,))
        b.layer("InnerProduct", [h], name="out0", num_output=256, weight_data_size=65536,
                weights={{"weight_data": np.ones((256, 256), np.float32)}})
        try:
            write_ncnn(b.g, {folder!r} + "/m.ncnn.param", {folder!r} + "/m.ncnn.bin", fp16=False)
            err = None
        except WriteError as e:
            err = [e.path, e.reason]
        print(json.dumps({{"error": err, "files": sorted(os.listdir({folder!r})),
                          "old": open({folder!r} + "/m.ncnn.param").read()}}))
    """, prefix=["unshare", "-rm", "sh", "-c", mount])
    assert result["error"] == [f"{folder}/m.ncnn.bin", "the disk is full (no space left on device)"]
    assert result["files"] == ["m.ncnn.param"] and result["old"] == "old"
