"""The generated ``<stem>_pnnx.py`` and ``<stem>_ncnn.py``, run for real.

Every model is built and exported with real ``torch.export``; the scripts are imported and run:
the PyTorch module against the original (relative error ≤ 1e-5), its
``export_exported_program()`` re-exported, the ncnn script against PyTorch, and the re-exported
package converted again and compared with the first ncnn model (``tests/roundtrip.py``).
Covered: pytree inputs/outputs (tuple, list, dict, keyword arguments), dynamic dims with their
ranges, integer (token id), bool and rank-0 inputs, persistent and non-persistent buffers,
float16/float64 weights, a partial conversion, batch axes read from the ncnn graph, the other
exports, and invalid requests.
"""
from __future__ import annotations

import ast
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from engine.convert import ConvertOptions, convert  # noqa: E402
from engine.convert.shapes import set_batch_dim  # noqa: E402
from engine.errors import WriteError  # noqa: E402
from engine.reader.package import load  # noqa: E402
from engine.writers.ncnn_py import ncnn_python  # noqa: E402
from tests.harness import Fn  # noqa: E402
from tests.roundtrip import check_scripts, flatten, load_script, max_error  # noqa: E402


def _convert(module, args, tmp_path, kwargs=None, dynamic_shapes=None):
    ep = torch.export.export(module.eval(), tuple(args), kwargs, dynamic_shapes=dynamic_shapes)
    path = tmp_path / "source.pt2"
    torch.export.save(ep, str(path))
    return convert(str(path), ConvertOptions(fp16=False, lint=True))


def _imports(path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Hardswish())
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3))).softmax(-1)


def test_a_cnn_through_both_scripts_and_the_round_trip(tmp_path):
    torch.manual_seed(0)
    m = SmallCNN().eval()
    with torch.no_grad():
        m.features[1].running_mean.uniform_(-1, 1)
        m.features[1].running_var.uniform_(0.5, 2)
    result = _convert(m, [torch.randn(1, 3, 16, 16)], tmp_path)
    c = check_scripts(result, m, tmp_path / "out")
    assert c.pnnx_error <= 1e-5 and c.ncnn_error <= 1e-4 and c.roundtrip_error <= 1e-5
    assert c.roundtrip_layers <= c.layers
    assert _imports(c.pnnx_py) <= {"os", "operator", "zipfile", "numpy", "torch"}
    assert _imports(c.ncnn_py) <= {"os", "ncnn", "numpy", "torch"}
    text = c.pnnx_py.read_text()
    assert "self.conv2d = nn.Conv2d(in_channels=3, out_channels=8" in text  # named after the ATen node
    assert "# features.0" in text and "# head" in text  # module paths
    gen = load_script(c.pnnx_py)
    assert {"conv2d.bias", "conv2d.weight"} <= {k for k, _ in gen.Model().named_parameters()}
    assert "nn.BatchNorm2d(" in text  # exact in the pnnx model; folded into the ncnn Convolution
    assert "BatchNorm" not in {op.type for op in result.ncnn.ops}


