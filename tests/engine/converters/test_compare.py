"""Comparisons of run-time tensors (both dialects): exact 0/1 results in ncnn, for scalars and
broadcast tensors, equal values, infinities and integer-valued inputs."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module

CASES = {
    "gt_scalar": lambda x, y: x > 0.25,
    "lt_scalar": lambda x, y: x < -0.5,
    "ge_scalar_on_ties": lambda x, y: x.round() >= 1,
    "le_scalar_left": lambda x, y: 0.5 <= x,
    "lt_tensor": lambda x, y: x < y,
    "gt_tensor_broadcast": lambda x, y: x > y[:, :1],
    "le_tensor_ties": lambda x, y: x.round() <= y.round(),
    "ge_tensor_broadcast_rows": lambda x, y: x.round() >= y.round()[:, :, :1],
    "eq_tensor": lambda x, y: x.round() == y.round(),
    "eq_scalar": lambda x, y: x.round() == 0,
    "ne_tensor": lambda x, y: x.round() != y.round(),
    "ne_scalar": lambda x, y: x.round() != 1,
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_comparison(tmp_path, dialect, name):
    torch.manual_seed(0)
    x, y = torch.randn(1, 4, 6) * 2, torch.randn(1, 4, 6) * 2
    c = check_module(Fn(CASES[name]), [x, y], tmp_path, dialect=dialect)
    assert c.errors == [0.0], "a comparison must be exact"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_comparisons_with_infinities(tmp_path, dialect):
    inf = float("inf")
    x = torch.tensor([[inf, -inf, inf, 1.0, -inf, 0.0, -0.0, 2.0]])
    y = torch.tensor([[inf, -inf, -inf, inf, 3.0, -0.0, 0.0, 2.0]])
    c = check_module(Fn(lambda x, y: torch.cat([x > y, x < y, x >= y, x <= y, x == y, x != y, x > 1e38], 1)),
                     [x, y], tmp_path, dialect=dialect)
    assert c.errors == [0.0]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_comparison_result_used_as_numbers(tmp_path, dialect):
    """A bool result flows on as 0/1 numbers (counted, scaled) like in PyTorch."""
    check_module(Fn(lambda x: ((x > 0).float() * 3 + (x < -1).long()).sum(-1)), [torch.randn(1, 5, 9)], tmp_path,
                 dialect=dialect)
