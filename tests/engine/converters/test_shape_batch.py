"""The batch axis away from dim 0: sequence-first (L, 1, E) tensors inside a model, the batch
moved by transpose/permute/unsqueeze/squeeze (nn.MultiheadAttention's packed in-projection
split), and ops along the other dims of such tensors — ncnn holds them without the batch
(an (L, 1, E) tensor is an (L, E) blob). Both dialects."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


def _packed_split(x, e=8):
    """torch's _in_projection_packed for self-attention, seq-first: (L, 1, 3E) -> q, k, v."""
    proj = x.transpose(0, 1)
    proj = proj.unflatten(-1, (3, e)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    return proj[0], proj[1], proj[2]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_packed_in_projection_split(tmp_path, dialect):
    def f(x):
        q, k, v = _packed_split(x)
        return (q * k + v).transpose(0, 1)

    c = check_module(Fn(f), [torch.randn(1, 6, 24)], tmp_path, dialect=dialect)
    shapes = [len(o.shape) - (o.meta.get("batch_dim") is not None) for op in c.result.ncnn.ops for o in op.outputs]
    assert max(shapes) <= 4


@pytest.mark.parametrize("dialect", DIALECTS)
def test_ops_along_sequence_first_tensors(tmp_path, dialect):
    norm = nn.LayerNorm(8)

    def f(x):
        s = x.transpose(0, 1)  # (L, 1, E): the batch at dim 1
        a = torch.softmax(s, dim=-1) + norm(s)
        b = torch.cat([a, s[:, :, :3]], dim=2)
        m = b.mean(dim=0, keepdim=True) + b.amax(dim=2, keepdim=True)
        return m.permute(1, 0, 2) + b[2:4].sum(0)

    check_module(Fn(f), [torch.randn(1, 5, 8)], tmp_path, dialect=dialect)


class SeqFirstAttention(nn.Module):
    """nn.MultiheadAttention with batch_first=False on a (1, L, E) input transposed to (L, 1, E)."""

    def __init__(self, e=16, heads=2):
        super().__init__()
        self.attn = nn.MultiheadAttention(e, heads)
        self.out = nn.Linear(e, 4)

    def forward(self, x):
        s = x.transpose(0, 1)
        y, _ = self.attn(s, s, s, need_weights=False)
        return self.out(y.transpose(0, 1))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sequence_first_multihead_attention(tmp_path, dialect):
    check_module(SeqFirstAttention().eval(), [torch.randn(1, 7, 16)], tmp_path, dialect=dialect)
