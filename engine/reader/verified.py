"""The CRC-32 of archive members whose bytes were already checked, found by memory address.

A ``.pt2`` member's CRC is checked the first time it is read (:mod:`engine.reader.archive`).
When a writer later stores those same bytes again (an unmodified weight in ``.pnnx.bin``, a zip
too), it can take the checked CRC instead of hashing the data a second time: :func:`crc_of`
answers for a buffer that starts exactly where a checked member's data starts in a still-open
archive and spans exactly that member. The archive's mapping is read-only and stays alive while
the archive is open, so the bytes there are the bytes that were checked. Any other buffer (a
copy, a slice, a fused weight, memory of a closed or discarded archive) gets ``None``, and the
caller computes the CRC itself.
"""
from __future__ import annotations

import weakref

#: data address → (size in bytes, CRC-32, the archive holding it)
_SPANS: dict[int, tuple[int, int, weakref.ref]] = {}


def address_of(buf) -> int | None:
    """The address of the first byte of a non-empty buffer (read-only ones too)."""
    import numpy as np

    a = np.frombuffer(buf, dtype=np.uint8)
    if a.size == 0:
        return None
    return a.__array_interface__["data"][0]


def remember(address: int, size: int, crc: int, archive) -> None:
    """Record that the ``size`` bytes at ``address`` (a whole member's bytes inside
    ``archive``'s buffers) have CRC ``crc``."""
    if size:
        _SPANS[address] = (size, crc, weakref.ref(archive))


def forget(archive) -> None:
    """Drop every span of ``archive`` (it is being closed)."""
    spans = list(_SPANS.items())  # one step under the GIL: another thread may be reading a package
    for addr, (_n, _c, ref) in spans:
        if ref() is archive or ref() is None:
            _SPANS.pop(addr, None)


def crc_of(array) -> int | None:
    """The checked CRC-32 of ``array``'s bytes (a C-contiguous numpy array), or ``None`` when
    they are not exactly one checked member of an open archive."""
    if not array.flags.c_contiguous or array.nbytes == 0:
        return None
    span = _SPANS.get(array.__array_interface__["data"][0])
    if span is None:
        return None
    size, crc, ref = span
    archive = ref()
    if size != array.nbytes or archive is None or archive.closed:
        return None
    return crc
