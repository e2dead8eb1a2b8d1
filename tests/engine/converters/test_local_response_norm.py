"""local_response_norm end to end (both dialects): PyTorch exports it as a padded avg_pool3d
chain; an odd window over (N, C, H, W) becomes one ncnn LRN (fuse_local_response_norm pass),
anything else converts op by op (Padding + Pooling3D / Pooling + BinaryOps)."""
import pytest
import torch
from torch import nn

from engine.ncnn.layers import resolve_params
from tests.harness import DIALECTS, Fn, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("size,alpha,beta,k", [(3, 1e-4, 0.75, 1.0), (5, 0.3, 0.5, 2.0), (1, 0.5, 1.2, 0.7),
                                               (7, 2.0, 0.75, 1.5)])
def test_odd_window_is_one_lrn(tmp_path, dialect, size, alpha, beta, k):
    c = check_module(nn.LocalResponseNorm(size, alpha, beta, k), [torch.randn(1, 9, 5, 6) * 2], tmp_path,
                     dialect=dialect)
    assert _types(c) == ["Input", "LRN"]
    p = resolve_params("LRN", c.result.ncnn.ops[1].params)
    assert (p["local_size"], p["region_type"]) == (size, 0) and p["beta"] == pytest.approx(beta)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("size", [2, 4])
def test_even_window_converts_op_by_op(tmp_path, dialect, size):
    """ncnn's window is size/2 channels either side (size + 1 channels for an even size)."""
    c = check_module(nn.LocalResponseNorm(size, 0.5, 0.75, 1.0), [torch.randn(1, 6, 5, 4) * 2], tmp_path,
                     dialect=dialect)
    assert "LRN" not in _types(c) and "Pooling3D" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape", [(1, 6, 11), (1, 5, 3, 4, 6)], ids=["NCL", "NCDHW"])
def test_other_ranks_convert_op_by_op(tmp_path, dialect, shape):
    c = check_module(nn.LocalResponseNorm(3, 0.5, 0.75, 1.0), [torch.randn(*shape) * 2], tmp_path, dialect=dialect)
    assert "LRN" not in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_square_used_elsewhere_is_not_fused(tmp_path, dialect):
    """An intermediate value of the chain with another reader keeps the chain."""
    def fn(x):
        y = nn.functional.local_response_norm(x, 3, 0.5, 0.75, 1.0)
        return y, nn.functional.local_response_norm(x, 3, 0.5, 0.75, 1.0) + 1

    c = check_module(Fn(fn), [torch.randn(1, 6, 5, 4)], tmp_path, dialect=dialect)
    assert _types(c).count("LRN") == 2
