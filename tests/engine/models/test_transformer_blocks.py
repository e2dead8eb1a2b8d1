"""Whole transformer-style blocks end to end, from both dialects, fp32 and fp16 weights: a tiny
ViT (class token, position embedding, pre-norm encoder block with nn.MultiheadAttention), a
BERT-like encoder layer with a padding mask, a GPT-like decoder block with a causal mask, a
ConvNeXt block and MobileViT-like conv/transformer hybrids. (1, L, D) activations are 2-D
(h=L, w=D) ncnn blobs."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.harness import DIALECTS, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


def _randomize(model):
    """Non-trivial norm affine parameters (default init is ones/zeros)."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, nn.GroupNorm)) and m.weight is not None:
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
    return model.eval()


# ----------------------------------------------------------------------------- ViT
class EncoderBlock(nn.Module):
    """Pre-norm ViT encoder block: x + MHA(LN(x)); x + MLP(LN(x))."""

    def __init__(self, dim=32, heads=4, mlp=64):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Dropout(0.1), nn.Linear(mlp, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    def __init__(self, dim=32, patch=4, image=16, depth=2, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.5)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.5)
        self.blocks = nn.Sequential(*[EncoderBlock(dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_tiny_vit(tmp_path, dialect, fp16):
    c = check_module(_randomize(TinyViT()), [torch.randn(1, 3, 16, 16)], tmp_path, dialect=dialect, fp16=fp16)
    types = _types(c)
    assert types.count("LayerNorm") == 5
    assert types.count("MultiHeadAttention") == 2 or types.count("SDPA") == 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_vit_encoder_block(tmp_path, dialect):
    c = check_module(_randomize(EncoderBlock()), [torch.randn(1, 17, 32)], tmp_path, dialect=dialect)
    assert "MultiHeadAttention" in _types(c) or "SDPA" in _types(c)


class DropPath(nn.Module):
    """timm-style stochastic depth: identity unless training."""

    def __init__(self, p=0.2):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0.0 or not self.training:
            return x
        keep = torch.rand(x.shape[0], *([1] * (x.ndim - 1))) >= self.p
        return x * keep / (1 - self.p)


class DropPathBlock(EncoderBlock):
    """Encoder block with stochastic depth on both residual branches (timm's ViT/Swin blocks)."""

    def __init__(self):
        super().__init__()
        self.drop_path = DropPath(0.2)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.drop_path(self.attn(h, h, h, need_weights=False)[0])
        return x + self.drop_path(self.mlp(self.norm2(x)))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stochastic_depth_block(tmp_path, dialect):
    c = check_module(_randomize(DropPathBlock()), [torch.randn(1, 9, 32)], tmp_path, dialect=dialect)
    assert _types(c).count("MultiHeadAttention") == 1 and "Dropout" not in _types(c)


# ----------------------------------------------------------------------------- BERT
class SelfAttention(nn.Module):
    """Hand-written multi-head self-attention (q/k/v projections, head split, SDPA, merge)."""

    def __init__(self, dim=32, heads=4, causal=False):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x, mask=None):
        b, n, d = x.shape
        split = lambda t: t.view(b, n, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        y = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask,
                                           is_causal=self.causal)
        return self.o(y.transpose(1, 2).reshape(b, n, d))


class BertLayer(nn.Module):
    """Post-norm encoder layer; ``attention_mask`` (1 = token, 0 = padding) becomes an additive
    (N, 1, 1, L) mask as in BERT."""

    def __init__(self, dim=32, heads=4, mlp=64):
        super().__init__()
        self.attn = SelfAttention(dim, heads)
        self.norm1 = nn.LayerNorm(dim, eps=1e-12)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))
        self.norm2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x, attention_mask):
        ext = (1.0 - attention_mask[:, None, None, :]) * -10000.0
        x = self.norm1(x + self.attn(x, ext))
        return self.norm2(x + self.mlp(x))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_bert_layer_padding_mask(tmp_path, dialect, fp16):
    mask = torch.tensor([[1.0] * 9 + [0.0] * 3])
    c = check_module(_randomize(BertLayer()), [torch.randn(1, 12, 32), mask], tmp_path, dialect=dialect, fp16=fp16)
    assert "SDPA" in _types(c) or "MultiHeadAttention" in _types(c)


class TorchEncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer (batch_first) with an additive key padding mask built in the model."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, activation="gelu", batch_first=True)

    def forward(self, x, attention_mask):
        return self.layer(x, src_key_padding_mask=(1.0 - attention_mask) * -1e4)


# ----------------------------------------------------------------------------- GPT
class GptBlock(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, causal=True)
        self.fc, self.proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_gpt_block_causal(tmp_path, dialect, fp16):
    c = check_module(_randomize(GptBlock()), [torch.randn(1, 10, 32)], tmp_path, dialect=dialect, fp16=fp16)
    assert "SDPA" in _types(c) or "MultiHeadAttention" in _types(c)


class GptBlockTrilMask(nn.Module):
    """Causal attention written by hand: scores masked with a registered tril buffer."""

    def __init__(self, dim=32, heads=4, length=10):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer("tril", torch.tril(torch.ones(length, length)).view(1, 1, length, length))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        att = att.masked_fill(self.tril[:, :, :n, :n] == 0, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, n, d))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_gpt_tril_masked_fill(tmp_path, dialect):
    """Scores masked_fill-ed with a constant tril buffer and scaled after the product: recomposed into
    a causal attention, then fused with its projections."""
    c = check_module(GptBlockTrilMask().eval(), [torch.randn(1, 10, 32)], tmp_path, dialect=dialect)
    assert _types(c).count("MultiHeadAttention") == 1


