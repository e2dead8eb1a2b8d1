"""Regenerate the bundled sample models (``resources/samples/*.pt2``).

Run from the repository root with torch installed (the test setup pins ``torch==2.13.0``)::

    .venv/bin/python resources/samples/make_samples.py

The samples are small, deterministic demo models exported with ``torch.export.export`` and
saved with ``torch.export.save`` — exactly what a user would hand to pt2ncnn:

* ``tiny_cnn.pt2`` — a MobileNetV3-style image classifier (conv/bn/hardswish stem,
  inverted-residual blocks with depthwise convs and squeeze-excitation, global pooling,
  linear classifier, softmax), input ``x: float32[1, 3, 64, 64]``.
* ``tiny_transformer.pt2`` — one pre-norm transformer encoder block
  (``nn.MultiheadAttention`` + LayerNorm + GELU MLP), input ``x: float32[1, 16, 64]``.

Weights come from a fixed seed and BatchNorm running statistics are set to non-trivial
values, so a converted model's numerics are a meaningful check.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

import torch
from torch import nn

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
SEED = 20240613


class SqueezeExcite(nn.Module):
    """Channel attention: global pool → 1x1 reduce → ReLU → 1x1 expand → hardsigmoid gate."""

    def __init__(self, channels: int, reduced: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, reduced, 1)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(reduced, channels, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        s = self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))
        return x * s


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: nn.Module | None = None):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act)
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2/V3 block: 1x1 expand → depthwise kxk → (SE) → 1x1 project (+ residual)."""

    def __init__(self, cin: int, hidden: int, cout: int, k: int, stride: int, se: bool, act: type):
        super().__init__()
        self.use_res = stride == 1 and cin == cout
        self.expand = conv_bn(cin, hidden, 1, act=act()) if hidden != cin else nn.Identity()
        self.depthwise = conv_bn(hidden, hidden, k, stride, groups=hidden, act=act())
        self.se = SqueezeExcite(hidden, max(8, hidden // 4)) if se else nn.Identity()
        self.project = conv_bn(hidden, cout, 1)

    def forward(self, x):
        y = self.project(self.se(self.depthwise(self.expand(x))))
        return x + y if self.use_res else y


class TinyCNN(nn.Module):
    """A MobileNetV3-small-flavoured classifier sized for a ~400 KB demo file."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2, act=nn.Hardswish())
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 16, 3, 2, True, nn.ReLU),
            InvertedResidual(16, 64, 24, 3, 2, False, nn.ReLU),
            InvertedResidual(24, 72, 24, 3, 1, False, nn.ReLU),
            InvertedResidual(24, 96, 40, 5, 2, True, nn.Hardswish),
            InvertedResidual(40, 96, 48, 3, 1, True, nn.Hardswish),
        )
        self.head = conv_bn(48, 128, 1, act=nn.Hardswish())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(128, 64), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(64, num_classes)
        )

    def forward(self, x):
        x = self.pool(self.head(self.blocks(self.stem(x))))
        x = torch.flatten(x, 1)
        return torch.softmax(self.classifier(x), dim=1)


class TinyTransformerBlock(nn.Module):
    """Pre-norm encoder block: x + MHA(LN(x)); x + MLP(LN(x)) with a GELU MLP."""

    def __init__(self, dim: int = 64, heads: int = 4, mlp: int = 256):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def randomize_norm_stats(model: nn.Module, gen: torch.Generator) -> None:
    """Give every norm layer non-trivial affine parameters and running statistics."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=gen))


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The eval-mode sample model ``name`` and its example inputs (deterministic)."""
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    if name == "tiny_cnn":
        model, example = TinyCNN(), (torch.randn(1, 3, 64, 64, generator=gen),)
    elif name == "tiny_transformer":
        model, example = TinyTransformerBlock(), (torch.randn(1, 16, 64, generator=gen),)
    else:
        raise KeyError(name)
    randomize_norm_stats(model, gen)
    return model.eval(), example


SAMPLES = ("tiny_cnn", "tiny_transformer")


def export_sample(name: str, out_dir: Path = HERE) -> Path:
    model, example = build(name)
    with torch.no_grad():
        ep = torch.export.export(model, example)
    path = out_dir / f"{name}.pt2"
    torch.export.save(ep, str(path))
    log.info("wrote %s (%d bytes, %d nodes)", path, path.stat().st_size, len(ep.graph.nodes))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: this folder)")
    parser.add_argument("names", nargs="*", default=list(SAMPLES), help=f"samples to build {SAMPLES}")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in args.names:
        export_sample(name, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
