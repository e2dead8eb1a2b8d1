"""Mode wrappers are built inline: ``torch.no_grad()`` / ``@torch.no_grad()`` and
``torch.autocast(...)`` regions export as ``higher_order.wrap_with_set_grad_enabled`` /
``wrap_with_autocast`` with a subgraph (the rotary embedding of Hugging Face's Qwen2/Qwen3/
DeepSeek-V3 attention blocks); their operators join the graph and the model converts."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from engine.build import build_graph
from tests.harness import DIALECTS, check_module


class Rotary(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    @torch.no_grad()
    def forward(self, x):
        pos = torch.arange(x.shape[1]).float()
        with torch.autocast(device_type="cpu", enabled=False):
            freqs = pos[:, None] * self.inv_freq[None, :]
            emb = torch.cat([freqs, freqs], -1)
            return emb.cos(), emb.sin()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.rotary = Rotary()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        cos, sin = self.rotary(x)
        with torch.no_grad():
            y = self.proj(x)
        return y * cos + x * sin


def test_wrappers_are_inlined(export):
    ep, tep = export(Block().eval(), (torch.randn(1, 5, 8),))
    assert any("wrap_with" in str(n.target) for n in tep.graph.nodes), "torch wraps the region"
    g = build_graph(ep)
    g.lint()
    assert not [op for op in g.ops if op.type.startswith("higher_order.")]
    inlined = [op for op in g.ops if "inlined_from" in op.meta]
    assert {op.type for op in inlined} >= {"aten.cos.default", "aten.sin.default", "aten.linear.default"}
    top = {n.name for n in tep.graph.nodes if "wrap_with" in str(n.target)}
    assert top <= {op.meta["inlined_from"] for op in inlined}, "each wrapper's operators are marked with its name"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_wrapped_model_converts_and_matches(tmp_path, dialect):
    check_module(Block().eval(), [torch.randn(1, 5, 8)], tmp_path, dialect=dialect)


class Positions(nn.Module):
    """A ``torch.no_grad()`` region that reads the dynamic length: the wrapper's subgraph takes
    the symbolic size as an input (M2M100's sinusoidal positions)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(40, 8))
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        n = x.shape[1]
        with torch.no_grad():
            pos = self.table.index_select(0, torch.arange(n) + 2).view(1, n, 8)
        return self.proj(x) + pos


@pytest.mark.parametrize("dialect", DIALECTS)
def test_wrapper_taking_a_symbolic_size_is_inlined(tmp_path, dialect):
    length = torch.export.Dim("length", min=2, max=32)
    if dialect == "training":
        ep = torch.export.export(Positions().eval(), (torch.randn(1, 6, 8),), dynamic_shapes=({1: length},))
        wrappers = [n for n in ep.graph.nodes if "wrap_with" in str(n.target)]
        assert wrappers and any(isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.SymInt)
                                for a in wrappers[0].args), "the subgraph takes the length"
    check_module(Positions().eval(), [torch.randn(1, 6, 8)], tmp_path, dialect=dialect,
                 dynamic_shapes=({1: length},), run_inputs=[torch.randn(1, 11, 8)])
