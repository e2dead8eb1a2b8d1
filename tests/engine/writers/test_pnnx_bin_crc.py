"""``.pnnx.bin`` members holding an unmodified weight take the CRC the reader already checked
(:mod:`engine.reader.verified`) instead of hashing the bytes again; every other buffer is hashed.
Python's zipfile re-hashes every member of the written file, so a wrong reused CRC fails."""
from __future__ import annotations

import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.convert import ConvertOptions, convert  # noqa: E402
from engine.reader import verified  # noqa: E402
from engine.reader.archive import ZipArchive  # noqa: E402
from engine.writers import pnnx_writer  # noqa: E402
from tests.harness import export_pt2  # noqa: E402


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)  # weights kept as stored: CRC reused
        self.fc = torch.nn.Linear(8, 5)
        self.scale = torch.nn.Parameter(torch.rand(5))   # folded into 2 * scale + 1: hashed

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3))) * (self.scale * 2 + 1)


@pytest.fixture
def pt2(tmp_path):
    torch.manual_seed(0)
    return export_pt2(_Net(), (torch.randn(1, 3, 6, 6),), tmp_path / "net.pt2")


def test_crc_of_answers_only_for_a_whole_checked_member_of_an_open_archive(pt2):
    z = ZipArchive.open(pt2)
    weights = [m for m in z.members if "/data/weights/" in m.name and m.size >= 8]
    assert weights
    for m in weights:
        a = np.frombuffer(z.view(m.name), np.uint8)
        assert verified.crc_of(a) == m.crc
        assert verified.crc_of(a[:-1]) is None          # a prefix
        assert verified.crc_of(a[1:]) is None           # same end, other start
        assert verified.crc_of(a.copy()) is None        # same bytes elsewhere
        assert verified.crc_of(a[::2]) is None          # strided
    unread = [m for m in z.members if m.name not in {w.name for w in weights}]
    assert all(verified.crc_of(np.frombuffer(bytes(z._buf[m.offset:m.offset + m.size]), np.uint8)) is None
               for m in unread if m.size)
    a = np.frombuffer(z.view(weights[0].name), np.uint8)
    z.close()
    assert verified.crc_of(a) is None                   # closed: the address proves nothing now


def test_written_pnnx_bin_reuses_checked_crcs_and_every_crc_is_right(pt2, tmp_path, monkeypatch):
    monkeypatch.setattr(pnnx_writer, "_CRC_LOOKUP_MIN", 0)  # every member asks (these are all small)
    answers = []
    crc_of = verified.crc_of
    monkeypatch.setattr(verified, "crc_of", lambda a: answers.append((a.tobytes(), crc_of(a))) or answers[-1][1])
    res = convert(str(pt2), ConvertOptions())
    res.write(pnnx_param=str(tmp_path / "m.pnnx.param"), pnnx_bin=str(tmp_path / "m.pnnx.bin"))
    with zipfile.ZipFile(pt2) as src:
        stored = {src.read(i) for i in src.infolist() if "/data/weights/" in i.filename}
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin") as zf:
        assert zf.testzip() is None                     # zipfile re-hashes every member
        written = [zf.read(i) for i in zf.infolist()]
    reused = {data for data, crc in answers if crc is not None}
    assert len(answers) == len(written)
    assert reused == {data for data in written if data in stored}  # every unmodified weight, no other
    assert 0 < len(reused) < len(written)               # conv and fc reused, the folded scale hashed


def test_small_members_are_hashed_without_a_lookup(pt2, tmp_path, monkeypatch):
    asked = []
    crc_of = verified.crc_of
    monkeypatch.setattr(verified, "crc_of", lambda a: asked.append(a.nbytes) or crc_of(a))
    res = convert(str(pt2), ConvertOptions())
    res.write(pnnx_param=str(tmp_path / "m.pnnx.param"), pnnx_bin=str(tmp_path / "m.pnnx.bin"))
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin") as zf:
        assert zf.testzip() is None
        assert all(i.file_size <= pnnx_writer._CRC_LOOKUP_MIN for i in zf.infolist())
    assert asked == []                                  # a lookup costs more than hashing a few KB
