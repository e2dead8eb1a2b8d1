"""grid_sample → ncnn GridSample (2-D and 3-D; every mode, padding mode, align_corners) and
affine_grid (the base-grid matmul), alone and together as a spatial transformer, both
dialects."""
import itertools

import pytest
import torch
import torch.nn.functional as F

from tests.harness import DIALECTS, Fn, check_module


def _grid(*shape):
    return torch.rand(*shape) * 2.4 - 1.2  # some positions outside [-1, 1]: padding matters


COMBOS = [(mode, pad, align) for (mode, pad), align in
          zip(itertools.product(("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection")),
              itertools.cycle((False, True)))]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode,padding,align", COMBOS)
def test_grid_sample_2d(tmp_path, dialect, mode, padding, align):
    fn = Fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align))
    c = check_module(fn, [torch.randn(1, 3, 6, 7), _grid(1, 5, 4, 2)], tmp_path, dialect=dialect)
    assert [op.type for op in c.result.ncnn.ops] == ["Input", "Input", "GridSample"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode,padding,align", [("bilinear", "zeros", False), ("nearest", "border", True),
                                                ("bilinear", "reflection", True)])
def test_grid_sample_3d(tmp_path, dialect, mode, padding, align):
    fn = Fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align))
    check_module(fn, [torch.randn(1, 2, 4, 5, 6), _grid(1, 3, 4, 2, 3)], tmp_path, dialect=dialect,
                 expect_types=["GridSample"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("size", [[1, 3, 6, 7], [1, 3, 4, 6, 5]], ids=["2d", "3d"])
@pytest.mark.parametrize("align", [False, True])
def test_affine_grid(tmp_path, dialect, size, align):
    nd = len(size) - 2
    check_module(Fn(lambda t: F.affine_grid(t, size, align_corners=align)), [torch.randn(1, nd, nd + 1)], tmp_path,
                 dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("align", [False, True])
def test_spatial_transformer(tmp_path, dialect, align):
    def fn(x, theta):
        return F.grid_sample(x, F.affine_grid(theta, list(x.shape), align_corners=align), align_corners=align)

    check_module(Fn(fn), [torch.randn(1, 3, 6, 7), torch.randn(1, 2, 3) * 0.5], tmp_path, dialect=dialect,
                 expect_types=["GridSample"])
