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


def _converted(f: np.ndarray) -> np.ndarray:
    out = np.empty(f.size, np.uint16)
    assert Fp16Encoder(f.size).into(f, out)
    return out


def _assert_numpys_cast(f: np.ndarray, out: np.ndarray) -> None:
    ref = f.astype(np.float16).view(np.uint16)
    wrong = np.flatnonzero(out != ref)
    assert wrong.size == 0, [(hex(f.view(np.uint32)[i]), hex(out[i]), hex(ref[i])) for i in wrong[:5]]


#: values below the smallest normal half, 2**-14: zeros, subnormal ties both ways, the halfway
#: points at either end, the values that round up to 2**-14
SMALL = np.array([0x00000000, 0x80000000, 0x00000001, 0x33000000, 0x33000001, 0x337FFFFF, 0x33800000,
                  0x33C00000, 0x34200000, 0x34400000, 0x37FFE000, 0x37FFF000, 0x38000000, 0x38001000,
                  0x38003000, 0x387FDFFF, 0x387FE000, 0x387FEFFF, 0x387FF000, 0x387FFFFF], np.uint32)


def test_a_few_small_values_among_normal_ones_are_redone_where_they_are():
    rng = np.random.default_rng(5)
    small = np.concatenate([SMALL, rng.integers(0, 0x38800000, 200, dtype=np.uint32)])
    small = np.concatenate([small, small | np.uint32(0x80000000)])
    f = (rng.standard_normal(small.size * 40) * np.float32(0.05)).astype(np.float32)  # 1 in 40 small
    f.view(np.uint32)[rng.choice(f.size, small.size, replace=False)] = small
    _assert_numpys_cast(f, _converted(f))
    # every small pattern, a handful in a chunk of normal values
    pats = _patterns()
    pats = pats[pats & np.uint32(0x7FFFFFFF) < np.uint32(0x38800000)]
    filler = np.full(48 * 64, 1.5, np.float32)
    for lo in range(0, pats.size, 64):
        g = filler.copy()
        g.view(np.uint32)[::48][:pats[lo:lo + 64].size] = pats[lo:lo + 64]
        _assert_numpys_cast(g, _converted(g))


@pytest.mark.parametrize("fill", ["zeros", "negative zeros", "half zeros", "subnormals"])
def test_a_chunk_full_of_small_values_is_redone_whole(fill):
    rng = np.random.default_rng(9)
    f = (rng.standard_normal(CHUNK) * np.float32(0.1)).astype(np.float32)
    if fill == "zeros":
        f[:] = 0
    elif fill == "negative zeros":
        f[:] = -0.0
    elif fill == "half zeros":  # pruned weights
        f[rng.random(CHUNK) < 0.5] = 0
    else:
        f *= np.float32(2.0 ** -12)
        f[::7] = rng.choice(SMALL, f[::7].size).view(np.float32)
    _assert_numpys_cast(f, _converted(f))


@pytest.mark.parametrize("extra", [0, 1])
def test_either_side_of_the_share_of_small_values_that_redoes_a_chunk_whole(extra):
    from engine.writers.fp16 import _DENSE

    n = 4096
    rng = np.random.default_rng(extra)
    f = (rng.standard_normal(n) * np.float32(0.05)).astype(np.float32)
    f[np.abs(f) < 2.0 ** -14] = 0.125
    k = n // _DENSE + extra
    f.view(np.uint32)[rng.choice(n, k, replace=False)] = rng.choice(SMALL, k) | rng.choice(
        np.array([0, 0x80000000], np.uint32), k)
    assert np.count_nonzero(np.abs(f) < 2.0 ** -14) == k
    _assert_numpys_cast(f, _converted(f))


@pytest.mark.parametrize("bits", [0x477FE000, 0xC77FE000, 0x477FDFFF, 0x38800000, 0xB8800000])
def test_values_up_to_65504_are_converted(bits):
    f = np.full(64, 1.0, np.float32)
    f.view(np.uint32)[7] = bits
    _assert_numpys_cast(f, _converted(f))


@pytest.mark.parametrize("bits", [0x477FE001, 0x477FF000, 0xC77FE001, 0x7F800000, 0xFF800000, 0x7FC00000,
                                  0xFFC00001, 0x7F800001])
def test_values_beyond_65504_or_nan_convert_nothing(bits):
    f = np.full(64, 1.0, np.float32)
    f.view(np.uint32)[40] = bits
    out = np.full(64, 0x1234, np.uint16)
    assert not Fp16Encoder(64).into(f, out)
    assert (out == 0x1234).all()


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
