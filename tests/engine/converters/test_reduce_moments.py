"""var / std (and var_mean / std_mean) over dims, with keepdim and corrections, decomposed into
means (ncnn Reduction/Pooling) and elementwise layers; both dialects."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module

MOMENTS = {
    "var_last": lambda x: x.var(-1),
    "var_keepdim_unbiased_false": lambda x: x.var(dim=(2, 3), keepdim=True, unbiased=False),
    "std_channels": lambda x: x.std(1),
    "std_correction2_keepdim": lambda x: torch.std(x, dim=2, correction=2, keepdim=True),
    "var_all": lambda x: x.var().reshape(1, 1),
    "var_mean": lambda x: torch.var_mean(x, dim=-1, keepdim=True),
    "std_mean": lambda x: torch.std_mean(x, dim=(1, 3)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(MOMENTS))
def test_moments(tmp_path, dialect, name):
    check_module(Fn(MOMENTS[name]), [torch.randn(1, 3, 4, 5) * 2 + 1], tmp_path, dialect=dialect)
