"""fuse_unrolled_rnn on real core-ATen exports (numerics: tests/engine/converters/
test_recurrent.py runs every recurrent configuration in both dialects)."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from engine.convert import ConvertOptions, convert  # noqa: E402
from engine.passes import fuse_unrolled_rnn  # noqa: E402
from tests.harness import export_pt2  # noqa: E402


class Returning(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)


def _core_graph(tmp_path, rnn, x):
    pt2 = export_pt2(Returning(rnn), [x], tmp_path / "m.pt2", dialect="core")
    return convert(str(pt2), ConvertOptions(snapshots=False)).aten.copy()


def _fused(g):
    fuse_unrolled_rnn.run(g, None)
    g.lint()
    return [op for op in g.ops if op.meta.get("fused_from") == "unrolled"]


def test_lstm_becomes_one_op(tmp_path):
    g = _core_graph(tmp_path, nn.LSTM(4, 5, num_layers=2), torch.randn(3, 1, 4))
    outputs = [op.inputs[0].name for op in g.ops if op.type == "pnnx.Output"]
    nodes = {op.name for op in g.ops if op.type.startswith("aten.")}
    (op,) = _fused(g)
    assert op.type == op.meta["target"] == "aten.lstm.input"
    assert op.params == {"has_biases": True, "num_layers": 2, "dropout": 0.0, "train": False,
                         "bidirectional": False, "batch_first": False}
    assert op.input_names[:3] == ["input", "hx.0", "hx.1"] and op.inputs[0].name == "x"
    assert [i.name for i in op.inputs[3:]] == [f"p_rnn_{n}_l{k}" for k in range(2)
                                               for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert [o.name for o in op.outputs] == outputs  # the module's values keep their names
    assert nodes - {o.name for o in g.ops} <= set(op.provenance.nodes)
    assert not [o for o in g.ops if o.type in ("aten.sigmoid.default", "aten.addmm.default")]


def test_bidirectional_batch_first_gru(tmp_path):
    g = _core_graph(tmp_path, nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True), torch.randn(1, 3, 4))
    (op,) = _fused(g)
    assert op.type == "aten.gru.input" and op.input_names[:2] == ["input", "hx"]
    assert op.params["bidirectional"] and op.params["batch_first"] and op.params["num_layers"] == 2
    assert op.inputs[0].name == "x" and op.outputs[0].shape == [1, 3, 10]  # the transposes are absorbed


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_without_bias(tmp_path, nonlinearity):
    g = _core_graph(tmp_path, nn.RNN(4, 5, nonlinearity=nonlinearity, bias=False), torch.randn(3, 1, 4))
    (op,) = _fused(g)
    assert op.type == f"aten.rnn_{nonlinearity}.input" and not op.params["has_biases"]
    assert len(op.inputs) == 1 + 1 + 2


def test_value_used_outside_blocks_the_fusion(tmp_path):
    g = _core_graph(tmp_path, nn.LSTM(4, 5), torch.randn(3, 1, 4))
    gate = next(op for op in g.ops if op.type == "aten.sigmoid.default")
    g.add_op("pnnx.Output", "extra_output", [gate.outputs[0]])
    before = [op.type for op in g.ops]
    assert _fused(g) == [] and [op.type for op in g.ops] == before


class CellCall(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, x, h):
        return self.cell(x, (h, h) if isinstance(self.cell, nn.LSTMCell) else h)


@pytest.mark.parametrize("cls,target", [(nn.LSTMCell, "aten.lstm_cell.default"), (nn.GRUCell, "aten.gru_cell.default"),
                                        (nn.RNNCell, "aten.rnn_tanh_cell.default")])
def test_cells_become_one_op(tmp_path, cls, target):
    pt2 = export_pt2(CellCall(cls(4, 4)), [torch.randn(1, 4), torch.randn(1, 4)], tmp_path / "c.pt2", dialect="core")
    g = convert(str(pt2), ConvertOptions(snapshots=False)).aten.copy()
    (op,) = _fused(g)
    assert op.type == target and op.inputs[0].name == "x" and op.inputs[1].name == "h"  # input told from state
    assert [i.name for i in op.inputs[-4:]] == ["p_cell_weight_ih", "p_cell_weight_hh", "p_cell_bias_ih",
                                                "p_cell_bias_hh"]
    assert [o.type for o in g.ops if o.type.startswith("aten.")] == [target]
