"""Encoding and decoding of weights in ``.ncnn.bin`` (ncnn's ``modelbin.cpp``).

A weight the layer loads *tagged* (``mb.load(n, 0)``) starts with a 4-byte little-endian tag:
``0`` = fp32 data, :data:`FP16_TAG` = fp16 data padded to 4 bytes, :data:`INT8_TAG` = int8
data padded to 4 bytes (any other non-zero tag: a 256-entry fp32 quantization table followed by
uint8 indexes). A *raw* weight (``mb.load(n, 1)``) is n fp32 values, no tag. Every weight ends
on a 4-byte boundary.
"""
from __future__ import annotations

import math
import threading
from typing import Iterable

import numpy as np

from .fp16 import Fp16Encoder

FP32_TAG = 0
FP16_TAG = 0x01306B47
INT8_TAG = 0x000D4B38
#: pnnx pads an odd-length fp16 weight with this value (for reproducible model hashes).
FP16_PAD = 0x2283
FP16_MAX = float(np.finfo(np.float16).max)


def to_fp16(data: np.ndarray) -> np.ndarray:
    """fp32 → fp16 with round-to-nearest-even; values beyond ±65504 are clamped (not inf).
    The fp32 data is copied (clamped) only when it holds such a value (or a NaN)."""
    a = np.asarray(data, dtype=np.float32)
    if a.size and not (-FP16_MAX <= a.min() and a.max() <= FP16_MAX):  # False for a NaN too
        a = np.clip(a, -FP16_MAX, FP16_MAX)
    return a.astype("<f2")


#: values per chunk when a weight is converted and written piece by piece (256 KB of fp32: the
#: chunk and the bit conversion's 1 MB of scratch stay in the L2 cache; a quarter faster than
#: 1 MB chunks, whose scratch does not)
CHUNK = 1 << 16
#: chunks at least this long go through :class:`Fp16Encoder` (below it numpy's per-call
#: overhead of the bit operations outweighs their speed)
BITS_MIN = 8192


def write_weight(data: np.ndarray, write, *, tagged: bool, fp16: bool) -> bool:
    """Write one weight (the bytes of :func:`encode`) through ``write`` and say whether it holds
    a NaN or an infinite value. A weight stored as fp16 is converted a chunk at a time into one
    reused buffer (no full-size temporary, the chunk stays in cache between its range check,
    its conversion and its write); the finiteness comes from the same range check. A small
    weight goes out in one write, tag and padding included."""
    a = np.asarray(data).reshape(-1)
    if not (tagged and fp16 and a.dtype != np.int8 and a.dtype.kind not in "bcOSUV"):
        chunks = encode(a, tagged=tagged, fp16=fp16)
        for c in chunks:
            write(c)
        return a.dtype.kind == "f" and not _all_finite(a)
    if a.size < BITS_MIN:
        c = np.asarray(a, np.float32)  # a weight of another dtype goes through float32 too
        h = np.empty(c.size, "<f2")
        finite = _cast_clamped(c, h)
        write(b"".join((_FP16_TAG, h, _FP16_PAD if a.size % 2 else b"")))
        return not finite
    return write_fp16([a], a.size, write)


def write_fp16(pieces: Iterable[np.ndarray], n: int, write) -> bool:
    """Write ``n`` values, given as consecutive flat pieces, as one fp16 weight (tag, data,
    padding) and say whether any is NaN or infinite. Each piece is converted a chunk at a time
    into one reused buffer and written, so the weight itself may come a piece at a time (one
    computed that way: :meth:`engine.ir.Attribute.pieces`)."""
    write(_FP16_TAG)
    finite = True
    buf, bits = _scratch()
    for p in pieces:
        for lo in range(0, p.size, CHUNK):
            c = p[lo:lo + CHUNK]
            if c.dtype != np.float32 or not c.flags.c_contiguous:
                c = np.ascontiguousarray(c, np.float32)
            out = buf[:c.size]
            # the bit conversion checks the range itself; a chunk beyond it is clamped and cast
            if c.size < BITS_MIN or not bits.into(c, out):
                finite = _cast_clamped(c, out) and finite
            write(out)
    if n % 2:
        write(_FP16_PAD)
    return not finite


_FP16_TAG = FP16_TAG.to_bytes(4, "little")
_FP16_PAD = FP16_PAD.to_bytes(2, "little")


