"""3-D pooling end to end (both dialects): max_pool3d (and its with-indices core form),
avg_pool3d (padding, ceil_mode, count_include_pad, divisor_override), adaptive avg/max pool 3d
→ ncnn Pooling3D on a 4-D (C, D, H, W) blob."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [
    (2, 2, 0, False), (3, 2, 1, False), (3, 2, 1, True), ((1, 3, 3), (1, 2, 2), (0, 1, 1), False),
    ((3, 2, 3), (2, 1, 3), (1, 0, 1), True), (3, None, 0, True),
])
def test_max_pool3d(tmp_path, dialect, kernel, stride, padding, ceil_mode):
    c = check_module(nn.MaxPool3d(kernel, stride, padding, ceil_mode=ceil_mode), [torch.randn(1, 3, 7, 9, 10)],
                     tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Pooling3D"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad", [
    (2, 2, 0, False, True), (3, 2, 1, False, True), (3, 2, 1, False, False), (3, 2, 1, True, True),
    ((3, 1, 3), (3, 1, 2), (1, 0, 1), True, False), ((2, 3, 3), (2, 3, 3), 1, True, True),
])
def test_avg_pool3d(tmp_path, dialect, kernel, stride, padding, ceil_mode, count_include_pad):
    m = nn.AvgPool3d(kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    c = check_module(m, [torch.randn(1, 3, 7, 9, 10)], tmp_path, dialect=dialect, expect_types=["Pooling3D"])
    assert set(_types(c)) <= {"Input", "Pooling3D", "Padding"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_avg_pool3d_divisor_override(tmp_path, dialect):
    check_module(nn.AvgPool3d(3, 2, 1, divisor_override=5), [torch.randn(1, 2, 7, 7, 7)], tmp_path, dialect=dialect,
                 expect_types=["Pooling3D"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("size", [1, (2, 3, 2), (None, 2, 5), 3])
def test_adaptive_pool3d(tmp_path, dialect, kind, size):
    cls = nn.AdaptiveAvgPool3d if kind == "avg" else nn.AdaptiveMaxPool3d
    c = check_module(cls(size), [torch.randn(1, 3, 6, 8, 9)], tmp_path, dialect=dialect)
    assert "Pooling3D" in _types(c) or (size == 1 and kind == "avg")  # core ATen: a mean over (D, H, W)


def test_dilated_max_pool3d_is_refused(tmp_path):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    pt2 = export_pt2(nn.MaxPool3d(2, dilation=2), [torch.randn(1, 2, 6, 6, 6)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions())
    assert [("dilation" in d.reason) for d in result.errors] == [True]