class PyTrees(nn.Module):
    """Tuple/list/dict inputs and outputs, a keyword argument, token ids, two kinds of buffer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.emb = nn.Embedding(7, 4)
        self.register_buffer("offset", torch.linspace(-1, 1, 4).reshape(1, 4, 1, 1))
        self.register_buffer("scale", torch.full((1, 4, 1, 1), 0.5), persistent=False)

    def forward(self, x, pair, ids, *, bias):
        a, b = pair
        return (self.conv(x) * self.scale + self.offset, [(a + b).relu() + bias, {"emb": self.emb(ids)}])


def test_pytrees_dynamic_dims_token_ids_and_buffers(tmp_path):
    torch.manual_seed(0)
    m = PyTrees().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    args = (torch.randn(2, 3, 8, 8), (torch.randn(2, 5), torch.randn(2, 5)), torch.randint(0, 7, (2, 6)))
    result = _convert(m, args, tmp_path, {"bias": torch.randn(5)},
                      {"x": {0: batch}, "pair": ({0: batch}, {0: batch}), "ids": {0: batch}, "bias": None})
    assert result.ok, result.errors
    c = check_scripts(result, m, tmp_path / "out")
    gen = load_script(c.pnnx_py)
    assert "def forward(self, x, pair, ids, bias):" in c.pnnx_py.read_text()
    net = gen.Model()
    assert set(dict(net.named_buffers())) == {"b_offset", "b_scale"} and "b_scale" not in net.state_dict()
    # the Python module and the ncnn model both take another batch size (ncnn: Mat batch_index)
    x = (torch.randn(5, 3, 8, 8), (torch.randn(5, 5), torch.randn(5, 5)), torch.randint(0, 7, (5, 6)))
    bias = torch.randn(5)
    with torch.no_grad():
        want = m(*x, bias=bias)
        assert max_error(net(*x, bias=bias), want) <= 1e-5
    assert max_error(load_script(c.ncnn_py).run([x[0], *x[1], x[2], bias]), want) <= 1e-4
    # the re-exported package keeps the dim dynamic with the source's range and the input structure
    again = load(c.pnnx_py.with_suffix(".pt2")).model.signature
    assert [(s.min, s.max) for s in again.symbols.values()] == [(1, 16)]
    assert str(again.in_tree) == "((x, (pair_0, pair_1), ids), {'bias': bias})"
    assert str(again.out_tree).startswith("(") and "{'emb': " in str(again.out_tree)


class Mixed(nn.Module):
    """A float16 layer, a float64 buffer and a rank-0 input."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4).half()
        self.register_buffer("b64", torch.randn(4, dtype=torch.float64))

    def forward(self, x16, y64, s):
        return self.fc(x16), y64 * self.b64, y64.float() * s + 1


def test_rank0_input_and_weight_dtypes_are_kept(tmp_path):
    torch.manual_seed(0)
    m = Mixed().eval()
    result = _convert(m, [torch.randn(1, 8).half(), torch.randn(1, 4, dtype=torch.float64), torch.tensor(1.5)],
                      tmp_path)
    c = check_scripts(result, m, tmp_path / "out")
    net = load_script(c.pnnx_py).Model()
    assert net.linear.weight.dtype == torch.float16 and net.b_b64.dtype == torch.float64
    text = c.ncnn_py.read_text()
    assert "to_mat(s, 233)" in text  # a rank-0 input has no batch axis
    ep = torch.export.load(str(c.pnnx_py.with_suffix(".pt2")))
    assert ep.state_dict["linear.weight"].dtype == torch.float16


class Partial(nn.Module):
    """A bool mask (``where`` on a run-time condition: converted) and an operator ncnn does not
    have."""

    def forward(self, x, mask):
        return torch.special.bessel_j0(x.relu()) * 2, torch.where(mask, x, -x)


def test_a_partial_conversion_still_runs_in_pytorch(tmp_path):
    m = Partial()
    result = _convert(m, [torch.randn(1, 3, 4), torch.rand(1, 3, 4) > 0.5], tmp_path)
    assert not result.ok
    c = check_scripts(result, m, tmp_path / "out", ncnn=False)
    assert c.pnnx_error == 0.0
    text = c.pnnx_py.read_text()
    assert "torch.ops.aten.special_bessel_j0.default(" in text and "torch.ops.aten.where" not in text
    assert "make_inputs" in text and "torch.rand((1, 3, 4)) > 0.5" in text  # bool input
    script = c.ncnn_py.read_text()
    assert "custom layers (aten_special_bessel_j0)" in script
    assert (tmp_path / "out" / "model_pnnx.pt2").is_file()


def test_batch_axes_come_from_the_ncnn_graph(tmp_path):
    """The script feeds and reads each blob with the batch axis the conversion recorded for that
    model input/output (``meta["inputs"/"outputs"]``) — whatever it is — never assuming dim 0."""
    result = _convert(nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU()), [torch.randn(1, 3, 5, 5)], tmp_path)
    g = result.ncnn.copy()
    src = ncnn_python(g, result.pnnx, param_path=tmp_path / "m.ncnn.param", bin_path=tmp_path / "m.ncnn.bin",
                      py_path=tmp_path / "m_ncnn.py")
    assert "ex.input('in0', to_mat(input, 0))" in src and "from_mat(mat, 0, (1, 4, 5, 5)" in src
    g.meta["inputs"][0]["batch_dim"] = 2
    g.meta["outputs"][0]["batch_dim"] = None
    src = ncnn_python(g, result.pnnx, param_path=tmp_path / "m.ncnn.param", bin_path=tmp_path / "m.ncnn.bin",
                      py_path=tmp_path / "m_ncnn.py")
    assert "ex.input('in0', to_mat(input, 2))" in src and "from_mat(mat, 233, (1, 4, 5, 5)" in src


