"""conv_transpose1d / 2d whose weight (and bias) are computed in the graph or model inputs →
ncnn Deconvolution / Deconvolution1D / DeconvolutionDepthWise with ``dynamic_weight=1``, both
dialects, batch of one and of two, and unbatched."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.harness import DIALECTS, check_module


class Dynamic2d(nn.Module):
    def __init__(self, groups: int, bias: bool, **kw):
        super().__init__()
        self.groups, self.bias, self.kw = groups, bias, kw

    def forward(self, x, w, b):
        return F.conv_transpose2d(x, w * 0.5, b if self.bias else None, groups=self.groups, **self.kw)


CASES_2D = [
    dict(groups=1, bias=False, stride=(2, 2), padding=(1, 1), output_padding=(1, 1)),
    dict(groups=2, bias=True, stride=(1, 2), padding=(2, 1), dilation=(2, 1)),  # 2 input channels per group
    dict(groups=4, bias=True, stride=2),  # depthwise
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("batch", [1, 2, None])  # None: an unbatched (C, H, W) input
@pytest.mark.parametrize("case", CASES_2D, ids=lambda c: f"g{c['groups']}-bias{int(c['bias'])}")
def test_conv_transpose2d_with_a_computed_weight(tmp_path, dialect, batch, case):
    torch.manual_seed(0)
    kw = dict(case)
    groups, bias = kw.pop("groups"), kw.pop("bias")
    in_c, out_g = 4, (3 if groups != 4 else 1)
    x = torch.randn(in_c, 6, 7) if batch is None else torch.randn(batch, in_c, 6, 7)
    inputs = [x, torch.randn(in_c, out_g, 3, 3), torch.randn(out_g * groups)]
    c = check_module(Dynamic2d(groups, bias, **kw), inputs, tmp_path, dialect=dialect, tol=1e-4)
    types = [op.type for op in c.result.ncnn.ops]
    assert any(t.startswith("Deconvolution") for t in types), types
    assert all(op.params.get(28) == 1 for op in c.result.ncnn.ops if op.type.startswith("Deconvolution"))


class Dynamic1d(nn.Module):
    def forward(self, x, w, b):
        return F.conv_transpose1d(x, w.relu(), b, stride=2, padding=1, output_padding=1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_conv_transpose1d_with_a_weight_input(tmp_path, dialect):
    torch.manual_seed(0)
    c = check_module(Dynamic1d(), [torch.randn(1, 3, 9), torch.randn(3, 5, 4), torch.randn(5)], tmp_path,
                     dialect=dialect, tol=1e-4)
    assert "Deconvolution1D" in [op.type for op in c.result.ncnn.ops]
