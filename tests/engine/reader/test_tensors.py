"""Unit tests of engine.reader.tensors: dtype table, strided views, conversion, the store."""
from __future__ import annotations

import json

import numpy as np
import pytest

import engine
from engine.reader.schema import ScalarType as ST
from engine.reader.tensors import DTYPES, check_geometry, strided_view, to_float32
from tests.engine.reader.unit_models import edit_json, feat_pt2, members, model_member, rewrite, tiny_pt2


def _torch_bits(t):
    """A torch tensor's logical values as raw little-endian bytes, C order."""
    import torch

    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def test_every_scalar_type_has_a_view():
    assert set(DTYPES) == set(ST) - {ST.UNKNOWN}
    raw = {ST.BFLOAT16, ST.COMPLEXHALF} | {t for t in ST if t.name.startswith("FLOAT8")}
    assert {t for t, d in DTYPES.items() if d.raw_bits} == raw


def test_tensors_equal_torch_bit_for_bit_with_strides_and_offsets():
    path, ep = feat_pt2()
    with engine.load(path) as pkg:
        m = pkg.model
        expected = {**ep.state_dict, **ep.constants}
        entries = {e.fqn: e for e in m.tensors.entries()}
        assert set(entries) == set(expected)
        for fqn, t in expected.items():
            arr = m.tensor(fqn)
            assert arr.shape == tuple(t.shape), fqn
            assert arr.strides == tuple(s * arr.itemsize for s in t.stride()), fqn
            assert entries[fqn].meta.storage_offset == t.storage_offset(), fqn
            assert np.ascontiguousarray(arr).tobytes() == _torch_bits(t), fqn
            assert not arr.flags.writeable
        assert entries["part"].meta.storage_offset == 5 and m.tensor("wt").strides == (4, 12)


def test_tied_and_sliced_tensors_share_memory():
    path, _ = feat_pt2()
    with engine.load(path) as pkg:
        m = pkg.model
        assert np.shares_memory(m.tensor("lin1.weight"), m.tensor("lin2.weight"))
        assert np.shares_memory(m.tensor("full"), m.tensor("part"))
        assert list(m.tensor("part")) == [5.0, 6.0, 7.0, 8.0]
        assert m.tensor("p_conv_weight") is m.tensor("conv.weight")
        with pytest.raises(ValueError):
            m.tensor("full")[0] = 1.0


def test_reduced_precision_dtypes_convert_like_torch():
    import torch

    path, ep = feat_pt2()
    with engine.load(path) as pkg:
        m = pkg.model
        assert m.tensor_dtype("bf") is ST.BFLOAT16 and m.tensor("bf").dtype == np.uint16
        assert m.tensor_dtype("f8") is ST.FLOAT8E4M3FN and m.tensor("f8").dtype == np.uint8
        assert m.tensor("flag").dtype == np.bool_ and m.tensor("i8").dtype == np.int8
        assert m.tensor("u16").tolist() == [1, 2, 300, 65535]
        for fqn in ("bf", "f8", "h"):
            want = ep.state_dict[fqn].float().numpy()
            np.testing.assert_array_equal(to_float32(m.tensor(fqn), m.tensor_dtype(fqn)), want)


@pytest.mark.parametrize("st, dtype", [(ST.FLOAT8E4M3FN, "float8_e4m3fn"), (ST.FLOAT8E5M2, "float8_e5m2"),
                                       (ST.FLOAT8E4M3FNUZ, "float8_e4m3fnuz"),
                                       (ST.FLOAT8E5M2FNUZ, "float8_e5m2fnuz"),
                                       (ST.FLOAT8E8M0FNU, "float8_e8m0fnu"), (ST.BFLOAT16, "bfloat16")])
def test_every_bit_pattern_converts_like_torch(st, dtype):
    import torch

    n = 65536 if st is ST.BFLOAT16 else 256
    bits = np.arange(n, dtype=np.uint16 if n > 256 else np.uint8)
    ours = to_float32(bits, st)
    theirs = torch.from_numpy(bits.view(np.int16 if n > 256 else np.uint8).copy()).view(getattr(torch, dtype))
    theirs = theirs.float().numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    ok = ~np.isnan(theirs)
    np.testing.assert_array_equal(ours[ok], theirs[ok])


def test_complex32_and_big_endian_views():
    pairs = np.array([[1.5, -2.0], [0.25, 4.0]], dtype="<f2")
    raw = strided_view(memoryview(pairs.tobytes()), ST.COMPLEXHALF, (2,), (1,), 0)
    assert raw.dtype == np.dtype("<u4")
    np.testing.assert_array_equal(to_float32(raw, ST.COMPLEXHALF), np.array([1.5 - 2j, 0.25 + 4j], np.complex64))
    vals = np.arange(6, dtype=">f4")
    big = strided_view(memoryview(vals.tobytes()), ST.FLOAT, (2, 3), (3, 1), 0, byteorder="big")
    np.testing.assert_array_equal(big, vals.reshape(2, 3))
    big_t = strided_view(memoryview(vals.tobytes()), ST.FLOAT, (3, 2), (1, 3), 0, byteorder="big")
    np.testing.assert_array_equal(big_t, vals.reshape(2, 3).T)


