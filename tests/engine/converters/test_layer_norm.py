"""layer_norm / group_norm / instance_norm / rms_norm end to end (both dialects, fp32 and fp16
weights): one ncnn LayerNorm / GroupNorm / InstanceNorm / RMSNorm layer each."""
import pytest
import torch
from torch import nn

from tests.engine.converters.modules import Fn
from tests.harness import DIALECTS, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


def _randomized(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if p.dim() and p is getattr(m, "weight", None) else 0.0))
    return m


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("module,shape", [
    (nn.LayerNorm(16), (1, 5, 16)),
    (nn.LayerNorm(16, eps=1e-3, elementwise_affine=False), (1, 5, 16)),
    (nn.LayerNorm(16, bias=False), (1, 5, 16)),
    (nn.LayerNorm(12), (1, 12)),
    (nn.LayerNorm(8), (1, 3, 4, 8)),
    (nn.LayerNorm([4, 8]), (1, 3, 4, 8)),
    (nn.LayerNorm([3, 4, 8]), (1, 3, 4, 8)),
    (nn.LayerNorm([5, 16]), (1, 5, 16)),
    (nn.LayerNorm(6), (1, 2, 3, 4, 6)),
], ids=["3d", "noaffine_eps", "nobias", "2d", "4d_last", "4d_last2", "4d_all", "3d_all", "5d_last"])
def test_layer_norm(tmp_path, dialect, fp16, module, shape):
    c = check_module(_randomized(module), [torch.randn(shape) * 3 + 1], tmp_path, dialect=dialect, fp16=fp16,
                     expect_types=["LayerNorm"])
    assert _types(c).count("LayerNorm") == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_layer_norm_functional_eps(tmp_path, dialect):
    w, b = torch.randn(10), torch.randn(10)
    check_module(Fn(lambda x: nn.functional.layer_norm(x, (10,), w, b, eps=0.1)), [torch.randn(1, 7, 10)],
                 tmp_path, dialect=dialect, expect_types=["LayerNorm"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("module,shape", [
    (nn.GroupNorm(2, 8), (1, 8, 5, 6)),
    (nn.GroupNorm(4, 8, eps=1e-3, affine=False), (1, 8, 5, 6)),
    (nn.GroupNorm(1, 6), (1, 6, 10)),
    (nn.GroupNorm(3, 6), (1, 6)),
    (nn.GroupNorm(2, 4), (1, 4, 3, 4, 5)),
], ids=["2d", "noaffine", "1d", "flat", "3d"])
def test_group_norm(tmp_path, dialect, fp16, module, shape):
    c = check_module(_randomized(module), [torch.randn(shape) * 2 - 1], tmp_path, dialect=dialect, fp16=fp16)
    assert _types(c) == ["Input", "GroupNorm"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("module,shape,ncnn_type", [
    (nn.InstanceNorm2d(6), (1, 6, 5, 7), "InstanceNorm"),
    (nn.InstanceNorm2d(6, affine=True, eps=1e-3), (1, 6, 5, 7), "InstanceNorm"),
    (nn.InstanceNorm1d(5, affine=True), (1, 5, 9), "GroupNorm"),
    (nn.InstanceNorm3d(4, affine=True), (1, 4, 3, 4, 5), "InstanceNorm"),
], ids=["2d", "2d_affine", "1d", "3d"])
def test_instance_norm(tmp_path, dialect, module, shape, ncnn_type):
    c = check_module(_randomized(module), [torch.randn(shape) + 0.5], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", ncnn_type]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_instance_norm_running_stats(tmp_path, dialect):
    m = nn.InstanceNorm2d(4, affine=True, track_running_stats=True)
    m.running_mean.copy_(torch.randn(4))
    m.running_var.copy_(torch.rand(4) + 0.5)
    c = check_module(_randomized(m), [torch.randn(1, 4, 5, 5)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "BatchNorm"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("module,shape", [
    (nn.RMSNorm(16), (1, 5, 16)),
    (nn.RMSNorm(16, eps=1e-5), (1, 5, 16)),
    (nn.RMSNorm(16, elementwise_affine=False, eps=1e-6), (1, 5, 16)),
    (nn.RMSNorm([4, 8]), (1, 3, 4, 8)),
], ids=["default_eps", "eps", "noaffine", "last2"])
def test_rms_norm(tmp_path, dialect, fp16, module, shape):
    c = check_module(_randomized(module), [torch.randn(shape) * 2], tmp_path, dialect=dialect, fp16=fp16)
    assert _types(c) == ["Input", "RMSNorm"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_layer_norm_computed_weight_refused(tmp_path, dialect):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    pt2 = export_pt2(Fn(lambda x, w: nn.functional.layer_norm(x, (8,), w * 2)), [torch.randn(1, 3, 8), torch.randn(8)],
                     tmp_path / "m.pt2", dialect=dialect)
    result = convert(str(pt2), ConvertOptions())
    assert not result.ok
    assert any("computed in the graph" in d.reason for d in result.errors)


class HandLayerNorm(nn.Module):
    """Layer norm written out (ConvNeXt's original ``LayerNorm(data_format="channels_first")``)."""

    def __init__(self, c, channels_first=True, rsqrt=False):
        super().__init__()
        self.channels_first, self.rsqrt = channels_first, rsqrt
        self.weight, self.bias = nn.Parameter(torch.rand(c) + 0.5), nn.Parameter(torch.randn(c))

    def forward(self, x):
        dim = 1 if self.channels_first else -1
        u = x.mean(dim, keepdim=True)
        v = (x - u).pow(2).mean(dim, keepdim=True)
        x = (x - u) * torch.rsqrt(v + 1e-6) if self.rsqrt else (x - u) / torch.sqrt(v + 1e-6)
        if self.channels_first:
            return self.weight[:, None, None] * x + self.bias[:, None, None]
        return x * self.weight + self.bias


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("channels_first,rsqrt,shape,types", [
    (True, False, (1, 8, 5, 6), ["Input", "Permute", "LayerNorm", "Permute"]),
    (True, True, (1, 8, 5, 6), ["Input", "Permute", "LayerNorm", "Permute"]),
    (False, False, (1, 5, 8), ["Input", "LayerNorm"]),
], ids=["channels_first", "rsqrt", "last_dim"])
def test_hand_written_layer_norm(tmp_path, dialect, channels_first, rsqrt, shape, types):
    c = check_module(HandLayerNorm(shape[1] if channels_first else shape[-1], channels_first, rsqrt),
                     [torch.randn(shape) * 2 + 1], tmp_path, dialect=dialect)
    assert _types(c) == types
