"""F.unfold (im2col) → ncnn Unfold and F.fold (col2im) → ncnn Fold, both dialects (core ATen's
gather / index_put forms are recognised)."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module

UNFOLDS = [  # kernel, dilation, padding, stride
    (2, 1, 0, 1),
    (3, 1, 1, 1),
    ((2, 3), (1, 2), (1, 2), (2, 1)),
    (3, 2, 0, 2),
    ((1, 4), 1, (0, 1), (1, 3)),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,dilation,padding,stride", UNFOLDS)
def test_unfold(tmp_path, dialect, kernel, dilation, padding, stride):
    c = check_module(nn.Unfold(kernel, dilation, padding, stride), [torch.randn(1, 3, 9, 10)], tmp_path,
                     dialect=dialect)
    assert [op.type for op in c.result.ncnn.ops if op.type != "Padding"] == ["Input", "Unfold"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kernel,dilation,padding,stride", UNFOLDS)
def test_fold(tmp_path, dialect, kernel, dilation, padding, stride):
    size = (9, 10)
    cols = nn.functional.unfold(torch.zeros(1, 2, *size), kernel, dilation, padding, stride)
    c = check_module(nn.Fold(size, kernel, dilation, padding, stride), [torch.randn(*cols.shape)], tmp_path,
                     dialect=dialect)
    assert [op.type for op in c.result.ncnn.ops if op.type != "Crop"] == ["Input", "Fold"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_unfold_then_fold(tmp_path, dialect):
    """Overlapping windows are summed back (the usual patch-merging round trip)."""
    def fn(x):
        cols = nn.functional.unfold(x, 3, padding=1, stride=2)
        return nn.functional.fold(cols * 0.5, x.shape[2:], 3, padding=1, stride=2)

    check_module(Fn(fn), [torch.randn(1, 2, 7, 8)], tmp_path, dialect=dialect, expect_types=["Unfold", "Fold"])
