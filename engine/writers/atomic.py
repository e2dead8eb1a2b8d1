"""Atomic writing of a *group* of files (``.param`` + ``.bin``): all of them or none.

::

    with atomic_files([param_path, bin_path]) as (param, bin_):
        param.write(b"...")
        bin_.write(b"...")

Every file is written to a temporary file in its target's folder; when the block finishes
without an exception each temporary file is flushed and closed, and only then are they renamed
over the targets (existing targets are kept as hard-linked backups until every rename has
succeeded, and put back if one fails). If the block raises — a write error, a validation
error, a cancel from a progress callback, KeyboardInterrupt — every temporary file is removed
and the old files are untouched. OS errors come out as :class:`engine.errors.WriteError`
naming the target path and a readable reason (permission denied, disk full, ...).

The renames make the files appear whole or not at all; they are not forced to the disk. Inside
:func:`durable_writes` every temporary file and then its folder is also fsynced before the
renames, so the new files survive a power cut once the block returns. That is off by default, as
in pnnx and ``torch.save``: forcing the writeback makes the writing process do it (on an 800 MB
model, 0.6 s of CPU and as much wall time here, more on a slow card) where the kernel would
otherwise write the pages back in the background.

Several groups that make one export (the ncnn model and the pnnx model) are tied together by
:func:`atomic_transaction`: inside it each ``atomic_files`` block only writes (and, durable,
syncs) its temporary files, and the renames of all of them happen when the transaction ends — so a
failure while writing the second model leaves the first model's old files in place too::

    with atomic_transaction():
        write_ncnn(graph, "m.ncnn.param", "m.ncnn.bin")
        write_pnnx(graph, "m.pnnx.param", "m.pnnx.bin")
"""
from __future__ import annotations

import contextlib
import contextvars
import errno
import logging
import os
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

from ..errors import WriteError

log = logging.getLogger(__name__)

_REASONS = {
    errno.ENOSPC: "the disk is full (no space left on device)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied (operation not permitted)",
    errno.EROFS: "the file system is read-only",
    errno.ENOENT: "the folder does not exist",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.EISDIR: "the path is a folder",
    errno.ENAMETOOLONG: "the file name is too long",
    errno.EFBIG: "the file is too large for this file system",
    errno.EIO: "input/output error",
}


def describe_os_error(e: OSError) -> str:
    """A short human reason for an OS error (``permission denied``, ``the disk is full``...)."""
    if e.errno in _REASONS:
        return _REASONS[e.errno]
    return e.strerror or str(e)


def write_error(path: str | os.PathLike, e: OSError) -> WriteError:
    return WriteError(os.fspath(path), describe_os_error(e))


class TempFile:
    """A binary temporary file standing for ``target`` (what the ``with`` block writes to).
    OS errors while writing become :class:`WriteError` naming the target."""

    def __init__(self, target: Path, tmp: Path, fobj: BinaryIO):
        self.target = target
        self.tmp = tmp
        self._f = fobj
        self._pos = 0

    def write(self, data) -> int:
        """Write all of ``data`` (any bytes-like object); the number of bytes written."""
        try:
            n = self._f.write(data)  # a buffered file writes it all and counts bytes, not items
        except OSError as e:
            raise write_error(self.target, e) from e
        self._pos += n
        return n

    def tell(self) -> int:
        """Bytes written so far."""
        return self._pos

    def patch(self, offset: int, data: bytes) -> None:
        """Overwrite bytes already written at ``offset`` (a header field known only once the
        data after it is written); later writes go on at the end."""
        try:
            self._f.seek(offset)
            self._f.write(data)
            self._f.seek(self._pos)
        except OSError as e:
            raise write_error(self.target, e) from e

    def _finish(self) -> None:
        try:
            self._f.flush()
            if _DURABLE.get():
                os.fsync(self._f.fileno())
        except OSError as e:
            raise write_error(self.target, e) from e
        finally:
            self._close()

    def _close(self) -> None:
        try:
            self._f.close()
        except OSError:
            pass


