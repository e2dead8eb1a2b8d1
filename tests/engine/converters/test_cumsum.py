"""cumsum (both dialects) → ncnn CumulativeSum along each axis; of bool/int values (counts)."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape,dim", [((1, 7), 1), ((1, 4, 6), -1), ((1, 4, 6), 1), ((1, 3, 4, 5), 2),
                                       ((1, 3, 4, 5), 1), ((1, 3, 4, 5), 3)])
def test_cumsum(tmp_path, dialect, shape, dim):
    c = check_module(Fn(lambda x: torch.cumsum(x, dim)), [torch.randn(*shape)], tmp_path, dialect=dialect,
                     expect_types=["CumulativeSum"])
    assert c.errors[0] < 1e-6


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cumsum_counts_a_mask(tmp_path, dialect):
    """RoBERTa's position ids: cumsum of a 0/1 mask (int), times the mask, plus an offset."""

    def positions(x):
        mask = (x > 0).int()
        return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + 1

    c = check_module(Fn(positions), [torch.randn(1, 11)], tmp_path, dialect=dialect)
    assert c.errors == [0.0]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cumsum_along_the_batch_axis(tmp_path, dialect):
    check_module(Fn(lambda x: torch.cumsum(x, 0) * 2), [torch.randn(1, 4, 5)], tmp_path, dialect=dialect)
