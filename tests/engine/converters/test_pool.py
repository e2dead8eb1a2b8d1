"""Pooling converters: max/avg pool 1-D/2-D and adaptive pools, checked numerically in ncnn."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, check_module


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [
    (2, 2, 0, False), (3, 2, 1, False), (3, 2, 1, True), (3, 1, 1, False), (2, 2, 0, True),
    (3, 2, 0, True), ((3, 2), (2, 1), (1, 0), False), ((2, 3), (3, 2), (1, 1), True), (3, None, 0, True),
])
def test_max_pool2d(tmp_path, dialect, kernel, stride, padding, ceil_mode):
    check_module(nn.MaxPool2d(kernel, stride, padding, ceil_mode=ceil_mode), [torch.randn(1, 3, 11, 10)], tmp_path,
                 dialect=dialect, expect_types=["Pooling"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad", [
    (2, 2, 0, False, True), (3, 2, 1, False, True), (3, 2, 1, False, False), (3, 2, 1, True, True),
    (3, 2, 1, True, False), (3, 3, 1, True, True), (3, 3, 1, True, False), ((3, 2), (2, 1), (1, 1), True, True),
    (2, 1, 1, False, False),
])
def test_avg_pool2d(tmp_path, dialect, kernel, stride, padding, ceil_mode, count_include_pad):
    check_module(nn.AvgPool2d(kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad),
                 [torch.randn(1, 3, 11, 10)], tmp_path, dialect=dialect, expect_types=["Pooling"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("divisor", [2, 5])
def test_avg_pool2d_divisor_override(tmp_path, dialect, divisor):
    check_module(nn.AvgPool2d(3, 2, 1, divisor_override=divisor), [torch.randn(1, 3, 9, 9)], tmp_path,
                 dialect=dialect, expect_types=["Pooling"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [(2, 2, 0, False), (3, 2, 1, True), (3, 1, 1, False)])
def test_pool1d(tmp_path, dialect, kind, kernel, stride, padding, ceil_mode):
    cls = nn.MaxPool1d if kind == "max" else nn.AvgPool1d
    checked = check_module(cls(kernel, stride, padding, ceil_mode=ceil_mode), [torch.randn(1, 4, 13)], tmp_path,
                           dialect=dialect, expect_types=["Pooling1D"])
    assert len(checked.result.ncnn.ops) == 2  # core ATen's unsqueeze/pool2d/squeeze folded back


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("size", [1, (2, 2), (3, 5), (None, 4)])
def test_adaptive_pool2d(tmp_path, dialect, kind, size):
    cls = nn.AdaptiveAvgPool2d if kind == "avg" else nn.AdaptiveMaxPool2d
    check_module(cls(size), [torch.randn(1, 3, 10, 11)], tmp_path, dialect=dialect, expect_types=["Pooling"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("size", [1, 3])
def test_adaptive_pool1d(tmp_path, dialect, kind, size):
    cls = nn.AdaptiveAvgPool1d if kind == "avg" else nn.AdaptiveMaxPool1d
    checked = check_module(cls(size), [torch.randn(1, 4, 11)], tmp_path, dialect=dialect, expect_types=["Pooling1D"])
    assert len(checked.result.ncnn.ops) == 2


class _PoolFlatten(nn.Module):
    def forward(self, x):
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_global_pool_then_flatten_is_one_layer(tmp_path, dialect):
    checked = check_module(_PoolFlatten(), [torch.randn(1, 8, 7, 7)], tmp_path, dialect=dialect)
    types = [op.type for op in checked.result.ncnn.ops]
    assert types == ["Input", "Pooling"], types


class SqueezeExcite(nn.Module):
    """torchvision's SqueezeExcitation: x * gate(fc2(act(fc1(avgpool(x)))))."""

    def __init__(self, c, squeeze, gate):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.act, self.gate = nn.ReLU(), gate

    def forward(self, x):
        s = self.gate(self.fc2(self.act(self.fc1(nn.functional.adaptive_avg_pool2d(x, 1)))))
        return x * s


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("gate", [nn.Sigmoid(), nn.Hardsigmoid()], ids=["sigmoid", "hardsigmoid"])
@pytest.mark.parametrize("fp16", [False, True])
def test_squeeze_excite_uses_global_pooling_and_inner_product(tmp_path, dialect, gate, fp16):
    """pnnx's layout: the pooled (C) vector feeds InnerProducts; the gate broadcasts over C."""
    checked = check_module(SqueezeExcite(16, 4, gate), [torch.randn(1, 16, 7, 6)], tmp_path, dialect=dialect,
                           fp16=fp16, expect_types=["InnerProduct"], forbid_types=["Convolution", "Reshape"])
    pool = next(op for op in checked.result.ncnn.ops if op.type == "Pooling")
    assert pool.params.get(4) == 1  # global_pooling


class PoolHead(nn.Module):
    """The pooled (N, C, 1, 1) map read by a 3x3 convolution and returned: needs (C, 1, 1) back."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        p = nn.functional.adaptive_max_pool2d(x, 1)
        return p, self.conv(p)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_global_pool_result_restored_for_other_readers(tmp_path, dialect):
    check_module(PoolHead(), [torch.randn(1, 8, 5, 5)], tmp_path, dialect=dialect, expect_types=["Reshape"])


def test_dilated_max_pool_is_refused(tmp_path):
    from engine.convert import convert
    from tests.harness import export_pt2

    pt2 = export_pt2(nn.MaxPool2d(3, 1, 0, dilation=2), [torch.randn(1, 3, 9, 9)], tmp_path / "m.pt2")
    result = convert(str(pt2))
    assert not result.ok
    assert any("dilation" in d.reason for d in result.errors), [str(d) for d in result.errors]
