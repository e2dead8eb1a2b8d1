"""Small torch modules the converter tests share."""
import torch.nn as nn


class Fn(nn.Module):
    """A function of the inputs as a module: ``Fn(lambda x, y: x * y)``."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)
