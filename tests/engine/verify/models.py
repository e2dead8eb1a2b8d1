"""The models the verify tests export: a 20+-layer CNN (residual blocks, max/avg pooling,
squeeze-and-excitation, concat, hardswish, relu6, linear head) and converter plug-ins that
deliberately mis-lower one of its operators."""
from __future__ import annotations

import textwrap
from pathlib import Path

import torch
from torch import nn

#: node names of the exported CNN the tests break on purpose (same in both dialects)
BROKEN_RELU = "relu_3"  #: the relu closing block2's first conv (fused into that Convolution)
SHIFTED_CONV = "conv2d_4"  #: block2's second conv (``convolution_4`` in the core dialect)


class Residual(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, r: int = 4):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(c, c // r), nn.Linear(c // r, c)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s.view(s.shape[0], -1, 1, 1)


class DeepCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.block1, self.block2 = Residual(16), Residual(16)
        self.se = SqueezeExcite(16)
        self.branch = nn.Conv2d(16, 8, 1)
        self.down, self.bn_down = nn.Conv2d(24, 24, 3, stride=2, padding=1), nn.BatchNorm2d(24)
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.stem(x)))
        x = self.block1(x)
        x = nn.functional.max_pool2d(x, 2)
        x = self.block2(x)
        x = self.se(x)
        x = torch.cat([x, nn.functional.hardswish(self.branch(x))], 1)
        x = nn.functional.relu6(self.bn_down(self.down(x)))
        x = nn.functional.avg_pool2d(x, 2)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


def deep_cnn() -> nn.Module:
    """The CNN with seeded weights and non-trivial batch-norm statistics, in eval mode."""
    torch.manual_seed(0)
    m = DeepCNN()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.5, 0.5)
    return m.eval()


def export(module: nn.Module, inputs, path: Path, dialect: str = "training") -> Path:
    ep = torch.export.export(module.eval(), tuple(inputs))
    if dialect == "core":
        ep = ep.run_decompositions()
    torch.export.save(ep, str(path))
    return path


def write_plugin(path: Path, source: str) -> Path:
    path.write_text(textwrap.dedent(source))
    return path


def relu_as_sigmoid(node: str) -> str:
    """A plug-in lowering ONE relu (by ATen node name) to sigmoid; every other relu stays built-in."""
    return f'''
    from engine.convert import aten_converter

    def _only_that_relu(op, ctx):
        return True if op.name == "{node}" else "unsupported: not the relu this plug-in breaks"

    @aten_converter("aten.relu.default", validator=_only_that_relu)
    def relu_as_sigmoid(ctx, op):
        return ctx.emit("F.sigmoid", [op.inputs[0]])
'''


RELU_AS_SIGMOID = relu_as_sigmoid(BROKEN_RELU)

#: A plug-in that shifts the padding of ONE conv (by ATen node name): 2 before, 0 after, so the
#: output keeps its size but is displaced by a pixel.
SHIFTED_PADDING = f'''
    from engine.convert import NCNN, ncnn_rule
    from engine.ncnn.layers import make_params

    TARGETS = ("{SHIFTED_CONV}", "{SHIFTED_CONV.replace('conv2d', 'convolution')}")

    def _only_that_conv(op, ctx):
        return True if set(TARGETS) & set(op.provenance.nodes) else "unsupported: not the conv this plug-in breaks"

    @ncnn_rule("nn.Conv2d", validator=_only_that_conv)
    def shifted_conv(ctx, op):
        builtin = next(c for c in NCNN.candidates("nn.Conv2d")
                       if c.origin.startswith("builtin:") and c.check(op, ctx) is None)
        out = builtin.fn(ctx, op)
        layer = out.producer
        layer.params.update(make_params(layer.type, pad_left=2, pad_right=0, pad_top=2, pad_bottom=0))
        return out
'''


# --------------------------------------------------------------------------- layouts
class QKVAttention(nn.Module):
    """Swin-style attention: one linear makes q, k, v, split by ``qkv[0], qkv[1], qkv[2]`` (one
    ncnn Slice with three outputs), an additive bias keeps it from fusing into one layer."""

    def __init__(self, c: int = 32, heads: int = 4, n: int = 10):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.bias = nn.Parameter(torch.randn(heads, n, n))

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = torch.tanh(q) @ k.transpose(-2, -1) + self.bias
        return self.proj((a.softmax(-1) @ (v * 2)).transpose(1, 2).reshape(b, n, c))