# ----------------------------------------------------------------------------- ConvNeXt
class ConvNeXtBlock(nn.Module):
    """torchvision's CNBlock: dwconv 7x7, permute to NHWC, LayerNorm, MLP, permute back, layer
    scale, stochastic depth (identity in eval), residual."""

    def __init__(self, dim=32):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1, self.act, self.pw2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
        self.layer_scale = nn.Parameter(torch.rand(dim, 1, 1) + 0.5)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pw2(self.act(self.pw1(self.norm(y)))).permute(0, 3, 1, 2)
        return x + F.dropout(self.layer_scale * y, 0.1, self.training)


class LayerNorm2d(nn.LayerNorm):
    """ConvNeXt's downsampling norm: LayerNorm over channels of an NCHW tensor."""

    def forward(self, x):
        return F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias,
                            self.eps).permute(0, 3, 1, 2)


class TinyConvNeXt(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 4, 4), LayerNorm2d(16, eps=1e-6))
        self.stage1 = ConvNeXtBlock(16)
        self.down = nn.Sequential(LayerNorm2d(16, eps=1e-6), nn.Conv2d(16, 32, 2, 2))
        self.stage2 = ConvNeXtBlock(32)

    def forward(self, x):
        return self.stage2(self.down(self.stage1(self.stem(x)))).mean((2, 3))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_convnext_block(tmp_path, dialect, fp16):
    c = check_module(_randomize(ConvNeXtBlock()), [torch.randn(1, 32, 14, 14)], tmp_path, dialect=dialect,
                     fp16=fp16)
    # channels-first MLP: permute-LayerNorm-permute, 1x1 convolutions, layer scale folded
    assert _types(c) == ["Input", "Split", "ConvolutionDepthWise", "Permute", "LayerNorm", "Permute", "Convolution",
                         "GELU", "Convolution", "BinaryOp"]


class ConvNeXtBlockTimm(ConvNeXtBlock):
    """timm's variant: the layer scale (C,) multiplies inside the NHWC section."""

    def __init__(self, dim=32):
        super().__init__(dim)
        self.gamma = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = (self.pw2(self.act(self.pw1(self.norm(y)))) * self.gamma).permute(0, 3, 1, 2)
        return x + y


@pytest.mark.parametrize("dialect", DIALECTS)
def test_convnext_block_timm_scale(tmp_path, dialect):
    c = check_module(_randomize(ConvNeXtBlockTimm()), [torch.randn(1, 32, 14, 14)], tmp_path, dialect=dialect)
    assert _types(c).count("Convolution") == 2 and "Gemm" not in _types(c) and "MemoryData" not in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_tiny_convnext(tmp_path, dialect):
    c = check_module(_randomize(TinyConvNeXt()), [torch.randn(1, 3, 32, 32)], tmp_path, dialect=dialect)
    assert _types(c).count("LayerNorm") == 4


# ----------------------------------------------------------------------------- MobileViT
class HybridBlock(nn.Module):
    """Conv → tokens (flatten/transpose) → transformer encoder block → feature map → conv fuse."""

    def __init__(self, c=16, dim=32):
        super().__init__()
        self.local = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.SiLU(), nn.Conv2d(c, dim, 1))
        self.encoder = EncoderBlock(dim, heads=4, mlp=64)
        self.norm = nn.LayerNorm(dim)
        self.project = nn.Conv2d(dim, c, 1)
        self.fuse = nn.Conv2d(2 * c, c, 3, padding=1)

    def forward(self, x):
        b, _, h, w = x.shape
        y = self.local(x)
        t = self.norm(self.encoder(y.flatten(2).transpose(1, 2)))
        y = self.project(t.transpose(1, 2).reshape(b, -1, h, w))
        return self.fuse(torch.cat([x, y], dim=1))


class MobileViTBlock(HybridBlock):
    """MobileViT's unfold: 2x2 patches, the transformer attends across patches per pixel."""

    def forward(self, x):
        b, _, h, w = x.shape
        y = self.local(x)
        d = y.shape[1]
        p = y.reshape(b, d, h // 2, 2, w // 2, 2).permute(0, 3, 5, 2, 4, 1).reshape(b * 4, (h // 2) * (w // 2), d)
        p = self.norm(self.encoder(p))
        y = p.reshape(b, 2, 2, h // 2, w // 2, d).permute(0, 5, 3, 1, 4, 2).reshape(b, d, h, w)
        return self.fuse(torch.cat([x, self.project(y)], dim=1))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_conv_transformer_hybrid(tmp_path, dialect, fp16):
    c = check_module(_randomize(HybridBlock()), [torch.randn(1, 16, 8, 8)], tmp_path, dialect=dialect, fp16=fp16)
    assert "Convolution" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mobilevit_unfold_block(tmp_path, dialect):
    """MobileViT's unfold/fold: views and permutes of 5-D and 6-D tensors, rewritten to <= 4-D."""
    check_module(_randomize(MobileViTBlock()), [torch.randn(1, 16, 8, 8)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_torch_transformer_encoder_layer(tmp_path, dialect):
    """nn.TransformerEncoderLayer (batch_first, GELU, post-norm) with a float src_key_padding_mask."""
    mask = torch.tensor([[1.0] * 7 + [0.0] * 2])
    c = check_module(_randomize(TorchEncoderLayer()), [torch.randn(1, 9, 32), mask], tmp_path, dialect=dialect)
    assert _types(c).count("MultiHeadAttention") == 1
