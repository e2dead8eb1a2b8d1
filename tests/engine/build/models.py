"""Models shared by the builder tests and ``tests/benchmarks/bench_build.py``."""
from torch import nn


class Deep(nn.Module):
    """``blocks`` residual conv/BatchNorm/ReLU blocks: about five graph nodes per block (300
    blocks give the 1,500-node program the builder test and benchmark use)."""

    def __init__(self, blocks: int):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
                                    for _ in range(blocks))

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x) * 0.5
        return x
