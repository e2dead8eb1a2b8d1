"""move_reshape_past_elementwise: an elementwise layer between two Reshapes runs first and the
Reshapes merge (a transformer MLP on a 4-D activation: Gemm → GELU → Gemm with no Reshape
between), numerically checked end to end."""
import pytest
import torch
from torch import nn

import engine.convert  # noqa: F401
from engine.ir import Graph
from engine.passes import move_reshape_past_elementwise
from tests.harness import DIALECTS, check_module



def _graph(layer: str, extra: str = "") -> Graph:
    lines = ["Input x 0 1 x #x=(6,10)f32", "Reshape r 1 1 x r 0=60 #r=(60)f32", f"{layer} u 1 1 r u #u=(60)f32",
             "Reshape v 1 1 u v 0=5 1=12 #v=(12,5)f32", "Output out 1 0 v"] + ([extra] if extra else [])
    g = Graph.from_text("7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n")
    for o in g.operands.values():
        o.meta["batch"] = False
    return g


def test_swaps_on_a_hand_written_graph():
    g = _graph("GELU")
    move_reshape_past_elementwise.run(g, None)
    g.lint()
    assert [op.type for op in g.ops] == ["Input", "GELU", "Reshape", "Reshape", "Output"]
    assert g.operands["u"].shape == [6, 10] and g.find_op("u").inputs[0].name == "x"


def test_output_and_shared_values_stay():
    g = _graph("ReLU", "Output out2 1 0 u")
    before = g.to_text()
    move_reshape_past_elementwise.run(g, None)
    assert g.to_text() == before


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return x + self.fc2(torch.sigmoid(nn.functional.gelu(self.fc1(self.norm(x)))) * 2.0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mlp_on_a_4d_activation(tmp_path, dialect):
    c = check_module(MLP().eval(), [torch.randn(1, 5, 6, 8)], tmp_path, dialect=dialect)
    types = [op.type for op in c.result.ncnn.ops]
    assert types.count("Reshape") <= 2, types
