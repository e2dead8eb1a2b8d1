"""A validating, memory-mapped zip reader for ``.pt2`` packages and ``torch.save`` payloads.

Holds :class:`MemberInfo` (one central-directory entry) and :class:`ZipArchive`, which parses
the central directory itself (ZIP64 included) so it knows where each member's data starts and
can hand out zero-copy views of stored members. Everything read from the file is validated
before it is trusted: member names (no absolute paths, ``..`` or NUL), duplicates, members that
overlap each other or the central directory, sizes past the end of the file, unsupported
compression or encryption. Deflated members are inflated in bounded chunks after their declared
size and compression ratio have been checked, so a decompression bomb is refused before any
large allocation. A member's CRC-32 is checked the first time its data is read.
"""
from __future__ import annotations

import logging
import mmap
import os
import re
import struct
import zlib
from typing import NamedTuple

from engine.errors import PT2FormatError

from . import verified

log = logging.getLogger(__name__)

#: Most members accepted in one archive (a ViT has ~200, a huge LLM a few thousand).
MAX_MEMBERS = 200_000
#: Largest member that will ever be inflated into memory.
MAX_INFLATED_BYTES = 4 << 30
#: Largest ratio (uncompressed / compressed) accepted for a big deflated member.
MAX_RATIO = 200
#: Members below this size may have any ratio deflate can produce (zero-filled buffers do).
RATIO_EXEMPT_BYTES = 64 << 20
#: Deflate cannot expand more than ~1032:1; a larger declared ratio is a lie.
DEFLATE_MAX_RATIO = 1040

STORED, DEFLATED = 0, 8
_EOCD_SIG = b"PK\x05\x06"
_EOCD64_LOC_SIG = b"PK\x06\x07"
_EOCD64_SIG = b"PK\x06\x06"
_CDIR_SIG = b"PK\x01\x02"
_LOCAL_SIG = b"PK\x03\x04"
_EOCD = struct.Struct("<4sHHHHIIH")
_EOCD64_LOC = struct.Struct("<4sIQI")
_EOCD64 = struct.Struct("<4sQHHIIQQQQ")
_CDIR = struct.Struct("<4sHHHHHHIIIHHHHHII")
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_U32_MAX = 0xFFFFFFFF
_U16_MAX = 0xFFFF


class MemberInfo(NamedTuple):
    """One zip member as listed in the central directory.

    ``offset`` is where the member's (possibly compressed) data starts in the archive buffer,
    ``size`` its uncompressed size, ``compressed_size`` its size in the file, ``method`` 0
    (stored) or 8 (deflated), ``crc`` the CRC-32 of the uncompressed data. ``header_offset`` is
    the offset of its local header and ``flags`` the general-purpose bit flags."""

    name: str
    offset: int
    size: int
    compressed_size: int
    method: int
    crc: int
    header_offset: int = 0
    flags: int = 0

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")


