"""Models the GUI tests export with torch at test time (``torch.export.export`` + ``save``).

* :class:`SmallConvNet` — a small CNN, exported with a dynamic batch dimension;
* :class:`WithUnsupportedOp` — a conv net that calls ``torch.linalg.det``, which no converter
  handles, so the conversion reports it;
* :class:`DenseNet121` — torchvision's DenseNet-121 architecture written out in plain torch
  (≈1,160 graph nodes): the big graph for the layout-time and responsiveness tests;
* :class:`RotaryStack` — stacked decoder-like layers that all read two buffers of the top
  module (an LLM's rotary tables): edges from one source into every layer.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def export(module: nn.Module, args: tuple, path: Path, dynamic_shapes=None) -> Path:
    with torch.no_grad():
        ep = torch.export.export(module.eval(), args, dynamic_shapes=dynamic_shapes)
    torch.export.save(ep, str(path))
    return path


class SmallConvNet(nn.Module):
    """conv → relu → global pool → linear; exported with a dynamic batch."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1), 1))


def with_nan_weight(model: nn.Module) -> nn.Module:
    """``model`` with one NaN in its first parameter (a broken checkpoint)."""
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("nan")
    return model


class WithUnsupportedOp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        det = torch.linalg.det(y[:, :, :2, :2])
        return torch.relu(y) + det.sum()


class _DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int = 32, bn_size: int = 4) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: list):
        x = torch.cat(features, 1)
        return self.conv2(self.relu2(self.norm2(self.conv1(self.relu1(self.norm1(x))))))


class _DenseBlock(nn.ModuleDict):
    def __init__(self, n: int, cin: int, growth: int = 32) -> None:
        super().__init__()
        for i in range(n):
            self[f"denselayer{i + 1}"] = _DenseLayer(cin + i * growth, growth)

    def forward(self, x):
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.Conv2d(cin, cout, 1, bias=False),
                         nn.AvgPool2d(2, 2))


class DenseNet121(nn.Module):
    def __init__(self, blocks=(6, 12, 24, 16), growth: int = 32, init: int = 64, classes: int = 1000) -> None:
        super().__init__()
        torch.manual_seed(0)
        layers: list[nn.Module] = [nn.Conv2d(3, init, 7, 2, 3, bias=False), nn.BatchNorm2d(init),
                                   nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
        c = init
        for i, n in enumerate(blocks):
            layers.append(_DenseBlock(n, c, growth))
            c += n * growth
            if i < len(blocks) - 1:
                layers.append(_Transition(c, c // 2))
                c //= 2
        layers.append(nn.BatchNorm2d(c))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c, classes)

    def forward(self, x):
        x = torch.relu(self.features(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.classifier(x)


class _RotaryLayer(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, x, cos, sin):
        q = self.q(x)
        q = q * cos + torch.flip(q, [-1]) * sin
        return x + self.mlp(torch.relu(q))


class RotaryStack(nn.Module):
    """``layers`` layers each reading the top module's ``cos`` and ``sin`` buffers."""

    def __init__(self, layers: int = 12, dim: int = 16) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.register_buffer("cos", torch.cos(torch.arange(dim, dtype=torch.float32)))
        self.register_buffer("sin", torch.sin(torch.arange(dim, dtype=torch.float32)))
        self.layers = nn.ModuleList(_RotaryLayer(dim) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return x
