"""A stored (uncompressed) zip writer laid out byte for byte as pnnx's ``StoreZipWriter``
(``tools/pnnx/src/storezip.cpp``), for ``.pnnx.bin``: every entry carries a ZIP64 extra field,
no timestamps, version fields 0, a ZIP64 end-of-central-directory record and locator, and a
classic end record full of 0xFFFF/0xFFFFFFFF. pnnx's reader (which refuses data descriptors
and compression), Netron and Python's :mod:`zipfile` all read it.
"""
from __future__ import annotations

import struct
import zlib
from typing import Iterable, Protocol

_LFH = struct.Struct("<IHHHHHIIIHH")          # signature + local_file_header
_ZIP64_EXTRA = struct.Struct("<HHQQQI")        # id, size, uncompressed, compressed, lfh offset, disk
_CDFH = struct.Struct("<IHHHHHHIIIHHHHHII")    # signature + central_directory_file_header
_EOCD64 = struct.Struct("<IQHHIIQQQQ")         # signature + zip64 end of central directory record
_EOCD64_LOCATOR = struct.Struct("<IIQI")
_EOCD = struct.Struct("<IHHHHIIH")
_ZIP64_EXTRA_LEN = _ZIP64_EXTRA.size           # 32 bytes: 4 header + 28 data, as pnnx writes it
_LFH_CRC = 14                                  # where the CRC-32 is in a local header
_CRC = struct.Struct("<I")
#: a member this small is copied into the write of its header (one write instead of two)
_JOIN_MAX = 1 << 12


class _Sink(Protocol):
    def write(self, data) -> int: ...
    def tell(self) -> int: ...
    def patch(self, offset: int, data: bytes) -> None: ...


class StoreZipWriter:
    """Write members one after the other to ``sink`` (anything with ``write`` and ``tell``, and
    ``patch`` for :meth:`write_member_pieces`), then :meth:`close` to write the central
    directory."""

    def __init__(self, sink: _Sink):
        self._sink = sink
        self._entries: list[tuple[bytes, int, int, int]] = []  # name, offset, crc, size of each member
        self._names: set[bytes] = set()

    def write_member(self, name: str, data, *, crc: int | None = None) -> None:
        """Append member ``name`` holding ``data`` (any C-contiguous bytes-like object). ``crc``,
        when given, is the data's CRC-32, already known (it is computed otherwise)."""
        mv = memoryview(data).cast("B")
        size = mv.nbytes
        if crc is None:
            crc = zlib.crc32(mv) & 0xFFFFFFFF
        head = self._local_header(name, crc, size)
        # the local header, name and extra field in one write, and a small member's data with them
        # (small writes cost more than bytes)
        if size <= _JOIN_MAX:
            self._sink.write(b"".join((head, mv)))
        else:
            self._sink.write(head)
            self._sink.write(mv)

    def write_member_pieces(self, name: str, pieces: Iterable, size: int) -> None:
        """Append member ``name`` holding the ``size`` bytes that ``pieces`` yields as
        consecutive bytes-like pieces, so the member never has to be in memory whole: each is
        written as it comes, and its CRC-32, known once all are, is patched into the local
        header (``sink.patch``)."""
        self._sink.write(self._local_header(name, 0, size))
        crc = n = 0
        for p in pieces:
            crc = zlib.crc32(p, crc)
            n += self._sink.write(p)
        if n != size:
            raise ValueError(f"zip member {name!r} holds {n} bytes, not the {size} it was announced with")
        raw_name, offset, _, _ = self._entries[-1]
        self._sink.patch(offset + _LFH_CRC, _CRC.pack(crc))
        self._entries[-1] = (raw_name, offset, crc, size)

    def _local_header(self, name: str, crc: int, size: int) -> bytes:
        """The local header of a new member starting here (listed for the central directory)."""
        raw_name = name.encode("utf-8")
        if raw_name in self._names:
            raise ValueError(f"zip member {name!r} written twice")
        self._names.add(raw_name)
        self._entries.append((raw_name, self._sink.tell(), crc, size))
        return b"".join((_LFH.pack(0x04034B50, 0, 0, 0, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(raw_name),
                                   _ZIP64_EXTRA_LEN),
                         raw_name, _ZIP64_EXTRA.pack(0x0001, _ZIP64_EXTRA_LEN - 4, size, size, 0, 0)))

    def close(self) -> None:
        cd_offset = self._sink.tell()
        cd = bytearray()  # the whole central directory, written at once
        for name, offset, crc, size in self._entries:
            cd += _CDFH.pack(0x02014B50, 0, 0, 0, 0, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                             len(name), _ZIP64_EXTRA_LEN, 0, 0xFFFF, 0, 0, 0xFFFFFFFF)
            cd += name
            cd += _ZIP64_EXTRA.pack(0x0001, _ZIP64_EXTRA_LEN - 4, size, size, offset, 0)
        self._sink.write(cd)
        eocd64_offset = self._sink.tell()
        n = len(self._entries)
        self._sink.write(_EOCD64.pack(0x06064B50, _EOCD64.size - 4 - 8, 0, 0, 0, 0, n, n,
                                      eocd64_offset - cd_offset, cd_offset))
        self._sink.write(_EOCD64_LOCATOR.pack(0x07064B50, 0, eocd64_offset, 1))
        self._sink.write(_EOCD.pack(0x06054B50, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
