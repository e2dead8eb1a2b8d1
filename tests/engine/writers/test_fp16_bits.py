"""The float32 → float16 bit conversion (``engine.writers.fp16``) gives numpy's cast bit for bit,
and ``.ncnn.bin`` fp16 weights written through it are the bytes numpy's cast gives, across
chunk boundaries and with values that must be clamped or are NaN. (Checked once over every
float32 with ``|x| <= 65504``, both signs; here over every exponent with the rounding edges
of the mantissa and random mantissas.)"""
from __future__ import annotations

import io

import numpy as np
import pytest

from engine.writers.fp16 import Fp16Encoder
from engine.writers.ncnn_bin import BITS_MIN, CHUNK, FP16_MAX, FP16_TAG, to_fp16, write_weight

#: mantissas around every rounding decision (13 dropped bits: half = 0x1000, the kept lsb = 0x2000)
EDGES = [0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x2FFF, 0x3000, 0x3001, 0x5000, 0x7FD000, 0x7FE000,
         0x7FEFFF, 0x7FF000, 0x7FF001, 0x7FFFFF]


def _patterns() -> np.ndarray:
    rng = np.random.default_rng(13)
    top = np.uint32(0x477FE000)  # 65504, the largest half
    rows = []
    for exp in range(0, 0x8F):
        mant = np.concatenate([np.array(EDGES, np.uint32), rng.integers(0, 1 << 23, 3000, dtype=np.uint32)])
        rows.append((np.uint32(exp) << np.uint32(23)) | mant)
    u = np.concatenate(rows)
    u = u[u <= top]
    return np.concatenate([u, u | np.uint32(0x80000000)])


def test_bits_equal_numpys_cast_on_every_exponent_and_rounding_edge():
    f = _patterns().view(np.float32)
    out = np.empty(f.size, np.uint16)
    Fp16Encoder(f.size).into(f, out)
    ref = f.astype(np.float16).view(np.uint16)
    wrong = np.flatnonzero(out != ref)
    assert wrong.size == 0, [(hex(f.view(np.uint32)[i]), hex(out[i]), hex(ref[i])) for i in wrong[:5]]
    # the cases that matter are there: subnormal halves, ties rounding both ways, carries
    assert (ref & 0x7C00 == 0).sum() > 1000 and (ref & 0x7FFF == 0x0400).any() and (ref & 0x7FFF == 0x7BFF).any()


def test_a_smaller_encoder_chunk_uses_only_its_prefix():
    f = np.linspace(-3, 3, 1000, dtype=np.float32)
    out = np.full(1000, 0xFFFF, np.uint16)
    enc = Fp16Encoder(4096)
    enc.into(f[:10], out[:10])  # stale scratch beyond the chunk must not leak in
    enc.into(f, out)
    assert np.array_equal(out, f.astype(np.float16).view(np.uint16))


def _written(a: np.ndarray) -> tuple[bytes, bool]:
    buf = io.BytesIO()
    bad = write_weight(a, lambda b: buf.write(bytes(memoryview(b).cast("B"))), tagged=True, fp16=True)
    return buf.getvalue(), bad


@pytest.mark.parametrize("special", [None, "clamp", "nan", "inf"])
def test_written_fp16_weights_are_numpys_cast_across_chunks(special):
    rng = np.random.default_rng(7)
    n = CHUNK * 2 + BITS_MIN + 3  # two full chunks, a bit-converted tail, odd length (padding)
    a = (rng.standard_normal(n) * np.float32(0.02)).astype(np.float32)
    a[::97] = rng.standard_normal(a[::97].size).astype(np.float32) * 3e-6  # subnormal halves
    value = {"clamp": 70000.0, "nan": np.nan, "inf": -np.inf}.get(special)
    if value is not None:
        a[CHUNK + 5] = value
    data, bad = _written(a)
    assert int.from_bytes(data[:4], "little") == FP16_TAG
    assert bad == (special in ("nan", "inf"))
    want = to_fp16(a).view(np.uint16)
    got = np.frombuffer(data[4:4 + 2 * n], np.uint16)
    assert np.array_equal(got, want)
    assert len(data) == 4 + 2 * n + 2  # padded to 4 bytes
    if special == "clamp":
        assert np.frombuffer(data[4:], np.float16, n)[CHUNK + 5] == FP16_MAX


def test_float64_and_strided_weights_are_converted_like_float32():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((BITS_MIN * 2, 3))
    for a in (base, base[:, 1], base.astype(np.float32)[:, 2]):
        data, _ = _written(a)
        want = to_fp16(np.asarray(a, np.float32).reshape(-1)).view(np.uint16)
        assert np.array_equal(np.frombuffer(data[4:4 + 2 * want.size], np.uint16), want)


def test_weights_written_one_after_another_share_no_stale_values():
    rng = np.random.default_rng(11)
    big = rng.standard_normal(CHUNK + 100).astype(np.float32)
    small = rng.standard_normal(BITS_MIN + 1).astype(np.float32)
    for a in (big, small, big[:BITS_MIN]):  # the reused scratch is longer than the later weights
        data, _ = _written(a)
        assert np.array_equal(np.frombuffer(data[4:4 + 2 * a.size], np.uint16), to_fp16(a).view(np.uint16))