class ChannelsLastMLP(nn.Module):
    """A ConvNeXt block: depthwise conv, permute to channels-last, LayerNorm, Linear, GELU,
    Linear, permute back, layer scale (after the permute like torchvision, or ``inside`` it
    like timm), residual. The converter runs the MLP channels-first."""

    def __init__(self, c: int = 16, inside: bool = False):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.inside = inside
        self.gamma = nn.Parameter(torch.rand(c) + 0.5 if inside else torch.rand(c, 1, 1) + 0.5)

    def forward(self, x):
        y = self.fc2(nn.functional.gelu(self.fc1(self.ln(self.dw(x).permute(0, 2, 3, 1)))))
        y = (y * self.gamma).permute(0, 3, 1, 2) if self.inside else self.gamma * y.permute(0, 3, 1, 2)
        return x + y


class BatchInside(nn.Module):
    """Moves the batch axis of a (B, T, C) input to dim 1 (``transpose``) or dim 2
    (``permute``) before working on it."""

    def __init__(self, where: int):
        super().__init__()
        self.where = where
        self.fc = nn.Linear(8, 6)

    def forward(self, x):
        if self.where == 1:
            return torch.relu(self.fc(x.transpose(0, 1))).sum(0) * 2  # (T, B, 6) → (B, 6)
        return torch.sigmoid(x.permute(1, 2, 0)).mean(0)  # (T, C, B) → (C, B)


class TwoViews(nn.Module):
    """RAFT's feature encoder: two images concatenated into one batch of two, a deep encoder
    (``depth`` blocks of 1×1 conv and tanh, two ncnn layers each, and one ReLU before the last
    two blocks, ATen node ``relu``) on that batch, split back and correlated. In ncnn the encoder's blobs are
    batches of two samples."""

    def __init__(self, depth: int = 40):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        blocks = [nn.Sequential(nn.Conv2d(8, 8, 1), nn.Tanh()) for _ in range(depth)]
        self.body = nn.Sequential(*blocks[:-2], nn.ReLU(), *blocks[-2:])

    def forward(self, a, b):
        fa, fb = self.body(self.stem(torch.cat([a, b], 0))).chunk(2, 0)
        return (fa * fb).sum(1, keepdim=True)


class Overwritten(nn.Module):
    """MViTv2's attention: the scores written over whole by themselves plus a bias added in a
    5-D view (``attn[:, 0:, 0:] = ...``, exported as ``attn.copy_(view)``), then a softmax and a
    deep stack (``depth`` blocks of linear and tanh, two ncnn layers each, one ReLU, ATen node
    ``relu``, before the last two blocks) — more than 64 layers after the copy."""

    def __init__(self, depth: int = 40):
        super().__init__()
        self.q = nn.Linear(8, 8)
        blocks = [nn.Sequential(nn.Linear(16, 16), nn.Tanh()) for _ in range(depth)]
        self.body = nn.Sequential(*blocks[:-2], nn.ReLU(), *blocks[-2:])

    def forward(self, x):
        q = self.q(x)
        attn = q @ q.transpose(-1, -2)
        attn[:, 0:, 0:] = (attn.view(1, 4, 4, 4, 4) + 0.5).view(1, 16, 16)
        return self.body(attn.softmax(-1))


class TokenEncoder(nn.Module):
    """A text encoder in small: token ids (an int64 input, fed to ncnn as int32) through an
    embedding, then linear / GELU blocks (ATen node ``gelu`` the second's)."""

    def __init__(self, vocab: int = 50, width: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.body = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                                  nn.Linear(width, width))

    def forward(self, ids):
        return self.body(self.embed(ids))


class PositionsFromPadding(nn.Module):
    """RoBERTa's embeddings in small: position ids counted over the non-padding tokens
    (``cumsum(mask).type_as(mask) * mask + pad``), token types gathered by position from a zero
    buffer (the conversion makes them a constant), the three embeddings summed, then linear / GELU
    blocks."""

    def __init__(self, vocab: int = 50, width: int = 16, pad: int = 1):
        super().__init__()
        self.pad = pad
        self.words, self.positions, self.types = nn.Embedding(vocab, width), nn.Embedding(64, width), \
            nn.Embedding(2, width)
        self.register_buffer("type_ids", torch.zeros(1, 64, dtype=torch.long))
        self.body = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                                  nn.Linear(width, width))

    def forward(self, ids):
        mask = ids.ne(self.pad).int()
        pos = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + self.pad
        types = torch.gather(self.type_ids.expand(ids.shape[0], -1), 1, pos)
        return self.body(self.words(ids) + self.positions(pos) + self.types(types))


