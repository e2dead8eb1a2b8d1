"""Structural rules: inputs, outputs and constants used as data (MemoryData), incl. 0-d ones."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.convert import ConvertOptions, convert  # noqa: E402
from tests.harness import export_pt2  # noqa: E402
from tests.ncnn_runtime import run  # noqa: E402


class ReturnsConstants(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scalar", torch.tensor(2.5))
        self.register_buffer("table", torch.arange(6.0).reshape(2, 3))

    def forward(self, x):
        return torch.relu(x), self.scalar.clone(), self.table.clone()


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_constants_returned_as_outputs_become_memorydata(tmp_path, dialect):
    pt2 = export_pt2(ReturnsConstants(), [torch.randn(1, 4)], tmp_path / "m.pt2", dialect=dialect)
    result = convert(str(pt2), ConvertOptions(fp16=False, lint=True))
    assert result.ok, result.diagnostics
    p, b = tmp_path / "m.param", tmp_path / "m.bin"
    result.write(p, b)
    assert [op.type for op in result.ncnn.ops].count("MemoryData") == 2
    x = np.random.rand(4).astype(np.float32) - 0.5
    relu, scalar, table = run(p, b, {"in0": x}, ["out0", "out1", "out2"])
    np.testing.assert_allclose(relu, np.maximum(x, 0))
    assert scalar.reshape(-1).tolist() == [2.5]
    np.testing.assert_array_equal(table.reshape(2, 3), np.arange(6.0).reshape(2, 3))


class RepeatsOutputs(torch.nn.Module):
    """The same value returned three times and the input twice (a YOLO26 segmentation head
    returns its prototypes beside each output tuple): every output gets its own blob."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        return y, x, y, x + 1, y, x


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_a_value_returned_several_times(tmp_path, dialect):
    """Each repeat was a Noop reading the first blob: a blob read by two layers without a Split,
    which the writer refused."""
    from tests.harness import check_module

    torch.manual_seed(0)
    c = check_module(RepeatsOutputs().eval(), [torch.randn(1, 3, 5, 5)], tmp_path, dialect=dialect)
    assert [o["blob"] for o in c.result.ncnn.meta["outputs"]] == [f"out{k}" for k in range(6)]


class ReturnsNone(torch.nn.Module):
    """Python constants among the outputs (RT-DETR returns ``dn_meta``, None at inference)."""

    def forward(self, x):
        return None, torch.relu(x), (x * 2, None), 3


def test_constant_outputs_get_no_blob_and_verify_compares_the_tensors(tmp_path):
    """The output marker of a constant failed (IndexError) and no model was written; verify
    paired the outputs by position, blaming blobs the model has not got."""
    from engine.verify import VerifyOptions, verify

    pt2 = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(ReturnsNone(), (torch.randn(1, 4),)), str(pt2))
    result = convert(str(pt2), ConvertOptions(fp16=False, lint=True))
    assert result.ok, result.errors
    warned = [d.reason for d in result.diagnostics if d.severity == "warning"]
    assert len(warned) == 3 and all("returns the constant" in w for w in warned), warned
    assert [o["name"] for o in result.ncnn.meta["outputs"]] == ["relu", "mul"]
    p, b = tmp_path / "m.param", tmp_path / "m.bin"
    result.write(p, b)
    x = np.random.rand(4).astype(np.float32) - 0.5
    relu, double = run(p, b, {"in0": x}, ["out0", "out1"])
    np.testing.assert_allclose(relu, np.maximum(x, 0))
    np.testing.assert_allclose(double, x * 2)
    r = verify(pt2, VerifyOptions(fp16=False))
    assert r.ok and r.outputs_ok, [(o.name, o.blob, o.note) for o in r.outputs]
    assert [(o.name, o.blob) for o in r.outputs] == [("relu", "out0"), ("mul", "out1")]


class TimestepInput(torch.nn.Module):
    """A diffusion UNet's call: an image and a one-element timestep ``[1]`` embedded by sin/cos."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x, t):
        freqs = torch.exp(torch.arange(4, dtype=torch.float32) * -0.5)
        emb = t[:, None] * freqs[None]
        emb = self.proj(torch.cat([emb.sin(), emb.cos()], -1))
        return self.conv(x) + emb[:, :, None, None]


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_a_one_element_input_is_fed_whole(tmp_path, dialect):
    """The timestep ``[1]`` has no batch axis to feed it by: ncnn's Python ``Mat(a, batch_index=0)``,
    which the layout said to use, refuses a 1-D array."""
    from tests.harness import check_module

    torch.manual_seed(0)
    c = check_module(TimestepInput().eval(), [torch.randn(1, 3, 6, 6), torch.tensor([10.0])], tmp_path,
                     dialect=dialect)
    assert [i["batch_dim"] for i in c.result.ncnn.meta["inputs"]] == [0, None]
