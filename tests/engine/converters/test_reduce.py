"""Reduction converters: mean over spatial dims (Pooling) and other dims (Reduction), sum,
amax/amin, max/min over a dim or all, prod, logsumexp — keepdim both ways, reductions to a
scalar and over the batch axis only, checked numerically, both dialects."""
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
    "prod_c_keep": lambda x: (x * 0.5 + 1).prod(1, keepdim=True),
    "max_other": lambda x: torch.max(x, x.flip(-1) * 0.5),
    "min_other": lambda x: torch.min(x, x * 0.5 + 0.2),
}


SCALARS = {
    "sum": torch.sum,
    "mean": torch.mean,
    "amax": torch.amax,
    "amin": lambda x: x.amin(),
    "max": torch.max,
    "min": torch.min,
    "prod": lambda x: (x * 0.1 + 1).prod(),
    "norm": torch.norm,
    "logsumexp": lambda x: torch.logsumexp(x, (0, 1, 2, 3)),
    "sum_plus_one": lambda x: x.sum() + 1,
    "squeeze": lambda x: x[:, :1, :1, :1].squeeze(),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(SCALARS))
def test_reduction_to_a_scalar(tmp_path, dialect, name):
    """A rank-0 result is a one-element blob, written as ``out0``."""
    c = check_module(Fn(SCALARS[name]), [torch.rand(1, 3, 4, 5) + 0.5], tmp_path, dialect=dialect)
    assert c.outputs[0].size == 1 and c.expected[0].shape == ()


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "squeeze"])
def test_output_that_is_the_input_is_still_out0(tmp_path, dialect, name):
    """A reduction over a size-1 leading axis: at most one layer (a Noop when that axis is the
    batch and the output is the input blob itself), and still extractable as ``out0``."""
    fn = {"sum": lambda x: x.sum(0), "mean": lambda x: x.mean(0), "amax": lambda x: x.amax(0),
          "squeeze": lambda x: x.squeeze(0)}[name]
    c = check_module(Fn(fn), [torch.randn(1, 16)], tmp_path, dialect=dialect)
    types = [op.type for op in c.result.ncnn.ops]
    assert types[0] == "Input" and len(types) == 2, types


@pytest.mark.parametrize("dialect", DIALECTS)
def test_same_output_twice(tmp_path, dialect):
    c = check_module(Fn(lambda x: (x * 2, x * 2)), [torch.randn(1, 3, 4)], tmp_path, dialect=dialect)
    assert len(c.outputs) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dim,keepdim", [(1, False), (-1, True), ((2, 3), False), ((1, 3), True), (0, True)])
def test_logsumexp(tmp_path, dialect, dim, keepdim):
    """Stable like PyTorch's: values of several hundred, where exp(x) overflows float32."""
    x = torch.randn(1, 4, 5, 6) * 200
    c = check_module(Fn(lambda x: torch.logsumexp(x, dim, keepdim=keepdim)), [x], tmp_path, dialect=dialect)
    assert not any(op.type == "UnaryOp" for op in c.result.ncnn.ops)


def _stable_logsumexp(x):
    m = x.amax(1, keepdim=True)
    return (x - m).logsumexp(1) + m.squeeze(1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_logsumexp_of_an_input_shifted_by_its_max_is_not_shifted_again(tmp_path, dialect):
    """The stable form written out (as a converted logsumexp's ``_pnnx.py`` reads): the inner
    logsumexp sums values ≤ 0, so it is one LogSumExp Reduction — two Reductions in all, not four."""
    c = check_module(Fn(_stable_logsumexp), [torch.randn(1, 4, 5, 6) * 200], tmp_path, dialect=dialect)
    assert sum(op.type == "Reduction" for op in c.result.ncnn.ops) == 2


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


def test_max_indices_along_an_unbounded_run_time_dim_are_refused(tmp_path):
    """decompose_selections writes the indices out along a static or bounded dim (its tests); along
    a dim of run-time size with no upper bound the reduction's rule refuses to drop them."""
    from engine.convert import convert
    from tests.harness import export_pt2

    n = torch.export.Dim("n", min=2)
    pt2 = export_pt2(Fn(lambda x: x.max(1)[1].float()), [torch.randn(1, 3, 4)], tmp_path / "m.pt2",
                     dynamic_shapes=(({1: n},),))
    result = convert(str(pt2))
    assert [e.op for e in result.errors] == ["aten.max.dim"]
    assert "indices of max/min over a dim are used" in result.errors[0].reason


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
