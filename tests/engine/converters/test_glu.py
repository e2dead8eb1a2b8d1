"""glu → ncnn GLU on every non-batch axis, both dialects (core ATen's slice/sigmoid/mul is
recomposed)."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape,dim", [((1, 8), -1), ((1, 6, 5), 1), ((1, 5, 6), 2), ((1, 4, 3, 6), 1),
                                       ((1, 3, 4, 6), -2), ((1, 3, 5, 6), 3), ((1, 2, 4, 3, 2), 2)])
def test_glu(tmp_path, dialect, shape, dim):
    c = check_module(nn.GLU(dim), [torch.randn(*shape)], tmp_path, dialect=dialect)
    assert [op.type for op in c.result.ncnn.ops] == ["Input", "GLU"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_hand_written_glu(tmp_path, dialect):
    """``a * sigmoid(b)`` of the two halves (as in gated convolutions) is one GLU, either order."""
    def fn(x):
        a, b = x.chunk(2, dim=1)
        return torch.sigmoid(b) * a

    c = check_module(Fn(fn), [torch.randn(1, 8, 5)], tmp_path, dialect=dialect)
    assert [op.type for op in c.result.ncnn.ops] == ["Input", "GLU"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_glu_along_a_leading_axis(tmp_path, dialect):
    """GLU over dim 0 (extent 2): that axis cannot be the batch, so the tensor keeps every dim
    and ncnn's GLU halves its outermost axis."""
    c = check_module(nn.GLU(0), [torch.randn(2, 3, 4)], tmp_path, dialect=dialect, batched=[False])
    assert "GLU" in [op.type for op in c.result.ncnn.ops]
