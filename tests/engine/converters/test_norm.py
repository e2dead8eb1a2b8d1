"""batch_norm end to end (both dialects): folded into the preceding conv / deconv / linear when
the layer's output has no other reader (no BatchNorm layer left), otherwise ncnn BatchNorm;
1d / 2d / 3d, affine or not, eps."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


def _randomized(bn):
    """A BatchNorm with non-trivial running statistics (and affine params when it has them)."""
    c = bn.num_features
    bn.running_mean.copy_(torch.randn(c))
    bn.running_var.copy_(torch.rand(c) + 0.5)
    if bn.affine:
        bn.weight.data.copy_(torch.randn(c))
        bn.bias.data.copy_(torch.randn(c))
    return bn


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("bn,shape", [
    (nn.BatchNorm2d(5), (1, 5, 6, 7)),
    (nn.BatchNorm2d(5, eps=1e-2, affine=False), (1, 5, 6, 7)),
    (nn.BatchNorm1d(6), (1, 6)),
    (nn.BatchNorm1d(6, eps=1e-3), (1, 6, 9)),
    (nn.BatchNorm3d(4), (1, 4, 3, 5, 6)),
], ids=["2d", "2d_noaffine_eps", "1d_2D", "1d_3D", "3d"])
def test_standalone_batchnorm(tmp_path, dialect, bn, shape):
    c = check_module(_randomized(bn), [torch.randn(shape)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "BatchNorm"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("layer,shape,ncnn_type", [
    (nn.Conv2d(3, 6, 3, padding=1), (1, 3, 8, 8), "Convolution"),
    (nn.Conv2d(3, 6, 3, bias=False), (1, 3, 8, 8), "Convolution"),
    (nn.Conv2d(6, 6, 3, groups=6, bias=False), (1, 6, 8, 8), "ConvolutionDepthWise"),
    (nn.Conv2d(4, 6, 3, groups=2), (1, 4, 8, 8), "ConvolutionDepthWise"),
    (nn.ConvTranspose2d(3, 6, 3, 2, 1, 1), (1, 3, 5, 5), "Deconvolution"),
    (nn.ConvTranspose2d(6, 6, 3, 2, groups=6, bias=False), (1, 6, 5, 5), "DeconvolutionDepthWise"),
    (nn.Conv1d(3, 6, 3), (1, 3, 10), "Convolution1D"),
    (nn.Linear(5, 6), (1, 5), "InnerProduct"),
    (nn.Linear(5, 6, bias=False), (1, 5), "InnerProduct"),
], ids=["conv", "conv_nobias", "dw", "grouped", "deconv", "deconv_dw", "conv1d", "linear", "linear_nobias"])
@pytest.mark.parametrize("fp16", [False, True])
def test_batchnorm_folded(tmp_path, dialect, layer, shape, ncnn_type, fp16):
    out_c = layer.out_features if isinstance(layer, nn.Linear) else layer.out_channels
    bn = (nn.BatchNorm2d if isinstance(layer, (nn.Conv2d, nn.ConvTranspose2d)) else nn.BatchNorm1d)(out_c)
    c = check_module(nn.Sequential(layer, _randomized(bn)), [torch.randn(shape)], tmp_path, dialect=dialect,
                     fp16=fp16, forbid_types=["BatchNorm"])
    assert _types(c) == ["Input", ncnn_type]
    pnnx_types = [op.type for op in c.result.pnnx.ops]
    assert [t for t in pnnx_types if t.startswith("nn.BatchNorm")]  # exact in the pnnx model, folded in ncnn


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batchnorm_and_relu_fold_into_one_layer(tmp_path, dialect):
    m = nn.Sequential(nn.Conv2d(3, 6, 3), _randomized(nn.BatchNorm2d(6)), nn.ReLU())
    c = check_module(m, [torch.randn(1, 3, 8, 8)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution"] and c.result.ncnn.ops[1].params[9] == 1


class ConvBnTwoReaders(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = _randomized(nn.BatchNorm2d(4))

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batchnorm_kept_when_conv_output_has_another_reader(tmp_path, dialect):
    c = check_module(ConvBnTwoReaders(), [torch.randn(1, 3, 6, 6)], tmp_path, dialect=dialect)
    assert "BatchNorm" in _types(c) and "Convolution" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batchnorm_after_activation_stays(tmp_path, dialect):
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), _randomized(nn.BatchNorm2d(4)))
    c = check_module(m, [torch.randn(1, 3, 6, 6)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution", "BatchNorm"]


def test_training_mode_batchnorm_is_refused(tmp_path):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    class TrainBN(nn.Module):
        def forward(self, x):
            return nn.functional.batch_norm(x, None, None, training=True)

    pt2 = export_pt2(TrainBN(), [torch.randn(1, 3, 4, 4)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions())
    assert not result.ok
    reasons = [d.reason for d in result.errors]
    assert any("training mode" in r for r in reasons), reasons


@pytest.mark.parametrize("dialect", DIALECTS)
def test_functional_batchnorm_with_buffers(tmp_path, dialect):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.randn(3))
            self.register_buffer("var", torch.rand(3) + 0.5)
            self.w = nn.Parameter(torch.randn(3))

        def forward(self, x):
            return nn.functional.batch_norm(x, self.mean, self.var, self.w, None, eps=1e-4)

    c = check_module(M(), [torch.randn(1, 3, 5, 5)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "BatchNorm"]


class LinearNorm(nn.Module):
    """timm's LeViT: a BatchNorm1d over the tokens of a linear layer's output,
    ``bn(linear(x).flatten(0, 1)).reshape_as(x)``."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 8, bias=False)
        self.bn = nn.BatchNorm1d(8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        y = self.linear(x)
        return self.bn(y.flatten(0, 1)).reshape_as(y)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batchnorm_over_tokens_folds_into_the_linear(tmp_path, dialect):
    c = check_module(LinearNorm().eval(), [torch.randn(1, 5, 6)], tmp_path, dialect=dialect,
                     forbid_types=["BatchNorm"])
    assert [op.type for op in c.result.ncnn.ops].count("Gemm") + [op.type for op in c.result.ncnn.ops].count(
        "InnerProduct") == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batchnorm_over_tokens_without_a_linear(tmp_path, dialect):
    """A BatchNorm1d over flattened tokens ``(tokens, features)``: the tokens become ncnn's batch
    (each sample a vector of features, ncnn's BatchNorm on it), or, where they cannot, a
    per-channel scale and shift."""
    bn = nn.BatchNorm1d(6).eval()
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    c = check_module(Fn(lambda x: bn(x.flatten(0, 1)).reshape_as(x) * 2), [torch.randn(1, 5, 6)], tmp_path,
                     dialect=dialect)
    assert c.errors[0] < 1e-6
