"""Small text transformers written in plain PyTorch the way Hugging Face writes them (transformers
itself is not a test dependency): a BERT-style encoder taking ``input_ids`` and an
``attention_mask``, a LLaMA-style decoder (RMSNorm, rotary embeddings, grouped key/value heads,
the causal mask with its packed-sequence check built from ``arange``/``cumsum``/``eq``/``&``)
and a T5-style relative position bias. Each converts in both dialects and matches PyTorch in
ncnn: with random 0/1 padding masks, and with the sequence length dynamic at three lengths."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.harness import DIALECTS, check_module

VOCAB, DIM, HEADS = 50, 16, 4


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, VOCAB, (1, n), generator=torch.Generator().manual_seed(seed))


def _padding(n: int, seed: int) -> torch.Tensor:
    m = (torch.rand(1, n, generator=torch.Generator().manual_seed(seed)) > 0.35).long()
    m[0, 0] = 1  # every query keeps a key
    return m


def _dynamic(*dims: int):
    n = torch.export.Dim("seq", min=2, max=24)
    return tuple({d: n} for d in dims)


# ----------------------------------------------------------------------------- BERT-style encoder
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.words = nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.positions = nn.Embedding(32, DIM)
        self.types = nn.Embedding(2, DIM)
        self.register_buffer("position_ids", torch.arange(32).expand(1, -1), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, 32, dtype=torch.long), persistent=False)
        self.norm = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.out = nn.Linear(DIM, DIM)
        self.ffn = nn.Sequential(nn.Linear(DIM, 32), nn.GELU(), nn.Linear(32, DIM))

    def forward(self, input_ids, attention_mask):
        n = input_ids.shape[1]
        types = self.token_type_ids[:, :n].expand(input_ids.shape[0], n)
        h = self.words(input_ids) + self.types(types) + self.positions(self.position_ids[:, :n])
        h = self.norm(h)
        # the padding mask as transformers' masking utils build it: a lookup with arange indices
        b, kv = torch.arange(1)[:, None, None, None], torch.arange(n)[None, None, None, :]
        mask = attention_mask.bool()[b, kv].expand(1, 1, n, n)
        q, k, v = (t.view(1, n, HEADS, DIM // HEADS).transpose(1, 2) for t in self.qkv(h).chunk(3, -1))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(1, n, DIM)
        h = h + self.out(a)
        return h + self.ffn(h)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_encoder_with_random_padding_masks(tmp_path, dialect, seed):
    torch.manual_seed(0)
    c = check_module(Encoder(), [_ids(9, seed), _padding(9, seed)], tmp_path, dialect=dialect, expect_types=["Embed"])
    assert [i["dtype"] for i in c.result.ncnn.meta["inputs"]] == ["int32", "float32"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [3, 11, 20])
def test_encoder_with_a_dynamic_length(tmp_path, dialect, length):
    torch.manual_seed(0)
    check_module(Encoder(), [_ids(9), _padding(9, 1)], tmp_path, dialect=dialect, dynamic_shapes=_dynamic(1, 1),
                 run_inputs=[_ids(length, 5), _padding(length, 5)])


# ----------------------------------------------------------------------------- LLaMA-style decoder
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def causal_mask(n: int, attention_mask=None):
    """transformers' sdpa mask: causal, the packed-sequence check (sequence ids from the
    position ids' steps) and the padding mask, as ``&`` of lookups with ``arange`` indices."""
    positions = torch.arange(n).unsqueeze(0)
    first = positions[:, :1] - 1
    seq = torch.cumsum(torch.diff(positions, prepend=first, dim=-1).ne(1), dim=-1)
    b = torch.arange(1)[:, None, None, None]
    q, kv = torch.arange(n)[None, None, :, None], torch.arange(n)[None, None, None, :]
    mask = (kv <= q) & (seq[b, q] == seq[b, kv])
    if attention_mask is not None:
        mask = mask & attention_mask.bool()[b, kv]
    return mask


