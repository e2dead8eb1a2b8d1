"""A Swin-style shifted-window attention block end to end, from both dialects, fp32 and fp16
weights: cyclic shift (``torch.roll``), window partition and reverse through 6-D views and
permutes, a qkv head split through a 5-D permute, a relative position bias gathered from a
parameter table by a constant index, the shifted-window attention mask built from
``new_zeros`` + slice fills + ``ne``/``eq`` + ``masked_fill`` (one constant after folding) and
added through a 5-D view, LayerNorm, a GELU MLP and patch merging (strided slices + concat)."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.harness import DIALECTS, check_module


def relative_position_index(w):
    coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += w - 1
    rel[:, :, 1] += w - 1
    rel[:, :, 0] *= 2 * w - 1
    return rel.sum(-1).flatten()


class WindowAttention(nn.Module):
    """torchvision's ``shifted_window_attention`` (Swin V1) for one feature map."""

    def __init__(self, dim, heads, window, shift):
        super().__init__()
        self.dim, self.heads, self.window, self.shift = dim, heads, window, shift
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.5)
        self.register_buffer("index", relative_position_index(window))

    def forward(self, x):
        b, h, w_, c = x.shape
        w, s = self.window, self.shift
        if s:
            x = torch.roll(x, shifts=(-s, -s), dims=(1, 2))
        nw = (h // w) * (w_ // w)
        x = x.view(b, h // w, w, w_ // w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(b * nw, w * w, c)
        qkv = self.qkv(x).reshape(x.size(0), x.size(1), 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * (c // self.heads) ** -0.5
        attn = q.matmul(k.transpose(-2, -1))
        n = w * w
        bias = self.table[self.index].view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        attn = attn + bias
        if s:
            mask = x.new_zeros((h, w_))
            count = 0
            for hs in ((0, -w), (-w, -s), (-s, None)):
                for ws in ((0, -w), (-w, -s), (-s, None)):
                    mask[hs[0]:hs[1], ws[0]:ws[1]] = count
                    count += 1
            mask = mask.view(h // w, w, w_ // w, w).permute(0, 2, 1, 3).reshape(nw, n)
            mask = mask.unsqueeze(1) - mask.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, float(-100.0)).masked_fill(mask == 0, float(0.0))
            attn = attn.view(x.size(0) // nw, nw, self.heads, n, n)
            attn = attn + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.heads, n, n)
        attn = F.softmax(attn, dim=-1)
        x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), n, c)
        x = self.proj(x)
        x = x.view(b, h // w, w_ // w, w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w_, c)
        if s:
            x = torch.roll(x, shifts=(s, s), dims=(1, 2))
        return x


class SwinBlock(nn.Module):
    def __init__(self, dim=16, heads=2, window=4, shift=2):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, window, shift)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        x = torch.cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :]], -1)
        return self.reduction(self.norm(x))


class SwinStage(nn.Module):
    """A non-shifted and a shifted block, then patch merging."""

    def __init__(self, dim=16):
        super().__init__()
        self.blocks = nn.Sequential(SwinBlock(dim, shift=0), SwinBlock(dim, shift=2))
        self.merge = PatchMerging(dim)

    def forward(self, x):
        return self.merge(self.blocks(x))


def _randomize(model):
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
    return model.eval()


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_shifted_window_block(tmp_path, dialect, fp16):
    torch.manual_seed(0)
    c = check_module(_randomize(SwinBlock(shift=2)), [torch.randn(1, 8, 8, 16)], tmp_path, dialect=dialect, fp16=fp16)
    types = _types(c)
    # window partition and reverse: one 4-D Permute each; the head split: one per q/k/v
    assert types.count("Permute") <= 6
    assert types.count("MemoryData") <= 2  # the relative position bias and the shift mask, folded


@pytest.mark.parametrize("dialect", DIALECTS)
def test_window_block_without_shift(tmp_path, dialect):
    torch.manual_seed(0)
    check_module(_randomize(SwinBlock(shift=0)), [torch.randn(1, 8, 8, 16)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_swin_stage(tmp_path, dialect, fp16):
    torch.manual_seed(0)
    check_module(_randomize(SwinStage()), [torch.randn(1, 8, 8, 16)], tmp_path, dialect=dialect, fp16=fp16)


class WindowAttentionV2(nn.Module):
    """Swin V2's window attention on windows already partitioned: cosine attention (normalised
    q and k, a clamped and exponentiated logit scale) and a continuous position bias — an MLP on
    a constant coordinate table, gathered by a constant index (all folded to one constant)."""

    def __init__(self, dim=16, heads=2, window=4):
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.rand(heads, 1, 1) + 1))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, heads, bias=False))
        r = torch.arange(-(window - 1), window, dtype=torch.float32)
        table = torch.stack(torch.meshgrid(r, r, indexing="ij"), -1).unsqueeze(0) / (window - 1) * 8
        self.register_buffer("table", torch.sign(table) * torch.log2(table.abs() + 1.0) / 3.0)
        self.register_buffer("index", relative_position_index(window))

    def forward(self, x):
        x = x.flatten(0, 1)  # (1, windows, L, C) -> (windows, L, C)
        n, length, c = x.shape
        q, k, v = self.qkv(x).reshape(n, length, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * torch.clamp(self.logit_scale, max=4.6052).exp()
        bias = self.cpb_mlp(self.table).view(-1, self.heads)[self.index].view(length, length, -1)
        attn = attn + 16 * torch.sigmoid(bias.permute(2, 0, 1).contiguous()).unsqueeze(0)
        return self.proj((attn.softmax(-1) @ v).transpose(1, 2).reshape(n, length, c)).unsqueeze(0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_swin_v2_cosine_attention_with_continuous_position_bias(tmp_path, dialect):
    torch.manual_seed(0)
    c = check_module(WindowAttentionV2().eval(), [torch.randn(1, 4, 16, 16)], tmp_path, dialect=dialect)
    assert "Reduction" in _types(c)  # the L2 norms of F.normalize