class ZipArchive:
    """A zip archive over a buffer (usually a read-only ``mmap`` of the whole file).

    ``label`` is the name used in error messages for container-level problems (the file path,
    or ``outer.pt2:member`` for a zip nested in a stored member). Members are looked up by their
    full name. Use :meth:`open` for a file on disk and :meth:`from_buffer` for a nested zip.
    """

    def __init__(self, buffer, label: str, *, owner=None):
        self._buf = memoryview(buffer).cast("B") if not isinstance(buffer, memoryview) else buffer
        self.label = label
        self._owner = owner  # the mmap/file kept alive while we exist
        self.closed = False
        self._verified: set[str] = set()
        self._inflated: dict[str, bytes] = {}
        self._address: int | None = None  #: where the buffer starts in memory, once known
        self.members: list[MemberInfo] = []
        self._by_name: dict[str, MemberInfo] = {}
        self._parse()

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(cls, path: str | os.PathLike) -> "ZipArchive":
        """Memory-map ``path`` read-only and parse its central directory."""
        label = os.fspath(path)
        if not label:
            raise PT2FormatError("<empty path>", "no file name given")
        try:
            f = open(label, "rb")
        except FileNotFoundError:
            raise PT2FormatError(label, "no such file") from None
        except IsADirectoryError:
            raise PT2FormatError(label, "is a directory, not a .pt2 file") from None
        except OSError as e:
            raise PT2FormatError(label, f"cannot open: {e.strerror or e}") from None
        try:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise PT2FormatError(label, "empty file (0 bytes), not a zip archive")
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except PT2FormatError:
            f.close()
            raise
        except (OSError, ValueError) as e:
            f.close()
            raise PT2FormatError(label, f"cannot memory-map the file: {e}") from None
        f.close()  # the mapping stays valid without the descriptor
        try:
            return cls(memoryview(mm), label, owner=mm)
        except BaseException:
            _close_mmap(mm)
            raise

    @classmethod
    def from_buffer(cls, buffer, label: str) -> "ZipArchive":
        """Parse a zip held in ``buffer`` (bytes or a memoryview of a stored member)."""
        return cls(memoryview(buffer), label)

    def close(self) -> None:
        """Release the mapping. Views handed out earlier keep their own reference alive."""
        buf, owner = self._buf, self._owner
        self._buf = memoryview(b"")
        self.closed = True
        verified.forget(self)
        self._inflated.clear()
        try:
            buf.release()
        except BufferError:
            pass  # numpy views still use it; the mapping is freed when they die
        if owner is not None:
            _close_mmap(owner)
            self._owner = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ queries
    @property
    def size(self) -> int:
        return len(self._buf)

    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def info(self, name: str) -> MemberInfo:
        try:
            return self._by_name[name]
        except KeyError:
            raise PT2FormatError(name, f"missing member in {self.label}") from None

    def get(self, name: str) -> MemberInfo | None:
        return self._by_name.get(name)

    def head(self, n: int) -> bytes:
        return bytes(self._buf[:n])

    # ------------------------------------------------------------------ data access
    def view(self, name: str, *, limit: int = MAX_INFLATED_BYTES) -> memoryview:
        """The member's uncompressed bytes, zero-copy for stored members (a slice of the
        mapping), inflated once and cached for deflated ones. The CRC is checked on first use."""
        m = self.info(name)
        self._check_open()
        if m.method == STORED:
            data = self._buf[m.offset:m.offset + m.size]
            if self._address is None:
                self._address = verified.address_of(self._buf)
            address = self._address + m.offset if self._address is not None else None
        else:
            cached = self._inflated.get(name)
            if cached is None:
                cached = self._inflate(m, limit)
                self._inflated[name] = cached
            data = memoryview(cached)
            address = verified.address_of(data)
        self._check_crc(m, data)
        if address is not None:  # a writer storing these bytes again takes the checked CRC
            verified.remember(address, m.size, m.crc, self)
        return data

    def read(self, name: str, *, limit: int = MAX_INFLATED_BYTES) -> bytes:
        """The member's bytes as a ``bytes`` copy (for JSON, text and pickles)."""
        m = self.info(name)
        self._check_open()
        if m.size > limit:
            raise PT2FormatError(name, f"member is {m.size} bytes, more than the {limit}-byte limit")
        if m.method == STORED:
            data = bytes(self._buf[m.offset:m.offset + m.size])
            self._check_crc(m, data)
            return data
        return bytes(self.view(name, limit=limit))

    def _check_open(self) -> None:
        if self.closed:
            raise PT2FormatError(self.label, "the package is closed")

    def _check_crc(self, m: MemberInfo, data) -> None:
        if m.name in self._verified:
            return
        crc = zlib.crc32(data) & _U32_MAX
        if crc != m.crc:
            raise PT2FormatError(m.name, f"CRC mismatch (stored {m.crc:08x}, data {crc:08x}): the file is corrupt")
        self._verified.add(m.name)

    def _inflate(self, m: MemberInfo, limit: int) -> bytes:
        """Inflate a deflated member with a hard cap, after the bomb checks."""
        if m.size > limit:
            raise PT2FormatError(m.name, f"declared size {m.size} bytes exceeds the {limit}-byte inflate limit (decompression bomb?)")
        ratio = m.size / max(m.compressed_size, 1)
        if ratio > DEFLATE_MAX_RATIO or (m.size > RATIO_EXEMPT_BYTES and ratio > MAX_RATIO):
            raise PT2FormatError(m.name, f"compression ratio {ratio:.0f}:1 is implausible (decompression bomb?); not inflated")
        src = self._buf[m.offset:m.offset + m.compressed_size]
        d = zlib.decompressobj(-15)
        out = bytearray()
        pos, chunk = 0, 1 << 20
        try:
            while not d.eof:
                if d.unconsumed_tail:
                    piece = d.unconsumed_tail
                elif pos < len(src):
                    piece = src[pos:pos + chunk]
                    pos += len(piece)
                else:
                    raise PT2FormatError(m.name, "truncated deflate data")
                out += d.decompress(piece, m.size + 1 - len(out))
                if len(out) > m.size:
                    raise PT2FormatError(m.name, f"inflates past its declared size of {m.size} bytes (decompression bomb?)")
        except zlib.error as e:
            raise PT2FormatError(m.name, f"corrupt deflate data: {e}") from None
        if len(out) != m.size:
            raise PT2FormatError(m.name, f"inflated to {len(out)} bytes but the directory says {m.size}")
        return bytes(out)

    # ------------------------------------------------------------------ parsing
    def _fail(self, reason: str) -> PT2FormatError:
        return PT2FormatError(self.label, reason)

    def _parse(self) -> None:
        buf = self._buf
        n = len(buf)
        if n < _EOCD.size:
            raise self._fail(f"not a zip archive ({n} bytes, too short)")
        tail_start = max(0, n - (_U16_MAX + _EOCD.size))
        tail = bytes(buf[tail_start:])
        pos = tail.rfind(_EOCD_SIG)
        while pos >= 0 and pos + _EOCD.size > len(tail):
            pos = tail.rfind(_EOCD_SIG, 0, pos)
        if pos < 0:
            if bytes(buf[:4]) == _LOCAL_SIG:
                raise self._fail("truncated zip archive (no end-of-central-directory record)")
            raise self._fail("not a zip archive" + _sniff(bytes(buf[:8])))
        eocd_pos = tail_start + pos
        (_, disk, cd_disk, n_disk, n_total, cd_size, cd_off, _clen) = _EOCD.unpack_from(buf, eocd_pos)
        if disk != 0 or cd_disk != 0 or n_disk != n_total:
            raise self._fail("multi-disk (split) zip archives are not supported")
        if _U16_MAX in (n_total,) or _U32_MAX in (cd_size, cd_off):
            n_total, cd_size, cd_off = self._zip64_eocd(eocd_pos)
        cd_end = cd_off + cd_size
        if cd_end > eocd_pos or cd_off < 0:
            raise self._fail("truncated or corrupt zip archive (central directory outside the file)")
        if n_total > MAX_MEMBERS:
            raise self._fail(f"{n_total} members, more than the {MAX_MEMBERS} accepted")
        if n_total * _CDIR.size > cd_size:
            raise self._fail("corrupt central directory (member count larger than the directory)")
        members = self._parse_cdir(cd_off, cd_end, n_total)
        self._check_layout(members, cd_off)
        self.members = members

    def _zip64_eocd(self, eocd_pos: int) -> tuple[int, int, int]:
        buf = self._buf
        loc = eocd_pos - _EOCD64_LOC.size
        if loc < 0 or bytes(buf[loc:loc + 4]) != _EOCD64_LOC_SIG:
            raise self._fail("corrupt ZIP64 archive (missing ZIP64 locator)")
        _, _disk, rec_off, _ndisks = _EOCD64_LOC.unpack_from(buf, loc)
        if rec_off + _EOCD64.size > loc or bytes(buf[rec_off:rec_off + 4]) != _EOCD64_SIG:
            raise self._fail("corrupt ZIP64 archive (bad ZIP64 end record)")
        (_, _sz, _vm, _vn, disk, cd_disk, n_disk, n_total, cd_size, cd_off) = _EOCD64.unpack_from(buf, rec_off)
        if disk != 0 or cd_disk != 0 or n_disk != n_total:
            raise self._fail("multi-disk (split) zip archives are not supported")
        return n_total, cd_size, cd_off

    def _parse_cdir(self, cd_off: int, cd_end: int, n_total: int) -> list[MemberInfo]:
        cd = bytes(self._buf[cd_off:cd_end])  # one copy; entries are sliced from it
        end = len(cd)
        members: list[MemberInfo] = []
        by_name = self._by_name
        pos = 0
        unpack = _CDIR.unpack_from
        head = _CDIR.size
        for i in range(n_total):
            if pos + head > end:
                raise self._fail(f"truncated central directory (entry {i} of {n_total})")
            (sig, _vm, _vn, flags, method, _t, _d, crc, csize, usize, nlen, xlen, clen,
             disk, _ia, _ea, hoff) = unpack(cd, pos)
            if sig != _CDIR_SIG:
                raise self._fail(f"corrupt central directory (bad signature at entry {i})")
            var_end = pos + head + nlen + xlen + clen
            if var_end > end:
                raise self._fail(f"truncated central directory (entry {i} of {n_total})")
            raw_name = cd[pos + head:pos + head + nlen]
            name = _decode_name(raw_name, self.label)
            if _U32_MAX in (csize, usize, hoff) or disk == _U16_MAX:
                extra = cd[pos + head + nlen:pos + head + nlen + xlen]
                usize, csize, hoff = _zip64_extra(extra, usize, csize, hoff, name)
            pos = var_end
            if flags & 0x1:
                raise PT2FormatError(name, "member is encrypted; encrypted archives are not supported")
            if method != STORED and method != DEFLATED:
                raise PT2FormatError(name, f"unsupported compression method {method} (only stored and deflated)")
            if method == STORED and csize != usize:
                raise PT2FormatError(name, f"stored member with compressed size {csize} != size {usize}")
            if name in by_name:
                raise PT2FormatError(name, f"duplicate member in {self.label}")
            m = MemberInfo(name, self._local_header(name, raw_name, hoff), usize, csize, method, crc, hoff, flags)
            by_name[name] = m
            members.append(m)
        return members

    def _local_header(self, name: str, raw_name: bytes, hoff: int) -> int:
        buf = self._buf
        if hoff + _LOCAL.size > len(buf):
            raise PT2FormatError(name, "local header offset past the end of the file (truncated?)")
        (sig, _v, _flags, _method, _t, _d, _crc, _cs, _us, nlen, xlen) = _LOCAL.unpack_from(buf, hoff)
        if sig != _LOCAL_SIG:
            raise PT2FormatError(name, "bad local header signature (corrupt archive)")
        if buf[hoff + _LOCAL.size:hoff + _LOCAL.size + nlen] != raw_name:
            raise PT2FormatError(name, "local header names a different member (corrupt archive)")
        return hoff + _LOCAL.size + nlen + xlen

    def _check_layout(self, members: list[MemberInfo], cd_off: int) -> None:
        """Every member's data must lie inside the file, before the central directory, and
        not overlap the next member (overlapping members are a zip-bomb technique)."""
        order = sorted(members, key=lambda m: m.header_offset)
        for a, b in zip(order, order[1:] + [None]):
            end = a.offset + a.compressed_size
            limit = b.header_offset if b is not None else cd_off
            if end > len(self._buf) or end > cd_off:
                raise PT2FormatError(a.name, f"data runs past the end of the archive ({end} > {min(cd_off, len(self._buf))} bytes; truncated?)")
            if end > limit:
                raise PT2FormatError(a.name, f"overlaps member {b.name} (corrupt or malicious archive)")


