"""Unit tests of engine.reader.archive: central directory parsing and member validation."""
from __future__ import annotations

import struct
import zipfile
import zlib

import pytest

from engine.errors import PT2FormatError
from engine.reader.archive import DEFLATED, STORED, ZipArchive
from tests.engine.reader.unit_models import write_zip


def _zip(tmp_path, contents, **kw):
    return write_zip(tmp_path / "a.zip", contents, **kw)


def test_stored_member_is_a_zero_copy_view_of_the_mapping(tmp_path):
    path = _zip(tmp_path, {"r/a": b"hello", "r/b": b"x" * 1000})
    with ZipArchive.open(path) as z:
        assert [m.name for m in z.members] == ["r/a", "r/b"]
        m = z.info("r/b")
        assert (m.method, m.size, m.compressed_size) == (STORED, 1000, 1000)
        view = z.view("r/b")
        assert isinstance(view, memoryview) and view.readonly
        assert bytes(view) == b"x" * 1000
        with open(path, "rb") as f:
            assert f.read()[m.offset:m.offset + 5] == b"xxxxx"
        assert z.read("r/a") == b"hello"


def test_deflated_member_is_inflated_and_crc_checked(tmp_path):
    data = bytes(range(256)) * 40
    path = _zip(tmp_path, {"r/d": data}, compression=zipfile.ZIP_DEFLATED)
    with ZipArchive.open(path) as z:
        assert z.info("r/d").method == DEFLATED
        assert z.read("r/d") == data


def test_zip64_members(tmp_path):
    path = tmp_path / "z64.zip"
    with zipfile.ZipFile(path, "w") as z:
        with z.open("r/big", "w", force_zip64=True) as f:
            f.write(b"abc" * 100)
    with ZipArchive.open(path) as z:
        assert z.read("r/big") == b"abc" * 100


def test_torch_aligned_archive_offsets(tmp_path):
    """torch's writer pads every member's data to 64 bytes via the local extra field."""
    from tests.engine.reader.unit_models import tiny_pt2

    path, _ = tiny_pt2()
    with ZipArchive.open(path) as z:
        weights = [m for m in z.members if "/data/weights/weight_" in m.name]
        assert weights and all(m.offset % 64 == 0 for m in weights)
        for m in z.members:
            assert zipfile.ZipFile(path).read(m.name) == z.read(m.name)