def _file_mode() -> int:
    """The mode a normally created file gets here (0666 minus the umask)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


#: the temporary files' write buffer: small writes (headers, small weights) are gathered up to
#: this size, and a write longer than it goes to the file from the caller's memory. Shorter
#: than the writers' large pieces (a 128 KB chunk of fp16 weights, a weight's bytes in a
#: ``.pnnx.bin``), which a larger buffer would first copy into itself (all 57 MB of ConvNeXt-T's
#: ``.ncnn.bin`` with a 1 MB buffer) and take another 256 pages of fresh memory per file for.
WRITE_BUFFER = 1 << 16


def _open_temp(target: Path, mode: int) -> TempFile:
    folder = target.parent
    if target.is_dir():
        raise WriteError(os.fspath(target), "the path is a folder")
    if not folder.is_dir():
        raise WriteError(os.fspath(target), "the folder does not exist" if not folder.exists()
                         else "a part of the path is not a folder")
    for _ in range(100):
        tmp = folder / f".{target.name}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode)
            break
        except FileExistsError:
            continue
        except OSError as e:
            raise write_error(target, e) from e
    else:  # pragma: no cover - 100 collisions of 32 random bits
        raise WriteError(os.fspath(target), "could not create a temporary file")
    try:
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
    except OSError:
        pass
    return TempFile(target, tmp, os.fdopen(fd, "wb", buffering=WRITE_BUFFER))


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:  # pragma: no cover - nothing better to do
        log.warning("could not remove %s: %s", path, describe_os_error(e))


def _fsync_dir(folder: Path) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _commit(files: list[TempFile]) -> None:
    """Rename every temporary file over its target; on failure put the old files back."""
    backups: dict[Path, Path | None] = {}
    done: list[TempFile] = []
    try:
        for f in files:
            backup = None
            if f.target.exists():
                backup = f.target.parent / f".{f.target.name}.{os.urandom(4).hex()}.bak"
                try:
                    os.link(f.target, backup)
                except OSError:
                    backup = None  # no hard links here: the old file cannot be restored
            backups[f.target] = backup
            try:
                os.replace(f.tmp, f.target)
            except OSError as e:
                raise write_error(f.target, e) from e
            done.append(f)
    except BaseException:
        for f in reversed(done):
            backup = backups.get(f.target)
            try:
                if backup is not None:
                    os.replace(backup, f.target)
                else:
                    os.unlink(f.target)
            except OSError as e:  # pragma: no cover - the disk went away under us
                log.error("could not restore %s: %s", f.target, describe_os_error(e))
        raise
    finally:
        for backup in backups.values():
            if backup is not None:
                _unlink_quietly(backup)
    if _DURABLE.get():
        for folder in {f.target.parent for f in files}:
            _fsync_dir(folder)


#: whether files are fsynced before they are renamed (see :func:`durable_writes`)
_DURABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("durable_writes", default=False)


@contextlib.contextmanager
def durable_writes(enabled: bool = True) -> Iterator[None]:
    """Inside the block, files (and their folders) are fsynced before the renames that publish
    them (``pt2ncnn convert --fsync``)."""
    token = _DURABLE.set(enabled)
    try:
        yield
    finally:
        _DURABLE.reset(token)


#: the finished temporary files of the innermost :func:`atomic_transaction` (None outside one)
_TRANSACTION: contextvars.ContextVar[list[TempFile] | None] = contextvars.ContextVar("atomic_transaction",
                                                                                    default=None)


def _discard(files: list[TempFile]) -> None:
    for f in files:
        f._close()
        _unlink_quietly(f.tmp)


@contextlib.contextmanager
def atomic_files(paths: Sequence[str | os.PathLike]) -> Iterator[list[TempFile]]:
    """Yield one :class:`TempFile` per path (same order); replace the targets only if the block
    completes (inside an :func:`atomic_transaction`: when the transaction completes), leave no
    temporary file behind in any case."""
    targets = [Path(os.path.abspath(os.fspath(p))) for p in paths]
    if len(set(targets)) != len(targets):
        raise WriteError(", ".join(map(str, paths)), "the same file is named twice")
    mode = _file_mode()
    files: list[TempFile] = []
    handed_over = False
    try:
        for t in targets:
            files.append(_open_temp(t, mode))
        yield files
        for f in files:
            f._finish()
        pending = _TRANSACTION.get()
        if pending is None:
            _commit(files)
        else:
            pending.extend(files)
            handed_over = True
    finally:
        if not handed_over:
            _discard(files)


@contextlib.contextmanager
def atomic_transaction() -> Iterator[None]:
    """Tie every :func:`atomic_files` group written in the block together: all their targets
    are replaced when the block completes, none if it raises (see the module docstring)."""
    pending: list[TempFile] = []
    token = _TRANSACTION.set(pending)
    try:
        yield
        _TRANSACTION.reset(token)
        token = None
        targets = [f.target for f in pending]
        if len(set(targets)) != len(targets):
            raise WriteError(", ".join(map(str, targets)), "the same file is named twice")
        _commit(pending)
    finally:
        if token is not None:
            _TRANSACTION.reset(token)
        _discard(pending)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a small text file (a report, a pass snapshot) atomically: the old file stays
    until the new one is complete; errors are :class:`WriteError` naming the path."""
    with atomic_files([path]) as (f,):
        f.write(text.encode("utf-8"))
