"""Linear layers with constant weights end to end (both dialects): nn.Linear (core ATen:
permute + addmm / mm), torch.matmul / mm / addmm with a constant matrix (alpha, beta), after a
flatten, on 3-D and 4-D inputs, activation fused, fp16 weights."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("fp16", [False, True])
def test_linear_2d(tmp_path, dialect, bias, fp16):
    c = check_module(nn.Linear(12, 7, bias=bias), [torch.randn(1, 12)], tmp_path, dialect=dialect, fp16=fp16)
    assert _types(c) == ["Input", "InnerProduct"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_3d_is_gemm(tmp_path, dialect, bias):
    c = check_module(nn.Linear(8, 5, bias=bias), [torch.randn(1, 6, 8)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Gemm"]  # core ATen's view/addmm/view folded back by fuse_linear_reshape


@pytest.mark.parametrize("dialect", DIALECTS)
def test_linear_4d(tmp_path, dialect):
    c = check_module(nn.Linear(8, 5), [torch.randn(1, 3, 4, 8)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Reshape", "Gemm", "Reshape"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_linear_after_flatten(tmp_path, dialect):
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 4 * 4, 10), nn.ReLU(), nn.Linear(10, 3))
    c = check_module(m, [torch.randn(1, 3, 6, 6)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Convolution", "InnerProduct", "InnerProduct"]  # InnerProduct flattens itself
    assert c.result.ncnn.ops[2].params.get(9) == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_flatten_of_2d_blob_is_kept(tmp_path, dialect):
    # (1, 3, 4) -> ncnn (h=3, w=4); an InnerProduct with 4 inputs per row would read it as rows
    m = nn.Sequential(nn.Flatten(), nn.Linear(12, 5))
    c = check_module(m, [torch.randn(1, 3, 4)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Flatten", "InnerProduct"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("act,kind", [(nn.ReLU(), 1), (nn.LeakyReLU(0.1), 2), (nn.ReLU6(), 3), (nn.Sigmoid(), 4)],
                         ids=["relu", "leaky", "relu6", "sigmoid"])
def test_activation_fused_into_innerproduct(tmp_path, dialect, act, kind):
    c = check_module(nn.Sequential(nn.Linear(6, 4), act), [torch.randn(1, 6) * 3], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "InnerProduct"] and c.result.ncnn.ops[1].params[9] == kind


class ConstMatmul(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4))
        self.b = nn.Parameter(torch.randn(4))
        self.fn = fn

    def forward(self, x):
        return self.fn(self, x)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fn", [
    lambda m, x: torch.matmul(x, m.w),
    lambda m, x: x @ m.w,
    lambda m, x: torch.mm(x, m.w),
    lambda m, x: torch.addmm(m.b, x, m.w),
    lambda m, x: torch.addmm(m.b, x, m.w, beta=0.5, alpha=2.0),
    lambda m, x: torch.mm(x, m.w.t().contiguous().t()),
], ids=["matmul", "matmul_op", "mm", "addmm", "addmm_alpha_beta", "mm_transposed_twice"])
def test_matmul_with_constant_weight(tmp_path, dialect, fn):
    c = check_module(ConstMatmul(fn), [torch.randn(1, 6)], tmp_path, dialect=dialect)
    assert "InnerProduct" in _types(c) and "MemoryData" not in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_matmul_with_constant_weight_3d(tmp_path, dialect):
    c = check_module(ConstMatmul(lambda m, x: x @ m.w), [torch.randn(1, 5, 6)], tmp_path, dialect=dialect)
    assert "Gemm" in _types(c)


def test_shared_weight_used_by_two_linears(tmp_path):
    lin = nn.Linear(4, 4)
    c = check_module(Fn(lambda x: lin(lin(x))), [torch.randn(1, 4)], tmp_path, dialect="core")
    assert _types(c) == ["Input", "InnerProduct", "InnerProduct"]
