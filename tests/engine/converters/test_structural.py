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