def test_an_output_read_with_its_batch_moved(tmp_path):
    """``conv(x).permute(1, 0, 2, 3)``: the output is the convolution's blob (batch at dim 0) read
    with the batch at dim 1; the script reads it along the output's own batch axis."""
    conv = nn.Conv2d(3, 4, 1)
    m = Fn(lambda x: conv(x).permute(1, 0, 2, 3))
    result = _convert(m, [torch.randn(2, 3, 5, 7)], tmp_path)
    assert [d["batch_dim"] for d in result.ncnn.meta["outputs"]] == [1]
    c = check_scripts(result, m, tmp_path / "out")
    assert "from_mat(mat, 1, (4, 2, 5, 7)" in c.ncnn_py.read_text()
    assert c.ncnn_error <= 1e-4


def test_torchscript_and_onnx_exports(tmp_path):
    m = SmallCNN().eval()
    result = _convert(m, [torch.randn(1, 3, 8, 8)], tmp_path)
    result.write_all(tmp_path, "m", python=True, fp16=False)
    gen = load_script(tmp_path / "m_pnnx.py")
    gen.export_torchscript()
    traced = torch.jit.load(str(tmp_path / "m_pnnx.pt"))
    args, _ = gen.make_inputs()
    with torch.no_grad():
        assert max_error(traced(*args), m(*args)) <= 1e-5
    if "onnx" not in sys.modules:
        try:
            import onnx  # noqa: F401
        except ImportError:
            return  # torch.onnx needs the onnx package
    gen.export_onnx()
    assert (tmp_path / "m_pnnx.onnx").stat().st_size > 0


def test_invalid_requests_fail_with_one_line_and_write_nothing(tmp_path):
    result = _convert(nn.ReLU(), [torch.randn(1, 4)], tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "m.ncnn.param").write_text("old")
    paths = [out / "m.ncnn.param", out / "m.ncnn.bin", out / "m.pnnx.param", out / "m.pnnx.bin"]
    with pytest.raises(WriteError) as e:  # a script in a folder that does not exist
        result.write(*paths, pnnx_py=tmp_path / "missing" / "m_pnnx.py", ncnn_py=out / "m_ncnn.py")
    assert str(e.value) == f"{tmp_path / 'missing' / 'm_pnnx.py'}: the folder does not exist"
    with pytest.raises(WriteError, match="runs the pnnx model"):  # a _pnnx.py without its .pnnx.bin
        result.write(*paths[:2], pnnx_py=out / "m_pnnx.py")
    (out / "m_ncnn.py").mkdir()
    with pytest.raises(WriteError, match="m_ncnn.py: the path is a folder"):  # the last file written
        result.write(*paths, pnnx_py=out / "m_pnnx.py", ncnn_py=out / "m_ncnn.py")
    assert sorted(p.name for p in out.iterdir()) == ["m.ncnn.param", "m_ncnn.py"]  # nothing half-written
    assert (out / "m.ncnn.param").read_text() == "old"


def test_scripts_of_a_model_with_two_outputs_return_both(tmp_path):
    class TwoOut(nn.Module):
        def forward(self, x):
            y = x.sigmoid()
            return y, [x * y]

    m = TwoOut()
    result = _convert(m, [torch.randn(1, 6)], tmp_path)
    c = check_scripts(result, m, tmp_path / "out")
    got = load_script(c.ncnn_py).test_inference()
    assert isinstance(got, tuple) and isinstance(got[1], list)
    assert [tuple(t.shape) for t in flatten(got)] == [(1, 6), (1, 6)]
    assert np.isfinite(c.ncnn_error)


