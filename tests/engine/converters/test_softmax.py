"""softmax / log_softmax over every non-batch dim of 2-5-D inputs, both dialects."""
import pytest
import torch
import torch.nn as nn

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, check_module, export_pt2

CASES = [((1, 7), d) for d in (1, -1)] + [((1, 3, 7), d) for d in (1, 2, -1)] + \
        [((1, 3, 5, 7), d) for d in (1, 2, 3, -2)] + [((1, 2, 3, 4, 5), d) for d in (1, 2, 3, 4)]


def _x(shape):
    torch.manual_seed(0)
    return torch.randn(*shape) * 4


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape,dim", CASES)
def test_softmax(tmp_path, dialect, shape, dim):
    r = check_module(nn.Softmax(dim), [_x(shape)], tmp_path, dialect=dialect, expect_types=["Softmax"])
    (layer,) = [op for op in r.result.ncnn.ops if op.type == "Softmax"]
    assert layer.params[1] == 1  # fixbug0, as pnnx writes it
    assert layer.params.get(0, 0) == dim % len(shape) - 1  # axis without the batch axis


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape,dim", CASES[::2])
def test_log_softmax(tmp_path, dialect, shape, dim):
    check_module(nn.LogSoftmax(dim), [_x(shape)], tmp_path, dialect=dialect, expect_types=["Softmax", "UnaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_functional_softmax_with_dtype(tmp_path, dialect):
    class M(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1, dtype=torch.float32) + torch.log_softmax(x, 1)

    check_module(M(), [_x((1, 4, 6))], tmp_path, dialect=dialect, expect_types=["Softmax", "BinaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape", [(1, 5), (3, 5), (1, 3, 4, 4)])
def test_softmax_over_dim0(tmp_path, dialect, shape):
    check_module(nn.Softmax(0), [_x(shape)], tmp_path, dialect=dialect)
