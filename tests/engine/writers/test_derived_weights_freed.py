"""Writing a model does not keep the weights it computed for the ``.bin`` (a BatchNorm folded into
its convolution, a transposed kernel): :meth:`engine.ir.Attribute.peek` hands the writer the data
without storing it on the graph, so a big model's folded kernels are freed one by one as they are
written instead of staying in memory with the graph. What was loaded before stays loaded, and the
files are the same whichever way the data was read."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.convert import ConvertOptions, convert  # noqa: E402
from engine.ir import Attribute  # noqa: E402
from tests.harness import export_pt2, rel_error  # noqa: E402
from tests.ncnn_runtime import run_layout  # noqa: E402


class _ConvBn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.up = torch.nn.ConvTranspose2d(16, 4, 2, stride=2)

    def forward(self, x):
        return self.up(torch.relu(self.bn(self.conv(x))))


@pytest.fixture
def model(tmp_path):
    torch.manual_seed(0)
    m = _ConvBn().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(1, 3, 8, 8)
    return m, x, export_pt2(m, (x,), tmp_path / "convbn.pt2")


def _derived(result):
    """The ncnn graph's computed weights (no stored tensor behind them) that nothing loaded yet."""
    conv = next(op for op in result.ncnn.ops if op.type == "Convolution")
    deconv = next(op for op in result.ncnn.ops if op.type == "Deconvolution")
    attrs = [*conv.attrs.values(), *deconv.attrs.values()]
    assert attrs and not any(a.loaded for a in attrs)
    return attrs


def test_writing_leaves_computed_weights_unloaded_and_the_model_right(model, tmp_path):
    m, x, pt2 = model
    result = convert(str(pt2), ConvertOptions(fp16=False))
    attrs = _derived(result)
    paths = [tmp_path / n for n in ("a.ncnn.param", "a.ncnn.bin", "a.pnnx.param", "a.pnnx.bin")]
    result.write(*paths)
    assert not any(a.loaded for a in attrs)  # computed for the file, then dropped
    with torch.no_grad():
        want = m(x).numpy()
    got, = run_layout(paths[0], paths[1], [x.numpy()], result.ncnn.meta)
    assert got.shape == want.shape and rel_error(got, want) < 1e-5

    # loading them (as the Weights panel does) keeps them, and the files come out the same
    for a in attrs:
        a.data
    again = [tmp_path / n for n in ("b.ncnn.param", "b.ncnn.bin", "b.pnnx.param", "b.pnnx.bin")]
    result.write(*again)
    assert all(a.loaded for a in attrs)
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in paths]


def test_peek_reads_without_keeping_and_checks_the_shape():
    calls = []
    a = Attribute(loader=lambda: calls.append(1) or np.arange(6, dtype=np.float32).reshape(2, 3),
                  shape=(2, 3), dtype="f32")
    assert np.array_equal(a.peek(), np.arange(6).reshape(2, 3)) and not a.loaded
    assert np.array_equal(a.peek(), a.data) and a.loaded  # a second peek, then data loads
    a.peek()
    assert len(calls) == 3  # each read before the load ran the loader; none after it
    bad = Attribute(loader=lambda: np.zeros(5, np.float32), shape=(2, 3), dtype="f32")
    with pytest.raises(Exception, match="expected"):
        bad.peek()
