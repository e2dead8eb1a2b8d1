"""A small decoder-only language model in plain PyTorch, with a key/value cache.

LLaMA-shaped: token embedding, per layer RMSNorm → attention with rotary position embeddings
and grouped key/value heads (``enable_gqa``) → RMSNorm → SwiGLU MLP, a final RMSNorm and an LM
head tied to the embedding. It follows the flat calling convention of
:func:`engine.llm.export_decoder`: ``model(input_ids, *past) -> (logits, *present)`` with
``past``/``present`` = ``k0, v0, k1, v1, ...`` each ``(1, kv_heads, length, head_dim)``; without
``past`` it is the prefill (a causal prompt), with it one decode step. ``new_first`` puts the
new entries before the past in the cache (a layout the converter refuses)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, head_dim: int, hidden: int, new_first: bool = False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.new_first = heads, kv_heads, head_dim, new_first
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.q = nn.Linear(dim, heads * head_dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * head_dim, bias=False)
        self.v = nn.Linear(dim, kv_heads * head_dim, bias=False)
        self.o = nn.Linear(heads * head_dim, dim, bias=False)
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, h, cos, sin, past_k=None, past_v=None):
        n = h.shape[1]
        x = self.norm1(h)
        q = self.q(x).view(1, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(1, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(1, n, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_k is not None:
            pair = (lambda past, new: (new, past)) if self.new_first else (lambda past, new: (past, new))
            k, v = torch.cat(pair(past_k, k), dim=2), torch.cat(pair(past_v, v), dim=2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=past_k is None, enable_gqa=True)
        h = h + self.o(a.transpose(1, 2).reshape(1, n, -1))
        x = self.norm2(h)
        return h + self.down(F.silu(self.gate(x)) * self.up(x)), k, v


class TinyDecoder(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, kv_heads: int = 2, head_dim: int = 8,
                 hidden: int = 48, layers: int = 2, theta: float = 10000.0, new_first: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, kv_heads, head_dim, hidden, new_first) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.embed.weight  # tied
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim),
                             persistent=False)
        with torch.no_grad():  # larger projections: with the default init the tied head echoes the last token
            for lin in self.blocks.modules():
                if isinstance(lin, nn.Linear):
                    lin.weight.mul_(3)

    def forward(self, input_ids, *past):
        n = input_ids.shape[1]
        start = past[0].shape[2] if past else 0
        positions = torch.arange(start, start + n).float()
        freqs = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        h = self.embed(input_ids)
        present = []
        for i, block in enumerate(self.blocks):
            pk, pv = (past[2 * i], past[2 * i + 1]) if past else (None, None)
            h, k, v = block(h, cos, sin, pk, pv)
            present += [k, v]
        return (self.lm_head(self.norm(h)), *present)
