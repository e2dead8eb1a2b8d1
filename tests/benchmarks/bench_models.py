"""The models the reader benchmark opens, built by hand (no torchvision) and exported with
``torch.export`` into ``/tmp`` (never committed):

* ``cnn`` — a ResNet-18-style CNN (basic blocks, widths 16-128), ~0.85 M parameters (~3.5 MB).
* ``vit_b16`` — ViT-B/16-sized: 16x16 patch embedding, 12 pre-norm encoder blocks
  (``nn.MultiheadAttention`` d=768, 12 heads, GELU MLP 3072), class token, position
  embedding, 1000-way head: ~86.6 M parameters, ~350 MB.
* ``densenet`` — DenseNet-BC (bottleneck dense layers, growth 12, blocks 6-12-100-94): a
  DenseNet-121-sized model (~10 M parameters) whose graph has ~1,500 operator nodes.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from resources.samples.make_samples import TinyTransformerBlock

BENCH_DIR = Path("/tmp/pt2ncnn-bench")


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.down(x))


class SmallResNet(nn.Module):
    def __init__(self, widths=(16, 32, 64, 128), classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 2, 1, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU())
        layers, c = [], widths[0]
        for i, w in enumerate(widths):
            layers += [BasicBlock(c, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
            c = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class ViT(nn.Module):
    def __init__(self, dim: int = 768, depth: int = 12, heads: int = 12, mlp: int = 3072,
                 patch: int = 16, image: int = 224, classes: int = 1000):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[TinyTransformerBlock(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int = 4):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, feats: list):
        x = self.conv1(torch.relu(self.norm1(torch.cat(feats, 1))))
        return self.conv2(torch.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    def __init__(self, n: int, cin: int, growth: int):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + i * growth, growth) for i in range(n))

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(feats))
        return torch.cat(feats, 1)


class DenseNet(nn.Module):
    def __init__(self, blocks=(6, 12, 100, 94), growth: int = 12, init: int = 64, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, init, 7, 2, 3, bias=False), nn.BatchNorm2d(init),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        stages, c = [], init
        for i, n in enumerate(blocks):
            stages.append(DenseBlock(n, c, growth))
            c += n * growth
            if i != len(blocks) - 1:
                stages.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                            nn.AvgPool2d(2, 2)))
                c //= 2
        self.features = nn.Sequential(*stages)
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = torch.relu(self.norm(self.features(self.stem(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


BUILDERS = {
    "cnn": (SmallResNet, (1, 3, 224, 224)),
    "vit_b16": (ViT, (1, 3, 224, 224)),
    "densenet": (DenseNet, (1, 3, 224, 224)),
}


def build(name: str, out_dir: Path = BENCH_DIR) -> Path:
    """Export benchmark model ``name`` to ``out_dir/<name>.pt2`` (kept if already there)."""
    path = out_dir / f"{name}.pt2"
    if path.exists():
        return path
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    cls, shape = BUILDERS[name]
    model = cls().eval()
    with torch.no_grad():
        ep = torch.export.export(model, (torch.randn(*shape),))
    staging = out_dir / "staging"  # same file name, so the archive root folder is <name>/
    staging.mkdir(exist_ok=True)
    torch.export.save(ep, str(staging / path.name))
    (staging / path.name).rename(path)
    return path
