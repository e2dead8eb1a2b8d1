"""Boolean logic and selection with run-time conditions (both dialects): exact for random 0/1
masks, bitwise ops of bools, where/masked_fill with tensor, scalar and infinite branches."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module

CASES = {
    "and_or": lambda x, y: ((x > 0) & (y > 0)) | (x < -1),
    "xor_not": lambda x, y: (x > 0) ^ ~(y > 0),
    "logical_ops": lambda x, y: torch.logical_xor(torch.logical_and(x, y > 0), torch.logical_not(x > 1)),
    "logical_of_numbers": lambda x, y: torch.logical_or(x.round(), y.round()),
    "where_tensors": lambda x, y: torch.where(x > y, x, y),
    "where_scalar_other": lambda x, y: torch.where(x > 0, x, 0.5),
    "where_scalar_self": lambda x, y: torch.where(x > 0, -2.0, y),
    "where_broadcast": lambda x, y: torch.where(y[:, :1] > 0, x, y[:, :, :1]),
    "masked_fill_finite": lambda x, y: x.masked_fill(y > 0.5, -1e4),
    "masked_fill_minus_inf": lambda x, y: x.masked_fill(y > 0.5, float("-inf")).exp(),
    "masked_fill_plus_inf": lambda x, y: (-x.masked_fill(y > 0.5, float("inf"))).exp(),
    "where_inf_and_number": lambda x, y: torch.where(y > 0, float("-inf"), 3.0).exp() + x,
}

#: cases ending in exp, which ncnn computes to within a few ulp
INEXACT = ("masked_fill_minus_inf", "masked_fill_plus_inf", "where_inf_and_number")


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_logic(tmp_path, dialect, name):
    torch.manual_seed(0)
    x, y = torch.randn(1, 4, 6) * 2, torch.randn(1, 4, 6)
    c = check_module(Fn(CASES[name]), [x, y], tmp_path, dialect=dialect)
    assert c.errors[0] <= (1e-6 if name in INEXACT else 0.0), "selection must be exact"


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_attention_scores_with_random_padding_mask(tmp_path, dialect, seed):
    """A key padding mask (random 0/1 per key) applied with masked_fill(-inf) before a softmax."""

    def f(scores, mask):
        return scores.masked_fill(mask[:, None, None, :] == 0, float("-inf")).softmax(-1)

    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(1, 7, generator=g) > 0.4).float()
    mask[0, 0] = 1  # every row keeps a key
    check_module(Fn(f), [torch.randn(1, 2, 5, 7, generator=g), mask], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_any_and_all(tmp_path, dialect):
    x = torch.tensor([[[0.0, 0, 0], [0, 2, 0], [1, 1, 1]]])
    c = check_module(Fn(lambda x: (x.any(-1), (x > 0).all(-1, keepdim=True), x.bool().any(1))), [x], tmp_path,
                     dialect=dialect)
    assert c.errors == [0.0, 0.0, 0.0]