class Spectra(nn.Module):
    """stft of a 1-D signal with a Hann window of 12 samples, moved around while complex, and a
    complex istft of a two-sided spectrum: pnnx names the windows, the scripts make them."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(12))
        self.register_buffer("inverse_window", torch.hamming_window(16))

    def forward(self, x, spectrum):
        s = torch.stft(x, 16, 4, 12, self.window, return_complex=True).transpose(0, 1)
        y = torch.istft(torch.view_as_complex(spectrum), 16, 4, window=self.inverse_window, center=False,
                        onesided=False, return_complex=True)
        return torch.view_as_real(s), torch.view_as_real(y)


def test_spectral_transforms_through_both_scripts_and_the_round_trip(tmp_path):
    m = Spectra()
    result = _convert(m, [torch.randn(100), torch.randn(16, 9, 2)], tmp_path)
    c = check_scripts(result, m, tmp_path / "out")
    assert c.pnnx_error <= 1e-5 and c.ncnn_error <= 1e-4 and c.roundtrip_error <= 1e-5
    assert c.roundtrip_layers <= c.layers


class RelativeAttention(nn.Module):
    """MaxViT's attention over partitions ``(B, G, P, C)``: heads split with reshape/permute, the
    scale on k, ``einsum`` scores plus a relative position bias ``(1, heads, P, P)`` gathered
    from a table, softmax, ``einsum`` with v, heads merged."""

    def __init__(self, dim: int, head_dim: int, size: int):
        super().__init__()
        self.heads, self.head_dim, self.n = dim // head_dim, head_dim, size * size
        self.to_qkv, self.merge, self.scale = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim), dim ** -0.5
        self.table = nn.Parameter(torch.randn((2 * size - 1) ** 2, self.heads) * 0.5)
        ys, xs = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        coords = torch.stack([ys.flatten(), xs.flatten()])
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + size - 1
        self.register_buffer("index", rel[..., 0] * (2 * size - 1) + rel[..., 1])

    def forward(self, x):
        b, g, p, d = x.shape
        q, k, v = (t.reshape(b, g, p, self.heads, self.head_dim).permute(0, 1, 3, 2, 4)
                   for t in torch.chunk(self.to_qkv(x), 3, dim=-1))
        bias = self.table[self.index.view(-1)].view(self.n, self.n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        a = torch.softmax(torch.einsum("bghid,bghjd->bghij", q, k * self.scale) + bias, dim=-1)
        y = torch.einsum("bghij,bghjd->bghid", a, v)
        return self.merge(y.permute(0, 1, 3, 2, 4).reshape(b, g, p, d))


class WindowGridBlock(nn.Module):
    """A MaxViT block's attention half: window attention (p × p windows), then grid attention
    (a grid of p × p cells, partitioned like windows of the grid's size and the two partition
    axes swapped), each in a pre-norm residual."""

    def __init__(self, dim: int = 16, head_dim: int = 8, p: int = 2):
        super().__init__()
        self.p = p
        self.window, self.grid = RelativeAttention(dim, head_dim, p), RelativeAttention(dim, head_dim, p)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)

    @staticmethod
    def partition(x, p):
        b, c, h, w = x.shape
        x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(b, (h // p) * (w // p), p * p, c)

    @staticmethod
    def departition(x, p, hp, wp):
        b, _, _, c = x.shape
        return x.reshape(b, hp, wp, p, p, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, hp * p, wp * p)

    def forward(self, x):
        _, _, h, w = x.shape
        p, gh, gw = self.p, h // self.p, w // self.p
        y = self.partition(x, p)
        y = y + self.window(self.norm1(y))
        y = self.partition(self.departition(y, p, gh, gw), gh).transpose(-2, -3)
        y = y + self.grid(self.norm2(y))
        return self.departition(y.transpose(-2, -3), gh, p, p)


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_window_and_grid_attention_round_trip_has_no_more_layers(tmp_path, dialect):
    """MaxViT-style attention written with ``einsum``: the ``_pnnx.py`` spells it with
    ``torch.matmul`` (core ATen: over the ``bmm`` views), which the round trip recomposes into a 5-D
    (batch, windows, heads, L, E) ``scaled_dot_product_attention`` (training dialect); its ncnn
    model has no more layers than the first (no Reshapes merging windows × heads for SDPA, no
    Tile of the bias over the windows)."""
    torch.manual_seed(0)
    m = WindowGridBlock().eval()
    ep = torch.export.export(m, (torch.randn(1, 16, 8, 8),))
    if dialect == "core":
        ep = ep.run_decompositions()
    torch.export.save(ep, str(tmp_path / "source.pt2"))
    result = convert(str(tmp_path / "source.pt2"), ConvertOptions(fp16=False, lint=True))
    c = check_scripts(result, m, tmp_path / "out")  # asserts the layer count too
    assert c.roundtrip_error <= 1e-5 and c.roundtrip_layers <= c.layers
    out = tmp_path / "out"
    if dialect == "training":
        assert "F.scaled_dot_product_attention" in (out / "model_roundtrip.pnnx.param").read_text()
    types = [line.split()[0] for line in (out / "model_roundtrip.ncnn.param").read_text().splitlines()[2:]]
    assert "SDPA" not in types and "Tile" not in types and types.count("Softmax") == 2


class RunTimeSizes(nn.Module):
    """Sizes computed from the inputs' sizes at run time, in every form the pnnx graph keeps them:
    a slice to another input's length, a select at a computed index, a negative floor division as
    a slice end, a narrow from a computed start, an interpolation to computed sizes, and a reshape
    with two computed dims."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, 64, 16))

    def forward(self, x, y):
        a = x + self.pos[:, : x.shape[1]]
        b = y[:, :, y.size(2) // 3, 1:-y.size(3) // 7] * 1.5
        c = y.narrow(3, y.size(3) // 4, 2) * 2.0
        d = F.interpolate(y, size=(y.size(2) // 2, x.size(1) * 2), mode="nearest")
        e = y.reshape(-1, y.size(2) // 4, 3, 1).sigmoid()
        return a, b, c, d, e


def test_sizes_computed_at_run_time_are_read_from_the_inputs(tmp_path):
    auto = torch.export.Dim.AUTO
    m = RunTimeSizes().eval()
    result = _convert(m, [torch.randn(1, 9, 16), torch.randn(1, 3, 16, 20)], tmp_path,
                      dynamic_shapes=({1: auto}, {2: auto, 3: auto}))
    c = check_scripts(result, m, tmp_path / "out")
    text = c.pnnx_py.read_text()
    assert "[:, :x.size(1)]" in text  # the slice end read from x
    assert ".narrow(2, y.size(2) // 3, 1)" in text  # the select at a computed index
    assert ":(-y.size(3)) // 7]" in text  # Python's floor of the negative size
    assert ".narrow(3, y.size(3) // 4, 2)" in text
    assert "size=[y.size(2) // 2, x.size(1) * 2]" in text and "size_expr" not in text
    assert ".reshape(-1, y.size(2) // 4, 3, 1)" in text
    # the same scripts at other sizes
    gen, ncnn_script = load_script(c.pnnx_py), load_script(c.ncnn_py)
    other = [torch.randn(1, 23, 16), torch.randn(1, 3, 28, 24)]
    with torch.no_grad():
        want = m(*other)
        assert max_error(gen.Model()(*other), want) <= 1e-5
    assert max_error(ncnn_script.run(other), want) <= 1e-4


def test_view_as_complex_of_a_permuted_input(tmp_path):
    """(…, 2) pairs a permute left apart in memory (and a product of them, which keeps their
    strides) are made contiguous for view_as_complex: ``_pnnx.py`` runs and re-exports (ncnn has
    no complex exp, so the conversion is partial)."""
    m = Fn(lambda x: torch.view_as_real(torch.view_as_complex(x.permute(1, 0, 2) * 2).exp()))
    result = _convert(m, [torch.randn(4, 3, 2)], tmp_path)
    c = check_scripts(result, m, tmp_path / "out", ncnn=False)
    assert "torch.view_as_complex(" in c.pnnx_py.read_text() and ".contiguous())" in c.pnnx_py.read_text()
