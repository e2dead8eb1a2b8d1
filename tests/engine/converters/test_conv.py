"""conv1d / conv2d / conv_transpose1d / conv_transpose2d end to end (both dialects): stride,
padding (ints, 'same' incl. asymmetric, 'valid'), dilation, groups, bias, non-square kernels,
output_padding; fp16 weights; Padding and activations fused into the convolution."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module

CONV2D = [  # kernel, stride, padding, dilation
    (3, 1, 0, 1),
    (3, 2, 1, 1),
    ((3, 5), (2, 1), (1, 2), 1),
    (3, 1, 2, 2),
    ((2, 3), (1, 2), (0, 1), (2, 1)),
    (3, 1, "same", 1),
    (4, 1, "same", 1),                 # asymmetric: the odd pixel goes after
    ((4, 2), 1, "same", (1, 3)),
    (3, 1, "valid", 1),
    (1, 1, 0, 1),
]


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,dilation", CONV2D)
def test_conv2d(tmp_path, dialect, kernel, stride, padding, dilation):
    m = nn.Conv2d(3, 8, kernel, stride, padding, dilation)
    c = check_module(m, [torch.randn(1, 3, 11, 12)], tmp_path, dialect=dialect, expect_types=["Convolution"],
                     forbid_types=["Padding"])
    assert _types(c) == ["Input", "Convolution"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("in_c,out_c,groups", [(4, 6, 2), (8, 8, 8), (4, 8, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_groups(tmp_path, dialect, in_c, out_c, groups, bias):
    m = nn.Conv2d(in_c, out_c, 3, 1, 1, groups=groups, bias=bias)
    c = check_module(m, [torch.randn(1, in_c, 9, 10)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "ConvolutionDepthWise"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,dilation,groups", [
    (3, 1, 0, 1, 1), (3, 2, 1, 1, 1), (5, 1, 4, 2, 1), (4, 1, "same", 1, 1), (3, 1, "valid", 1, 1),
    (3, 1, 1, 1, 3), (3, 2, 1, 1, 6),
])
def test_conv1d(tmp_path, dialect, kernel, stride, padding, dilation, groups):
    m = nn.Conv1d(6, 6, kernel, stride, padding, dilation, groups=groups)
    c = check_module(m, [torch.randn(1, 6, 17)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution1D" if groups == 1 else "ConvolutionDepthWise1D"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,output_padding,dilation,groups,bias", [
    (3, 1, 0, 0, 1, 1, True),
    (3, 2, 1, 1, 1, 1, True),
    ((3, 4), (2, 3), (1, 0), (1, 2), 1, 1, False),
    (3, 2, 0, 0, 2, 1, True),
    (4, 2, 1, 0, 1, 2, True),
    (3, 2, 1, 1, 1, 6, False),
    (3, 1, 1, 0, 1, 3, False),
])
def test_conv_transpose2d(tmp_path, dialect, kernel, stride, padding, output_padding, dilation, groups, bias):
    m = nn.ConvTranspose2d(6, 6, kernel, stride, padding, output_padding, groups, bias, dilation)
    c = check_module(m, [torch.randn(1, 6, 5, 6)], tmp_path, dialect=dialect)
    if groups == 1:
        assert _types(c) == ["Input", "Deconvolution"]
    elif groups == 6:
        assert _types(c) == ["Input", "DeconvolutionDepthWise"]
    else:  # the runtime's grouped DeconvolutionDepthWise is wrong with >1 input channel per group
        assert _types(c) == ["Input", "Slice"] + ["Deconvolution"] * groups + ["Concat"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("stride,padding,output_padding,groups", [(1, 0, 0, 1), (2, 1, 1, 1), (2, 0, 1, 2)])
def test_conv_transpose1d(tmp_path, dialect, stride, padding, output_padding, groups):
    m = nn.ConvTranspose1d(4, 6, 3, stride, padding, output_padding, groups)
    c = check_module(m, [torch.randn(1, 4, 7)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Deconvolution1D" if groups == 1 else "DeconvolutionDepthWise1D"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("module", [
    nn.Conv2d(3, 8, (3, 2), 2, 1),
    nn.Conv2d(8, 8, 3, 1, 1, groups=8),
    nn.Conv1d(3, 5, 3),
    nn.ConvTranspose2d(4, 3, 3, 2, 1, 1),
])
def test_fp16_weights(tmp_path, dialect, module):
    shape = (1, module.in_channels, 8, 9) if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)) else (1, 3, 12)
    check_module(module, [torch.randn(shape)], tmp_path, dialect=dialect, fp16=True)


class PadConv(nn.Module):
    def __init__(self, pad, value=0.0, conv_padding=0):
        super().__init__()
        self.pad, self.value = pad, value
        self.conv = nn.Conv2d(3, 4, 3, padding=conv_padding)

    def forward(self, x):
        return self.conv(nn.functional.pad(x, self.pad, value=self.value))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("pad,value,conv_padding", [
    ((1, 1, 1, 1), 0.0, 0),
    ((0, 2, 1, 0), 0.0, 1),     # asymmetric, added to the conv's own padding
    ((1, 2, 3, 0), 1.5, 0),     # non-zero value moves into pad_value
])
def test_pad_fused_into_conv(tmp_path, dialect, pad, value, conv_padding):
    c = check_module(PadConv(pad, value, conv_padding), [torch.randn(1, 3, 8, 9)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution"]


def test_pad_with_other_value_than_conv_padding_stays(tmp_path):
    c = check_module(PadConv((1, 1, 1, 1), 2.0, 1), [torch.randn(1, 3, 8, 9)], tmp_path)
    assert _types(c) == ["Input", "Padding", "Convolution"]


class ConvAct(nn.Module):
    def __init__(self, act, deconv=False):
        super().__init__()
        self.conv = nn.ConvTranspose2d(3, 4, 3, 2) if deconv else nn.Conv2d(3, 4, 3, padding=1)
        self.act = act

    def forward(self, x):
        return self.act(self.conv(x))


ACTIVATIONS = [nn.ReLU(), nn.ReLU6(), nn.Hardtanh(-0.5, 0.7), nn.LeakyReLU(0.2), nn.Sigmoid(), nn.Hardswish(),
               nn.Mish()]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("act", ACTIVATIONS, ids=lambda a: type(a).__name__)
def test_activation_fused_into_conv(tmp_path, dialect, act):
    c = check_module(ConvAct(act), [torch.randn(1, 3, 8, 8) * 4], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution"]
    assert c.result.ncnn.ops[1].params.get(9, 0) != 0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_activation_fused_into_deconv(tmp_path, dialect):
    c = check_module(ConvAct(nn.ReLU6(), deconv=True), [torch.randn(1, 3, 5, 5)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Deconvolution"]


class TwoReaders(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(y), y


def test_activation_not_fused_when_conv_output_is_returned(tmp_path):
    c = check_module(TwoReaders(), [torch.randn(1, 3, 6, 6)], tmp_path)
    assert _types(c) == ["Input", "Convolution", "Split", "ReLU"]
    assert c.result.ncnn.ops_of_type("Convolution")[0].params.get(9, 0) == 0


class DynamicWeight(nn.Module):
    """A convolution whose weight is computed from the input (ncnn dynamic_weight)."""

    def __init__(self, nd, groups, bias):
        super().__init__()
        self.nd, self.groups = nd, groups
        self.w = nn.Parameter(torch.randn(6, 6 // groups, *([3] * nd)))
        self.b = nn.Parameter(torch.randn(6)) if bias else None

    def forward(self, x):
        conv = nn.functional.conv2d if self.nd == 2 else nn.functional.conv1d
        return conv(x, self.w * x.mean(), self.b, padding=1, groups=self.groups)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("nd,groups,bias,ncnn_type", [
    (2, 1, True, "Convolution"), (2, 1, False, "Convolution"), (2, 2, True, "ConvolutionDepthWise"),
    (2, 6, True, "ConvolutionDepthWise"), (1, 1, True, "Convolution1D"), (1, 3, False, "ConvolutionDepthWise1D"),
])
def test_dynamic_weight(tmp_path, dialect, nd, groups, bias, ncnn_type):
    c = check_module(DynamicWeight(nd, groups, bias), [torch.randn(1, 6, *([7] * nd))], tmp_path, dialect=dialect)
    conv = c.result.ncnn.ops_of_type(ncnn_type)[0]
    assert conv.params[19] == 1 and not conv.attrs and len(conv.inputs) == 2 + bias


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("out_channels", [1, 4])
def test_weight_given_as_a_model_input(tmp_path, dialect, out_channels):
    """A weight fed as a model input is one unbatched blob even when its first dim is a 1
    (pnnx's F_conv2d test): only the activation's dim 0 is ncnn's batch."""
    m = Fn(lambda x, w: nn.functional.conv2d(x, w))
    c = check_module(m, [torch.randn(1, 3, 6, 6), torch.randn(out_channels, 3, 3, 3)], tmp_path, dialect=dialect)
    assert [d["batch_dim"] for d in c.result.ncnn.meta["inputs"]] == [0, None]