class Decoder(nn.Module):
    def __init__(self, kv_heads=2, head_dim=8):
        super().__init__()
        self.kv_heads, self.head_dim = kv_heads, head_dim
        self.embed = nn.Embedding(VOCAB, DIM)
        self.norm1, self.norm2 = RMSNorm(DIM), RMSNorm(DIM)
        self.q = nn.Linear(DIM, HEADS * head_dim, bias=False)
        self.k = nn.Linear(DIM, kv_heads * head_dim, bias=False)
        self.v = nn.Linear(DIM, kv_heads * head_dim, bias=False)
        self.o = nn.Linear(HEADS * head_dim, DIM, bias=False)
        self.gate, self.up = nn.Linear(DIM, 24, bias=False), nn.Linear(DIM, 24, bias=False)
        self.down = nn.Linear(24, DIM, bias=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)),
                             persistent=False)

    def rotary(self, n):
        positions = torch.arange(n).float()
        freqs = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, None], emb.sin()[None, None]

    def repeat_kv(self, x):
        b, g, n, d = x.shape
        rep = HEADS // g
        return x[:, :, None, :, :].expand(b, g, rep, n, d).reshape(b, g * rep, n, d)

    def forward(self, input_ids, attention_mask=None):
        n = input_ids.shape[1]
        h = self.embed(input_ids)
        x = self.norm1(h)
        q = self.q(x).view(1, n, HEADS, self.head_dim).transpose(1, 2)
        k = self.k(x).view(1, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(1, n, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(n)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, self.repeat_kv(k), self.repeat_kv(v),
                                           attn_mask=causal_mask(n, attention_mask))
        h = h + self.o(a.transpose(1, 2).reshape(1, n, -1))
        x = self.norm2(h)
        return h + self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderWithMask(Decoder):
    def forward(self, input_ids, attention_mask):
        return super().forward(input_ids, attention_mask)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_decoder_from_ids_uses_ncnns_attention_layers(tmp_path, dialect):
    """With ``input_ids`` only the causal mask folds away; RoPE, grouped key/value heads and
    RMSNorm map onto ncnn's RotaryEmbed, SDPA (two key/value planes, no Tile) and RMSNorm."""
    torch.manual_seed(0)
    c = check_module(Decoder(), [_ids(10)], tmp_path, dialect=dialect,
                     expect_types=["SDPA", "RotaryEmbed", "RMSNorm"], forbid_types=["Tile", "Threshold"])
    sdpa = next(op for op in c.result.ncnn.ops if op.type == "SDPA")
    assert sdpa.inputs[1].shape[-3] == 2, "key/value heads are not repeated"


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("seed", [1, 2])
def test_decoder_with_random_padding_masks(tmp_path, dialect, seed):
    torch.manual_seed(0)
    check_module(DecoderWithMask(), [_ids(9, seed), _padding(9, seed)], tmp_path, dialect=dialect,
                 expect_types=["SDPA", "RotaryEmbed"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [2, 7, 24])
def test_decoder_with_a_dynamic_length(tmp_path, dialect, length):
    torch.manual_seed(0)
    check_module(Decoder(), [_ids(12)], tmp_path, dialect=dialect, dynamic_shapes=_dynamic(1),
                 run_inputs=[_ids(length, 3)], expect_types=["SDPA"])


# ----------------------------------------------------------------------------- T5-style position bias
class RelativeBias(nn.Module):
    """T5's bucketed relative position bias added to attention scores (bidirectional buckets,
    log-spaced beyond ``max_exact``), computed from the length only."""

    def __init__(self, buckets=8, max_distance=16):
        super().__init__()
        self.buckets, self.max_distance = buckets, max_distance
        self.bias = nn.Embedding(buckets, HEADS)
        self.proj = nn.Linear(DIM, 3 * DIM)

    def bucket(self, relative):
        n = self.buckets // 2
        out = (relative > 0).to(torch.long) * n
        relative = torch.abs(relative)
        max_exact = n // 2
        is_small = relative < max_exact
        large = max_exact + (torch.log(relative.float() / max_exact) / math.log(self.max_distance / max_exact)
                             * (n - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, n - 1))
        return out + torch.where(is_small, relative, large)

    def forward(self, x):
        n = x.shape[1]
        relative = torch.arange(n)[None, :] - torch.arange(n)[:, None]
        bias = self.bias(self.bucket(relative)).permute(2, 0, 1).unsqueeze(0)
        q, k, v = (t.view(1, n, HEADS, DIM // HEADS).transpose(1, 2) for t in self.proj(x).chunk(3, -1))
        scores = q @ k.transpose(-1, -2) + bias
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(1, n, DIM)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_relative_position_buckets_fold(tmp_path, dialect):
    torch.manual_seed(0)
    c = check_module(RelativeBias(), [torch.randn(1, 11, DIM)], tmp_path, dialect=dialect)
    types = [op.type for op in c.result.ncnn.ops]
    assert "Threshold" not in types and "Embed" not in types, "the bias is one constant"


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [3, 12, 24])
def test_relative_position_buckets_with_a_dynamic_length(tmp_path, dialect, length):
    torch.manual_seed(0)
    check_module(RelativeBias(), [torch.randn(1, 11, DIM)], tmp_path, dialect=dialect, dynamic_shapes=_dynamic(1),
                 run_inputs=[torch.randn(1, length, DIM)])
