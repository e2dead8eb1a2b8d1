"""A weight computed from another one along its output channels (a BatchNorm or a layer scale
folded into the kernel) is computed, converted and written a block of channels at a time
(:meth:`engine.ir.Attribute.pieces`): it never exists whole, and both models' files are the
bytes the whole weight gives — fp16 chunks of ``.ncnn.bin``, the ``.pnnx.bin`` member with its
CRC patched into the local header after the data."""
from __future__ import annotations

import math
import zipfile

import numpy as np
import pytest

from engine.converters._weights import derived_rows
from engine.ir import Attribute, IRError
from engine.ir.graph import PIECE
from engine.writers import atomic_files
from engine.writers.storezip import StoreZipWriter


def test_a_weight_computed_by_rows_comes_in_pieces_of_whole_rows_without_loading():
    full = np.arange(10 * 3 * 2, dtype=np.float32).reshape(10, 3, 2)
    asked = []
    a = derived_rows(lambda rows: asked.append(rows) or full[rows] * np.float32(2), full.shape)
    assert a.piecewise
    for size, rows in ((7, 1), (12, 2), (100, 10)):  # rows of 6 values; at least one row a piece
        asked.clear()
        pieces = list(a.pieces(size))
        assert [p.size for p in pieces[:-1]] == [6 * rows] * (len(pieces) - 1)
        assert np.array_equal(np.concatenate(pieces), (full * 2).reshape(-1))
        assert all(r.stop - r.start == rows for r in asked[:-1])
    assert not a.loaded
    assert np.array_equal(a.data, full * 2) and not a.piecewise  # loaded: one piece, the data
    (whole,) = a.pieces(7)
    assert np.array_equal(whole, (full * 2).reshape(-1))


def test_a_weight_without_pieces_is_one_piece_and_wrong_pieces_are_refused():
    lazy = Attribute(loader=lambda: np.ones((4, 5), np.float32), shape=(4, 5), dtype="f32")
    assert not lazy.piecewise and [p.shape for p in lazy.pieces(3)] == [(20,)]
    short = Attribute(loader=lambda: np.ones((4, 5), np.float32), pieces=lambda size: iter([np.ones(7)]),
                      shape=(4, 5), dtype="f32")
    with pytest.raises(IRError, match="7 values"):
        list(short.pieces())


def _zip(tmp_path, members) -> bytes:
    path = tmp_path / "m.pnnx.bin"
    with atomic_files([path]) as (f,):
        zw = StoreZipWriter(f)
        for name, data, pieces in members:
            if pieces:
                zw.write_member_pieces(name, iter(pieces), len(data))
            else:
                zw.write_member(name, data)
        zw.close()
    return path.read_bytes()


def test_a_member_written_in_pieces_is_the_member_written_whole(tmp_path):
    rng = np.random.default_rng(1)
    data = [rng.bytes(n) for n in (70_000, 10, 3 << 16)]
    cuts = [[d[:1000], d[1000:1000], d[1000:]] for d in data]
    whole = _zip(tmp_path, [(f"w{i}", d, None) for i, d in enumerate(data)])
    pieces = _zip(tmp_path, [(f"w{i}", d, c) for i, (d, c) in enumerate(zip(data, cuts))])
    assert pieces == whole
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin") as z:
        assert z.testzip() is None and [z.read(f"w{i}") for i in range(3)] == data


def test_a_member_whose_pieces_fall_short_is_refused(tmp_path):
    with pytest.raises(ValueError, match="holds 5 bytes, not the 6"):
        _zip(tmp_path, [("w", b"123456", [b"12345"])])


torch = pytest.importorskip("torch")


class _Net(torch.nn.Module):
    """A BatchNorm folded into a kernel (ncnn model) of two pieces, odd-sized (fp16
    padding), and a ConvNeXt block whose layer scale is folded into its second Linear, run as
    a 1×1 convolution (both models)."""

    def __init__(self, c: int = 291):
        super().__init__()
        self.conv = torch.nn.Conv2d(57, c, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(c)
        self.norm = torch.nn.LayerNorm(c)
        self.fc1 = torch.nn.Linear(c, 4 * c)
        self.fc2 = torch.nn.Linear(4 * c, c)
        self.gamma = torch.nn.Parameter(torch.rand(c))

    def forward(self, x):
        x = self.bn(self.conv(x))
        y = self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x.permute(0, 2, 3, 1)))))
        return x + (y * self.gamma).permute(0, 3, 1, 2)


def _piecewise(result) -> list[Attribute]:
    return [a for g in (result.ncnn, result.pnnx) for op in g.ops for a in op.attrs.values() if a.piecewise]


@pytest.mark.parametrize("poison", [False, True])
def test_folded_kernels_are_written_in_pieces_as_their_whole_arrays_would_be(tmp_path, poison):
    from engine.convert import convert
    from tests.harness import export_pt2

    torch.manual_seed(0)
    m = _Net().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
        if poison:
            m.conv.weight[3, 2, 1, 1] = float("inf")
    x = torch.randn(1, 57, 4, 4)
    pt2 = export_pt2(m, (x,), tmp_path / "m.pt2")
    result = convert(str(pt2))
    kernels = _piecewise(result)
    sizes = sorted(math.prod(k.shape) for k in kernels)
    assert sizes == [291 * 57 * 9, 4 * 291 * 291, 4 * 291 * 291]  # ncnn: both; pnnx: the layer scale
    assert sizes[0] > PIECE and sizes[0] % 2  # two pieces, fp16 padding

    names = ("m.ncnn.param", "m.ncnn.bin", "m.pnnx.param", "m.pnnx.bin")
    (tmp_path / "a").mkdir()
    first = result.write(*[tmp_path / "a" / n for n in names])
    warned = [d for d in result.diagnostics if d.severity == "warning"]
    assert len(warned) == poison and not any(k.loaded for k in kernels)
    for k in kernels:  # loaded whole: written from the array
        k.data
    (tmp_path / "b").mkdir()
    again = result.write(*[tmp_path / "b" / n for n in names])
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in first]
    with zipfile.ZipFile(first[3]) as z:
        assert z.testzip() is None
    from tests.ncnn_runtime import load_net, run_layout

    _, rp, rb = load_net(first[0], first[1])  # the model written from the pieces loads in ncnn
    assert (rp, rb) == (0, 0)
    if not poison:  # and computes the module
        from tests.harness import TOL, rel_error

        (got,) = run_layout(first[0], first[1], [x.numpy()], result.ncnn.meta)
        with torch.no_grad():
            want = m(x).numpy()
        assert got.shape == want.shape and rel_error(got, want) < TOL[True]