_UNSAFE_NAME = r"\x00|\\|^/|^[A-Za-z]:|(?:^|/)\.\.(?:/|$)"


def _decode_name(raw: bytes, label: str) -> str:
    try:
        name = raw.decode("utf-8")  # torch writes UTF-8 whether or not flag 0x800 is set
    except UnicodeDecodeError:
        name = raw.decode("cp437")
    if not name:
        raise PT2FormatError(label, "member with an empty name")
    # the plain tests pass every name _UNSAFE_NAME matches (and few others): no regex search
    # for an ordinary name
    if ("\x00" in name or "\\" in name or name[0] == "/" or name[1:2] == ":" or ".." in name) \
            and re.search(_UNSAFE_NAME, name):
        if "\x00" in name:
            raise PT2FormatError(label, f"member name {name!r} contains a NUL byte")
        if "\\" in name:
            raise PT2FormatError(name, "backslash in member name (unsafe archive)")
        if name.startswith("/") or name[1:2] == ":":
            raise PT2FormatError(name, "absolute member path (unsafe archive)")
        raise PT2FormatError(name, "'..' in member path (unsafe archive)")
    return name


def _zip64_extra(extra: bytes, usize: int, csize: int, hoff: int, name: str) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        hid, hlen = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4:pos + 4 + hlen]
        if hid == 0x0001:
            vals = [struct.unpack_from("<Q", body, j)[0] for j in range(0, len(body) - 7, 8)]
            need = [usize == _U32_MAX, csize == _U32_MAX, hoff == _U32_MAX]
            if len(vals) < sum(need):
                raise PT2FormatError(name, "corrupt ZIP64 extra field")
            it = iter(vals)
            if need[0]:
                usize = next(it)
            if need[1]:
                csize = next(it)
            if need[2]:
                hoff = next(it)
            return usize, csize, hoff
        pos += 4 + hlen
    raise PT2FormatError(name, "member needs a ZIP64 extra field but has none (corrupt archive)")


def _sniff(head: bytes) -> str:
    """A hint about what a non-zip file is."""
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return " (it looks like a legacy non-zip torch.save pickle file)"
    if head[:1] in (b"{", b"["):
        return " (it looks like a JSON file; a .pt2 is a zip archive)"
    if head[:4] == b"\x08\x00\x12\x00" or head[:2] == b"\x08\x07":
        return " (it looks like an ONNX/protobuf file)"
    if head[:4] == b"\x89HDF":
        return " (it looks like an HDF5 file)"
    return ""


def _close_mmap(mm) -> None:
    try:
        mm.close()
    except BufferError:
        pass  # still exported to live numpy arrays; freed with them
