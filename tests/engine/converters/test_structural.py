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
