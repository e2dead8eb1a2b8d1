"""Reduction converters: mean over spatial dims (Pooling) and other dims (Reduction), sum,
amax/amin, max/min over a dim, prod — keepdim both ways, checked numerically, both dialects."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dims", [(2, 3), (-1, -2), (3, 2)])
@pytest.mark.parametrize("keepdim", [True, False])
def test_mean_spatial_is_pooling(tmp_path, dialect, dims, keepdim):
    checked = check_module(Fn(lambda x: x.mean(dims, keepdim=keepdim)), [torch.randn(1, 6, 5, 7)], tmp_path,
                           dialect=dialect, expect_types=["Pooling"], forbid_types=["Reduction"])
    # global pooling gives (C); a (C, 1, 1) model output needs a Reshape back
    assert [op.type for op in checked.result.ncnn.ops] == ["Input", "Pooling"] + ["Reshape"] * keepdim


REDUCTIONS = {
    "mean_c": lambda x: x.mean(1),
    "mean_c_keep": lambda x: x.mean(1, keepdim=True),
    "mean_h": lambda x: x.mean(2),
    "mean_w_keep": lambda x: x.mean(-1, keepdim=True),
    "mean_chw": lambda x: x.mean((1, 2, 3)),
    "mean_all_keep": lambda x: x.mean((1, 2, 3), keepdim=True),
    "sum_c": lambda x: x.sum(1),
    "sum_hw_keep": lambda x: x.sum((2, 3), keepdim=True),
    "sum_w": lambda x: torch.sum(x, -1),
    "amax_hw": lambda x: x.amax((2, 3)),
    "amax_c_keep": lambda x: x.amax(1, keepdim=True),
    "amin_w": lambda x: x.amin(-1),
    "max_dim_values": lambda x: x.max(1)[0],
    "min_dim_keep_values": lambda x: x.min(2, keepdim=True).values,
    "prod_w": lambda x: (x * 0.5 + 1).prod(-1),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(tmp_path, dialect, name):
    check_module(Fn(REDUCTIONS[name]), [torch.randn(1, 6, 5, 7)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dim,keepdim", [(1, False), (2, True), (-1, False)])
def test_mean_3d(tmp_path, dialect, dim, keepdim):
    check_module(Fn(lambda x: x.mean(dim, keepdim=keepdim)), [torch.randn(1, 8, 9)], tmp_path, dialect=dialect,
                 expect_types=["Reduction"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mean_over_batch_axis_is_noop(tmp_path, dialect):
    check_module(Fn(lambda x: x.mean(0, keepdim=True).flatten(1)), [torch.randn(1, 3, 4)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", ["mean_hw", "adaptive_2x3"])
def test_dynamic_spatial_size(tmp_path, dialect, name):
    fn = {"mean_hw": lambda x: x.mean((2, 3)), "adaptive_2x3": lambda x: nn.functional.adaptive_avg_pool2d(x, (2, 3))}
    h, w = torch.export.Dim("h", min=4, max=64), torch.export.Dim("w", min=4, max=64)
    check_module(Fn(fn[name]), [torch.randn(1, 4, 8, 10)], tmp_path, dialect=dialect, dynamic_shapes=(({2: h, 3: w},),),
                 run_inputs=[torch.randn(1, 4, 12, 14)], expect_types=["Pooling"])


def test_argmax_indices_use_is_refused(tmp_path):
    from engine.convert import convert
    from tests.harness import export_pt2

    pt2 = export_pt2(Fn(lambda x: x.max(1)[1].float()), [torch.randn(1, 3, 4)], tmp_path / "m.pt2")
    result = convert(str(pt2))
    assert not result.ok


NORMS = {
    "normalize_c": lambda x: nn.functional.normalize(x, dim=1),
    "normalize_last": lambda x: nn.functional.normalize(x, dim=-1),
    "l2_hw_keep": lambda x: torch.linalg.vector_norm(x, dim=(2, 3), keepdim=True),
    "l1_w": lambda x: torch.linalg.vector_norm(x, ord=1, dim=-1),
    "norm_p1_c": lambda x: x.norm(p=1, dim=1),
    "norm_all": lambda x: x.norm().reshape(1, 1),
    "over_batch": lambda x: torch.linalg.vector_norm(x, dim=0, keepdim=True) - x,
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(NORMS))
def test_vector_norms(tmp_path, dialect, name):
    check_module(Fn(NORMS[name]), [torch.randn(1, 6, 5, 7)], tmp_path, dialect=dialect)


def test_norm_of_another_order_is_refused_with_the_order(tmp_path):
    from engine.convert import convert
    from tests.harness import export_pt2

    pt2 = export_pt2(Fn(lambda x: torch.linalg.vector_norm(x, ord=3, dim=1)), [torch.randn(1, 3, 4)], tmp_path / "m.pt2")
    result = convert(str(pt2))
    assert not result.ok
    assert "vector norm of order 3" in result.errors[0].reason
