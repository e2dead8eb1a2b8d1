"""conv3d / conv_transpose3d end to end (both dialects): ncnn Convolution3D,
ConvolutionDepthWise3D, Deconvolution3D, DeconvolutionDepthWise3D on 4-D (C, D, H, W) blobs —
stride, padding (ints, 'same', 'valid'), dilation, groups, bias, output_padding; BatchNorm3d,
constant pads and activations folded into the convolution; fp16 weights."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,dilation", [
    (3, 1, 0, 1),
    (3, 2, 1, 1),
    ((3, 1, 5), (1, 2, 1), (1, 0, 2), 1),
    ((1, 3, 3), 1, (0, 1, 1), (1, 2, 1)),
    (3, 1, "same", 1),
    ((2, 4, 3), 1, "same", (2, 1, 1)),   # asymmetric: the odd pixel goes after
    (2, 1, "valid", 1),
])
def test_conv3d(tmp_path, dialect, kernel, stride, padding, dilation):
    m = nn.Conv3d(3, 5, kernel, stride, padding, dilation)
    c = check_module(m, [torch.randn(1, 3, 6, 9, 10)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution3D"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("in_c,out_c,groups,bias", [(4, 4, 4, True), (4, 8, 2, False), (6, 12, 6, True)])
def test_conv3d_groups(tmp_path, dialect, in_c, out_c, groups, bias):
    m = nn.Conv3d(in_c, out_c, 3, 1, 1, groups=groups, bias=bias)
    c = check_module(m, [torch.randn(1, in_c, 5, 6, 7)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "ConvolutionDepthWise3D"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,output_padding,dilation,groups,bias", [
    (3, 1, 0, 0, 1, 1, True),
    (3, 2, 1, 1, 1, 1, True),
    ((2, 3, 4), (1, 2, 3), (0, 1, 1), (0, 1, 2), 1, 1, False),
    (3, 2, 0, 0, 2, 1, True),
    (3, 2, 1, (1, 0, 1), 1, 4, True),     # depthwise
    (3, 1, 1, 0, 1, 2, False),            # grouped, 2 input channels per group
])
def test_conv_transpose3d(tmp_path, dialect, kernel, stride, padding, output_padding, dilation, groups, bias):
    m = nn.ConvTranspose3d(4, 4, kernel, stride, padding, output_padding, groups, bias, dilation)
    c = check_module(m, [torch.randn(1, 4, 3, 4, 5)], tmp_path, dialect=dialect)
    # unlike the 2-D one, the runtime's grouped DeconvolutionDepthWise3D is right with several
    # input channels per group: no Slice/Concat split
    assert _types(c) == ["Input", "Deconvolution3D" if groups == 1 else "DeconvolutionDepthWise3D"]


class ConvBnAct(nn.Module):
    def __init__(self, deconv=False, pad=None):
        super().__init__()
        self.pad = pad
        self.conv = nn.ConvTranspose3d(3, 4, 3, 2) if deconv else nn.Conv3d(3, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm3d(4)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        if self.pad is not None:
            x = nn.functional.pad(x, self.pad)
        return torch.relu(self.bn(self.conv(x)))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("deconv", [False, True])
def test_batchnorm_and_activation_fused(tmp_path, dialect, deconv):
    c = check_module(ConvBnAct(deconv), [torch.randn(1, 3, 4, 5, 6)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Deconvolution3D" if deconv else "Convolution3D"]
    assert c.result.ncnn.ops[1].params[9] == 1  # ReLU fused


@pytest.mark.parametrize("dialect", DIALECTS)
def test_constant_pad_fused_into_conv3d(tmp_path, dialect):
    c = check_module(ConvBnAct(pad=(1, 0, 2, 1, 0, 2)), [torch.randn(1, 3, 4, 5, 6)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution3D"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_conv3d_padding_mode(tmp_path, dialect, mode):
    """A non-zero padding mode exports as a pad of the volume (ncnn Padding of the 4-D blob)."""
    m = nn.Conv3d(3, 4, 2, stride=1, padding=(1, 2, 1), padding_mode=mode)
    check_module(m, [torch.randn(1, 3, 5, 6, 7)], tmp_path, dialect=dialect, expect_types=["Padding", "Convolution3D"])


class FunctionalConv3d(nn.Module):
    """F.conv3d with parameters as weights (constant in the exported program)."""

    def __init__(self):
        super().__init__()
        self.w1, self.b1 = nn.Parameter(torch.rand(6, 3, 4, 4, 4)), nn.Parameter(torch.rand(6))
        self.w2 = nn.Parameter(torch.rand(6, 2, 3, 3, 3))

    def forward(self, x):
        x = nn.functional.conv3d(x, self.w1, self.b1, stride=2, padding=2)
        return nn.functional.conv3d(x, self.w2, None, stride=2, padding=1, groups=3)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_functional_conv3d(tmp_path, dialect):
    c = check_module(FunctionalConv3d(), [torch.randn(1, 3, 8, 9, 10)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution3D", "ConvolutionDepthWise3D"]


class UpDown(nn.Module):
    """A transposed convolution given the output size to restore (output_padding computed)."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv3d(4, 6, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose3d(6, 4, 3, stride=2, padding=1)

    def forward(self, x):
        return self.up(self.down(x), output_size=x.size())


@pytest.mark.parametrize("dialect", DIALECTS)
def test_conv_transpose3d_output_size(tmp_path, dialect):
    check_module(UpDown(), [torch.randn(1, 4, 6, 7, 8)], tmp_path, dialect=dialect,
                 expect_types=["Convolution3D", "Deconvolution3D"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("module", [nn.Conv3d(3, 6, (1, 3, 3), (1, 2, 2), (0, 1, 1)),
                                    nn.ConvTranspose3d(3, 2, 2, 2)], ids=["conv", "deconv"])
def test_fp16_weights(tmp_path, dialect, module):
    check_module(module, [torch.randn(1, 3, 4, 6, 7)], tmp_path, dialect=dialect, fp16=True)


def test_computed_weight_is_refused(tmp_path):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    w = torch.randn(4, 3, 3, 3, 3)
    m = Fn(lambda x: nn.functional.conv3d(x, w * x.mean()))
    pt2 = export_pt2(m, [torch.randn(1, 3, 5, 5, 5)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions())
    assert not result.ok and any("dynamic weight" in d.reason for d in result.errors), result.errors
