"""Elementwise composites the training dialect keeps whole (addcmul, addcdiv, logaddexp,
deg2rad, rad2deg, exp2, erfc, threshold), both dialects, in ncnn against PyTorch."""
import pytest
import torch
import torch.nn.functional as F

from tests.harness import DIALECTS, Fn, check_module

CASES = {
    "addcmul": lambda x, y: torch.addcmul(x, x, y, value=0.5),
    "addcdiv": lambda x, y: torch.addcdiv(x, x, y.abs() + 1, value=-2),
    "logaddexp": lambda x, y: torch.logaddexp(x * 3, y),
    "degrees": lambda x, y: torch.deg2rad(x * 90) + torch.rad2deg(y),
    "exp2": lambda x, y: torch.exp2(x),
    "erfc": lambda x, y: torch.erfc(x),
    "threshold": lambda x, y: F.threshold(x, 0.1, 20.0),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_composite(tmp_path, dialect, name):
    check_module(Fn(CASES[name]), [torch.randn(1, 4, 6), torch.randn(1, 4, 6)], tmp_path, dialect=dialect)
