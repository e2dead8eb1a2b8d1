"""Dtype conversions of run-time tensors (both dialects): bool/int/float round trips, truncation
toward zero, float ↔ float casts dropped."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module

CASES = {
    "to_bool": lambda x: x.round().bool(),
    "bool_to_float": lambda x: (x > 0).float() * x,
    "float_to_long_truncates": lambda x: (x * 3).long(),
    "float_to_int_and_back": lambda x: (x * 3).int().float() - 1,
    "long_to_bool_to_long": lambda x: (x * 2).long().bool().long(),
    "type_as": lambda x: (x > 0).type_as(x) + x,
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_cast(tmp_path, dialect, name):
    torch.manual_seed(0)
    c = check_module(Fn(CASES[name]), [torch.randn(1, 4, 6) * 2], tmp_path, dialect=dialect)
    assert c.errors == [0.0]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_float_casts_are_dropped(tmp_path, dialect):
    c = check_module(Fn(lambda x: (x.half().float() * 2).double().float()), [torch.randn(1, 3, 4)], tmp_path,
                     dialect=dialect, tol=2e-3)
    assert [op.type for op in c.result.ncnn.ops] == ["Input", "BinaryOp"]
