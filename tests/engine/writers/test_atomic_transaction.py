"""Atomic transactions: the file groups of one export (ncnn model + pnnx model) replace their
targets together — a failure while writing the second group leaves the first group's old
files in place too, and no temporary file anywhere."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import WriteError
from engine.writers import atomic_files, atomic_transaction


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _old(folder: Path) -> dict[str, bytes]:
    for name in ("a.param", "a.bin", "b.param", "b.bin"):
        (folder / name).write_bytes(b"old " + name.encode())
    return _files(folder)


def _write(folder: Path, stem: str, fail_after: bool = False) -> None:
    with atomic_files([folder / f"{stem}.param", folder / f"{stem}.bin"]) as (p, b):
        p.write(b"new param")
        b.write(b"new bin")
        if fail_after:
            raise RuntimeError("the second model failed")


def test_both_groups_are_replaced_when_the_transaction_completes(tmp_path):
    _old(tmp_path)
    with atomic_transaction():
        _write(tmp_path, "a")
        assert (tmp_path / "a.param").read_bytes() == b"old a.param"  # not yet: the transaction is open
        _write(tmp_path, "b")
    assert _files(tmp_path) == {"a.bin": b"new bin", "a.param": b"new param", "b.bin": b"new bin",
                                "b.param": b"new param"}


def test_a_failure_in_the_second_group_keeps_the_first_groups_old_files(tmp_path):
    before = _old(tmp_path)
    with pytest.raises(RuntimeError, match="second model"):
        with atomic_transaction():
            _write(tmp_path, "a")
            _write(tmp_path, "b", fail_after=True)
    assert _files(tmp_path) == before


def test_a_failure_after_the_groups_keeps_everything(tmp_path):
    before = _old(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with atomic_transaction():
            _write(tmp_path, "a")
            _write(tmp_path, "b")
            raise KeyboardInterrupt
    assert _files(tmp_path) == before


def test_the_same_target_in_two_groups_is_refused(tmp_path):
    before = _old(tmp_path)
    with pytest.raises(WriteError, match="named twice"):
        with atomic_transaction():
            _write(tmp_path, "a")
            _write(tmp_path, "a")
    assert _files(tmp_path) == before


def test_groups_outside_a_transaction_still_commit_on_their_own(tmp_path):
    _old(tmp_path)
    with atomic_transaction():
        pass
    _write(tmp_path, "a")
    assert (tmp_path / "a.param").read_bytes() == b"new param"