class Router(nn.Module):
    """A mixture-of-experts router in small: softmax scores, ``topk(2)`` (written out by a pass:
    values and indices each a ``cat`` named after neither), renormalised weights, the experts'
    outputs gathered by index, then linear / tanh blocks."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.gate, self.experts = nn.Linear(width, width), nn.Linear(width, width)
        self.body = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh())

    def forward(self, x):
        w, i = torch.softmax(self.gate(x), -1).topk(2, -1)
        picked = torch.gather(self.experts(x), -1, i)
        return self.body(picked * (w / w.sum(-1, keepdim=True)))


class ModeRegions(nn.Module):
    """A ``torch.no_grad()`` region holding a relu, then a ``torch.autocast(enabled=False)``
    region (M2M100's and Speech2Text's sinusoidal positions, Qwen's rotary embedding): torch
    exports each as a higher-order wrapper holding a subgraph."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.a, self.b = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        with torch.no_grad():
            h = torch.relu(self.a(x))
        with torch.autocast("cpu", enabled=False):
            g = torch.sigmoid(h) * 2
        return self.b(g) + x


class Clamped(nn.Module):
    """conv → relu → clamp below -100: whatever the relu computes, the output is -100."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.clamp(torch.relu(self.conv(x)) + 1.0, max=-100.0)


class DeepTanh(nn.Module):
    """40 orthogonal 64×64 linear layers with tanh: each fp16-rounded weight moves a layer's
    output by ~3e-4, and over 40 layers the output drifts by ~2e-2 (beyond fp16's 1e-2)."""

    def __init__(self, n: int = 40, width: int = 64):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(n))
        for layer in self.layers:
            nn.init.orthogonal_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x)) * 1.5
        return x



class ChannelsAsBatch(nn.Module):
    """PatchTST's channel independence: a (1, T, C) series scaled per channel over time, cut
    into patches per channel, each channel run through the same attention as a sample of its
    own (``(B·C, heads, patches, head dim)``). The converter makes the channels the batch axis
    of the input and gathers them into one blob at once: one channel alone is not the model's
    input."""

    def __init__(self, patch: int = 4, d: int = 8, heads: int = 2, out: int = 5):
        super().__init__()
        self.patch, self.heads = patch, heads
        self.embed, self.qkv = nn.Linear(patch, d), nn.Linear(d, 3 * d)
        self.head = nn.Linear(d * 16 // patch, out)
        #: PatchTST's observed-values mask, a weight per time step and channel here
        self.register_buffer("observed", torch.rand(1, 16, 3) + 0.5)

    def forward(self, x):
        b, t, c = x.shape
        x = x * self.observed
        mean = x.mean(1, keepdim=True)
        scale = ((x - mean) ** 2).mean(1, keepdim=True).add(1e-5).sqrt()
        z = ((x - mean) / scale).transpose(1, 2).unfold(-1, self.patch, self.patch)  # (B, C, P, patch)
        h = torch.relu(self.embed(z)).reshape(b * c, t // self.patch, -1)  # (B·C, P, d); ATen node relu
        q, k, v = (u.reshape(b * c, t // self.patch, self.heads, -1).transpose(1, 2)
                   for u in self.qkv(h).chunk(3, -1))
        a = nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b * c, t // self.patch, -1)
        y = self.head((h + a).reshape(b, c, -1))  # (B, C, out)
        return y.transpose(1, 2) * scale + mean, mean


class RelPosEinsum(nn.Module):
    """ViTDet's decomposed relative positions: ``einsum("bhwc,hkc->bhwk", q, Rh)`` over a
    (batch·heads, h, w, c) view, added to the scores in a 5-D view. The einsum is lowered with a
    permute that only moves the batch axis, a no-op Reshape that a pass drops: the blob left holds
    the einsum's value with its batch on another axis."""

    def __init__(self, hw: int = 4, c: int = 8):
        super().__init__()
        self.hw = hw
        self.qkv = nn.Linear(c, 3 * c)
        self.rel_h = nn.Parameter(torch.randn(hw, hw, c) * 0.5)

    def forward(self, x):  # (B·heads, hw·hw, c)
        n, _, c = x.shape
        q, k, v = self.qkv(x).chunk(3, -1)
        attn = q @ k.transpose(-2, -1)
        rel = torch.einsum("bhwc,hkc->bhwk", q.reshape(n, self.hw, self.hw, c), self.rel_h)
        attn = (attn.view(n, self.hw, self.hw, self.hw, self.hw) + rel[:, :, :, :, None]).view(n, self.hw ** 2, -1)
        return torch.relu(attn.softmax(-1) @ v)  # ATen node relu
