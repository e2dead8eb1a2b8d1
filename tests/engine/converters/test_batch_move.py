"""Batch moves whose samples are contiguous runs of the whole tensor (windows split off the
outermost dims of a feature map into the batch and merged back, a batch merged into a plain
dim and split out again) take ncnn's memcpy form: ``Reshape`` with ``12=1``/``13=1`` between
the samples ``(1, s)`` and the blob ``(1, n, s)``, never the per-element general move.

Each model is exported with real ``torch.export`` (both dialects), converted, run in ncnn
along the batch axes the converter chose and compared with PyTorch (``tests/harness.py``).
"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


def _r(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape) + len(shape)))


def _moves(c) -> list[tuple[int, int]]:
    """(input batch axis, output batch axis) of every ncnn Reshape that moves the batch."""
    return [(op.params.get(12, 233), op.params.get(13, 233)) for op in c.result.ncnn.ops
            if op.type == "Reshape" and (12 in op.params or 13 in op.params)]


class Windows(nn.Module):
    """Window partition of a (1, H, W, C) map into the batch, per-window attention-like work
    (a 5-D head split forces the windows into the batch), a per-window-constant bias added with
    the windows back in the blob (a constant cannot vary along the batch), and the reverse."""

    def __init__(self, c=8, w=2, heads=2):
        super().__init__()
        self.c, self.w, self.heads = c, w, heads
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.register_buffer("mask", torch.randn(4, 1, w * w, w * w))

    def forward(self, x):
        b, h, w_, c = x.shape
        w, nw, n = self.w, (h // self.w) * (w_ // self.w), self.w * self.w
        x = x.view(b, h // w, w, w_ // w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(b * nw, n, c)
        q, k, v = self.qkv(x).reshape(b * nw, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = q.matmul(k.transpose(-2, -1)).view(b, nw, self.heads, n, n) + self.mask.unsqueeze(0)
        a = F.softmax(a.view(-1, self.heads, n, n), dim=-1)
        x = self.proj(a.matmul(v).transpose(1, 2).reshape(b * nw, n, c))
        return x.view(b, h // w, w_ // w, w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w_, c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_window_partition_moves_are_memcpy(tmp_path, dialect):
    c = check_module(Windows(), [_r(1, 4, 4, 8)], tmp_path, dialect=dialect)
    moves = _moves(c)
    assert (233, 1) in moves and (1, 233) in moves, moves
    assert set(moves) <= {(233, 1), (1, 233)}, f"a per-element batch move is left: {moves}"


class MergeSplit(nn.Module):
    """A batch of any size merged into a plain dim (a softmax across it: no longer a batch) and
    split back out (a per-sample pooling needs it as the batch)."""

    def forward(self, x):
        y = F.max_pool1d(x, 1).reshape(-1, 6)
        y = torch.softmax(y, dim=0) * 3
        return F.max_pool1d(y.reshape(x.shape[0], 4, 6), 1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dynamic_batch_merged_and_split_again(tmp_path, dialect):
    batch = torch.export.Dim("batch", min=2, max=16)
    for n in (3, 5):
        c = check_module(MergeSplit(), [_r(2, 4, 6)], tmp_path, dialect=dialect, name=f"dyn{n}",
                         dynamic_shapes=({0: batch},), run_inputs=[_r(n, 4, 6)])
        assert set(_moves(c)) == {(233, 1), (1, 233)}, _moves(c)


class PooledHeads(nn.Module):
    """MViT's pooling attention: the tokens (B, 1 + T·H·W, 3·heads·C) split into q, k, v of
    (B, heads, tokens, C); k's and v's class token is split off, the other tokens pooled per
    head (the heads merged into the batch for a 3-D convolution), put back as (B, heads,
    tokens, C), normalized and joined to the class token again — one cat input with the
    tokens' batch axis, one whose batch the reshapes moved — then attention over the heads."""

    def __init__(self, c: int = 8, heads: int = 2):
        super().__init__()
        self.c, self.heads, self.thw = c, heads, (2, 4, 4)
        self.pool_k = nn.Conv3d(c, c, 3, stride=(1, 2, 2), padding=1, groups=c, bias=False)
        self.pool_v = nn.Conv3d(c, c, 3, stride=(1, 2, 2), padding=1, groups=c, bias=False)
        self.norm_k, self.norm_v = nn.LayerNorm(c), nn.LayerNorm(c)

    def _pool(self, x, pool, norm):
        b = x.shape[0]
        cls, tokens = torch.tensor_split(x, (1,), dim=2)
        tokens = tokens.transpose(2, 3).reshape(b * self.heads, self.c, *self.thw)
        tokens = pool(tokens).reshape(b, self.heads, self.c, -1).transpose(2, 3)
        return torch.cat((cls, norm(tokens)), dim=2)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = x.reshape(b, n, 3, self.heads, self.c).transpose(1, 3).unbind(dim=2)
        k, v = self._pool(k, self.pool_k, self.norm_k), self._pool(v, self.pool_v, self.norm_v)
        attn = torch.matmul(q * self.c ** -0.5, k.transpose(2, 3)).softmax(dim=-1)
        return torch.matmul(attn, v).transpose(1, 2).reshape(b, n, -1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cat_of_a_batched_token_and_tokens_whose_batch_moved(tmp_path, dialect):
    """Each cat input is moved to the output's batch axis before the Concat (it was refused:
    "inputs mix batched and batch-less tensors"), and the whole matches PyTorch."""
    check_module(PooledHeads(), [_r(1, 1 + 2 * 4 * 4, 3 * 2 * 8)], tmp_path, dialect=dialect)