@pytest.mark.parametrize("data, needle", [
    (b"", "empty file"),
    (b"PK\x03\x04" + b"\0" * 40, "truncated"),
    (b"hello world, not a zip at all" * 3, "not a zip archive"),
    (b"\x80\x02}q\x00." + b"\0" * 30, "torch.save pickle"),
])
def test_not_a_zip(tmp_path, data, needle):
    p = tmp_path / "x.pt2"
    p.write_bytes(data)
    with pytest.raises(PT2FormatError, match=needle) as e:
        ZipArchive.open(p)
    assert e.value.member == str(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(PT2FormatError, match="no such file"):
        ZipArchive.open(tmp_path / "nope.pt2")
    with pytest.raises(PT2FormatError, match="directory"):
        ZipArchive.open(tmp_path)


def test_truncated_archive(tmp_path):
    path = _zip(tmp_path, {"r/a": b"a" * 5000, "r/b": b"b" * 5000})
    data = path.read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(data[:-30])
    with pytest.raises(PT2FormatError, match="truncated|not a zip|corrupt"):
        ZipArchive.open(cut)
    cut.write_bytes(data[:4000] + data[-(len(data) - 10010):])
    with pytest.raises(PT2FormatError):
        ZipArchive.open(cut)


def test_duplicate_members_refused(tmp_path):
    path = tmp_path / "dup.zip"
    with pytest.warns(UserWarning):
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("r/a", b"1")
            z.writestr("r/a", b"2")
    with pytest.raises(PT2FormatError, match="duplicate member") as e:
        ZipArchive.open(path)
    assert e.value.member == "r/a"


@pytest.mark.parametrize("name", ["../evil", "r/../../evil", "/abs/path", "C:/win", "r\\x"])
def test_unsafe_member_names_refused(tmp_path, name):
    path = tmp_path / "bad.zip"
    with zipfile.ZipFile(path, "w") as z:
        info = zipfile.ZipInfo("r/ok")
        z.writestr(info, b"1")
        info = zipfile.ZipInfo("placeholder")
        info.filename = name  # bypass zipfile's own sanitizing
        z.writestr(info, b"2")
    with pytest.raises(PT2FormatError, match="unsafe|absolute|backslash"):
        ZipArchive.open(path)


def test_crc_mismatch_detected_on_first_read(tmp_path):
    path = _zip(tmp_path, {"r/a": b"A" * 100, "r/b": b"B" * 100})
    data = bytearray(path.read_bytes())
    i = data.index(b"B" * 100)
    data[i + 50] = ord("C")
    path.write_bytes(bytes(data))
    with ZipArchive.open(path) as z:  # opening does not read data
        assert z.read("r/a") == b"A" * 100
        with pytest.raises(PT2FormatError, match="CRC mismatch") as e:
            z.view("r/b")
        assert e.value.member == "r/b"


def _patch_central_sizes(path, name: bytes, usize: int):
    """Rewrite a member's uncompressed size in the central directory (a lying archive)."""
    data = bytearray(path.read_bytes())
    pos = data.index(b"PK\x01\x02")
    while pos >= 0:
        nlen = struct.unpack_from("<H", data, pos + 28)[0]
        if bytes(data[pos + 46:pos + 46 + nlen]) == name:
            struct.pack_into("<I", data, pos + 24, usize)
            break
        pos = data.find(b"PK\x01\x02", pos + 4)
    path.write_bytes(bytes(data))


def test_decompression_bomb_refused_before_inflating(tmp_path):
    path = _zip(tmp_path, {"r/bomb": b"\0" * 100_000}, compression=zipfile.ZIP_DEFLATED)
    _patch_central_sizes(path, b"r/bomb", 3_000_000_000)  # declared 3 GB from ~100 bytes
    with ZipArchive.open(path) as z:
        with pytest.raises(PT2FormatError, match="decompression bomb") as e:
            z.read("r/bomb", limit=4 << 30)
        assert e.value.member == "r/bomb"
        with pytest.raises(PT2FormatError, match="limit"):
            z.read("r/bomb", limit=1 << 20)


def test_inflate_stops_at_the_declared_size(tmp_path):
    path = _zip(tmp_path, {"r/lie": b"\0" * 50_000}, compression=zipfile.ZIP_DEFLATED)
    _patch_central_sizes(path, b"r/lie", 1000)
    with ZipArchive.open(path) as z:
        with pytest.raises(PT2FormatError, match="past its declared size"):
            z.read("r/lie")


def test_corrupt_deflate_stream(tmp_path):
    raw = zlib.compress(b"hello" * 100)[2:-4]
    path = _zip(tmp_path, {"r/x": b"hello" * 100}, compression=zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    i = data.index(raw[:8])
    data[i:i + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    with ZipArchive.open(path) as z:
        with pytest.raises(PT2FormatError, match="deflate|CRC"):
            z.read("r/x")


def test_overlapping_members_refused(tmp_path):
    path = _zip(tmp_path, {"r/a": b"a" * 100, "r/b": b"b" * 100})
    data = bytearray(path.read_bytes())
    # make r/a claim 300 bytes: its data now runs into r/b's local header
    pos = data.index(b"PK\x01\x02")
    struct.pack_into("<II", data, pos + 20, 300, 300)
    path.write_bytes(bytes(data))
    with pytest.raises(PT2FormatError, match="overlaps|past the end"):
        ZipArchive.open(path)


def test_encrypted_and_unknown_method_refused(tmp_path):
    path = _zip(tmp_path, {"r/a": b"a" * 10})
    data = bytearray(path.read_bytes())
    pos = data.index(b"PK\x01\x02")
    struct.pack_into("<H", data, pos + 8, 1)  # flag bit 0: encrypted
    enc = tmp_path / "enc.zip"
    enc.write_bytes(bytes(data))
    with pytest.raises(PT2FormatError, match="encrypted"):
        ZipArchive.open(enc)
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, pos + 10, 14)  # LZMA
    lz = tmp_path / "lzma.zip"
    lz.write_bytes(bytes(data))
    with pytest.raises(PT2FormatError, match="compression method 14"):
        ZipArchive.open(lz)


def test_nested_zip_from_a_stored_member_is_zero_copy(tmp_path):
    inner = _zip(tmp_path, {"archive/data.pkl": b"\x80\x02}q\x00.", "archive/data/0": b"\1" * 64})
    outer = write_zip(tmp_path / "outer.zip", {"r/inner.pt": inner.read_bytes()})
    with ZipArchive.open(outer) as z:
        nested = ZipArchive.from_buffer(z.view("r/inner.pt"), "outer:r/inner.pt")
        assert bytes(nested.view("archive/data/0")) == b"\1" * 64
        assert nested.view("archive/data/0").obj is z.view("r/inner.pt").obj


def test_views_survive_close(tmp_path):
    import numpy as np

    path = _zip(tmp_path, {"r/a": np.arange(16, dtype="<f4").tobytes()})
    z = ZipArchive.open(path)
    arr = np.frombuffer(z.view("r/a"), dtype="<f4")
    z.close()
    assert arr[3] == 3.0