@pytest.mark.parametrize("numel, sizes, strides, offset, needle", [
    (10, (2, 5), (5, 1), 1, "need 11 elements but the payload holds 10"),
    (10, (2, 5), (-5, 1), 0, "negative stride"),
    (10, (-1,), (1,), 0, "negative size"),
    (10, (5,), (1,), -1, "negative storage offset"),
    (10, (2,), (1, 1), 0, "sizes but"),
    (10, (1 << 30, 1 << 30), (0, 0), 0, "absurd size"),
    (10, ("s0",), (1,), 0, "symbolic"),
])
def test_geometry_is_checked_before_any_view(numel, sizes, strides, offset, needle):
    with pytest.raises(ValueError, match=needle):
        check_geometry(numel, sizes, strides, offset)
    with pytest.raises(ValueError, match=needle):
        strided_view(memoryview(bytes(numel * 4)), ST.FLOAT, sizes, strides, offset)


def test_geometry_edge_cases():
    assert check_geometry(0, (0, 5), (5, 1), 0) == 0  # empty tensor needs nothing
    assert check_geometry(4, (), (), 3) == 4  # a scalar at offset 3
    assert check_geometry(1, (1000,), (0,), 0) == 1  # an expanded (stride 0) view
    with pytest.raises(ValueError, match="multiple of"):
        strided_view(memoryview(bytes(7)), ST.FLOAT, (1,), (1,), 0)


def test_zero_byte_payload_is_zeros_of_its_shape(tmp_path):
    path, _ = tiny_pt2()
    cfg = json.loads(members(path)[model_member(path, "model_weights_config.json")])
    root = model_member(path).split("/")[0]
    weight = cfg["config"]["0.weight"]["path_name"]
    out = rewrite(path, tmp_path / "fake.pt2", {f"{root}/data/weights/{weight}": b""})
    with engine.load(out) as pkg:
        arr = pkg.model.tensor("0.weight")
        assert arr.shape == (2, 4) and arr.strides == (16, 4) and not arr.any()


def _set_meta(tmp_path, fqn, **changes):
    path, _ = tiny_pt2()

    def fn(doc):
        doc["config"][fqn]["tensor_meta"].update(changes)
    return edit_json(path, tmp_path / "bad.pt2", fn, "model_weights_config.json")


@pytest.mark.parametrize("changes, needle", [
    ({"sizes": [{"as_int": 3}, {"as_int": 4}]}, "need 12 elements but the payload holds 8"),
    ({"strides": [{"as_int": -4}, {"as_int": 1}]}, "negative stride"),
    ({"storage_offset": {"as_int": 100}}, "need 108 elements"),
    ({"dtype": 8}, "need 8 elements but the payload holds 4"),
    ({"dtype": 77}, "unknown dtype code 77"),
    ({"sizes": [{"as_expr": {"expr_str": "s0", "hint": None}}, {"as_int": 4}]}, "symbolic"),
])
def test_payload_metadata_is_validated_at_open_naming_member_and_tensor(tmp_path, changes, needle):
    bad = _set_meta(tmp_path, "0.weight", **changes)
    with pytest.raises(engine.PT2FormatError, match=needle) as e:
        engine.load(bad)
    assert "weight" in e.value.member


def test_weights_are_read_lazily_and_crc_checked_on_first_read(tmp_path):
    from engine.reader.archive import ZipArchive

    path, ep = tiny_pt2()
    cfg = json.loads(members(path)[model_member(path, "model_weights_config.json")])
    root = model_member(path).split("/")[0]
    name = f"{root}/data/weights/{cfg['config']['0.bias']['path_name']}"
    with ZipArchive.open(path) as z:
        offset = z.info(name).offset
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF  # corrupt the payload in place: the directory's CRC no longer matches
    bad = tmp_path / "crc.pt2"
    bad.write_bytes(bytes(data))
    with engine.load(bad) as pkg:  # opening never touches payload bytes
        m = pkg.model
        assert m.tensor("0.weight").shape == (2, 4)
        with pytest.raises(engine.PT2FormatError, match="CRC mismatch") as e:
            m.tensor("0.bias")
        assert e.value.member == name


def test_unknown_tensor_name():
    path, _ = tiny_pt2()
    with engine.load(path) as pkg:
        with pytest.raises(engine.PT2FormatError, match="no stored tensor") as e:
            pkg.model.tensor("nope")
        assert e.value.member == "nope"


def test_store_checks_a_shared_geometry_once_per_payload_size():
    """Entries sharing one meta (the decoder shares equal ones) reuse its checked geometry only
    for a payload of the size it was checked against: a shorter payload is still refused."""
    from engine.reader.schema import TensorMeta
    from engine.reader.tensors import TensorEntry, TensorStore

    meta = TensorMeta(ST.FLOAT, (2, 3), (3, 1), 1)
    payloads = {"a": np.arange(7, dtype="<f4").tobytes(), "b": np.arange(10, 17, dtype="<f4").tobytes(),
                "short": bytes(24), "strided": np.arange(12, dtype="<f4").tobytes()}
    strided = TensorMeta(ST.FLOAT, (2, 3), (1, 2), 0)
    entries = [TensorEntry(name, None, "constant", strided if name == "strided" else meta, name, 24,
                           load=lambda b=buf: memoryview(b)) for name, buf in payloads.items()]
    store = TensorStore(entries, "test")
    assert store.tensor("a").tolist() == [[1, 2, 3], [4, 5, 6]]
    assert store.tensor("b").tolist() == [[11, 12, 13], [14, 15, 16]]
    with pytest.raises(engine.PT2FormatError, match="need 7 elements but the payload holds 6"):
        store.tensor("short")
    assert store.tensor("strided").tolist() == [[0, 2, 4], [1, 3, 5]]