def _cast_clamped(c: np.ndarray, out: np.ndarray) -> bool:
    """numpy's float16 cast of the float32 ``c`` into ``out``, values beyond ±65504 clamped
    (a NaN stays NaN); whether ``c`` is all finite."""
    if not c.size:
        return True
    cmin, cmax = np.minimum.reduce(c), np.maximum.reduce(c)  # a NaN anywhere makes both NaN
    finite = True
    if not (-FP16_MAX <= cmin and cmax <= FP16_MAX):  # out of range, or a NaN
        finite = bool(np.isfinite(cmin) and np.isfinite(cmax))
        c = np.clip(c, -FP16_MAX, FP16_MAX)
    np.copyto(out, c, casting="same_kind")
    return finite


_SCRATCH = threading.local()


def _scratch() -> tuple[np.ndarray, Fp16Encoder]:
    """This thread's chunk buffer and bit converter, made once: fresh megabyte buffers for every
    weight cost a page fault per 4 KB each time (a third more faults converting ResNet-18).
    ``write`` consumes each chunk before the next one overwrites it."""
    s = getattr(_SCRATCH, "buffers", None)
    if s is None:
        s = _SCRATCH.buffers = (np.empty(CHUNK, "<f2"), Fp16Encoder(CHUNK))
    return s


def _all_finite(a: np.ndarray) -> bool:
    for lo in range(0, a.size, CHUNK):
        c = a[lo:lo + CHUNK]
        # a finite sum has no NaN or infinity in it (one reduction); an infinite one may only
        # have overflowed
        if not (math.isfinite(np.add.reduce(c)) or np.isfinite(c.min()) and np.isfinite(c.max())):
            return False
    return True


def _pad4(n: int) -> int:
    return (4 - n % 4) % 4


def encode(data: np.ndarray, *, tagged: bool, fp16: bool) -> list[bytes | np.ndarray]:
    """The chunks of one weight (tag, data, padding), each bytes-like: the data chunk is the
    little-endian array itself (written through the buffer protocol, not copied to bytes).
    ``data`` is the flat weight."""
    a = np.asarray(data).reshape(-1)
    if a.dtype.kind in "bcOSUV":
        raise TypeError(f"cannot store {a.dtype} data as ncnn weights")
    if not tagged:
        if a.dtype.kind in "iu":
            info = np.iinfo(np.int32)
            if a.size and (a.min() < info.min or a.max() > info.max):
                raise ValueError("integer weight does not fit int32")
            return [np.ascontiguousarray(a, dtype="<i4")]
        return [np.ascontiguousarray(a, dtype="<f4")]
    if a.dtype == np.int8:
        raw = np.ascontiguousarray(a)
        return [INT8_TAG.to_bytes(4, "little"), raw, b"\0" * _pad4(raw.nbytes)]
    if fp16:
        h = to_fp16(a)
        chunks = [FP16_TAG.to_bytes(4, "little"), h]
        if h.size % 2:
            chunks.append(FP16_PAD.to_bytes(2, "little"))
        return chunks
    return [FP32_TAG.to_bytes(4, "little"), np.ascontiguousarray(a, dtype="<f4")]


def stored_size(n: int, tag: int | None) -> int:
    """Bytes after the tag for ``n`` values stored with ``tag`` (None = raw fp32)."""
    if tag is None or tag == FP32_TAG:
        return 4 * n
    if tag == FP16_TAG:
        return 2 * n + _pad4(2 * n)
    if tag == INT8_TAG:
        return n + _pad4(n)
    return 256 * 4 + n + _pad4(n)  # quantization table + uint8 indexes


def decode(buf: bytes | memoryview, n: int, tag: int | None) -> np.ndarray:
    """The ``n`` values stored after ``tag`` (None = raw fp32) in ``buf``."""
    if tag is None or tag == FP32_TAG:
        return np.frombuffer(buf, "<f4", n).astype(np.float32)
    if tag == FP16_TAG:
        return np.frombuffer(buf, "<f2", n).astype(np.float16)
    if tag == INT8_TAG:
        return np.frombuffer(buf, np.int8, n).copy()
    table = np.frombuffer(buf, "<f4", 256)
    index = np.frombuffer(buf, np.uint8, n, offset=256 * 4)
    return table[index].astype(np.float32)
