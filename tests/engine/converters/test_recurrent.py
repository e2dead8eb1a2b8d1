"""LSTM / GRU / RNN end to end (both dialects; core ATen's unrolled cells are fused back by the
fuse_unrolled_rnn pass): uni/bidirectional, 1-2 layers, batch_first or sequence-first, LSTM
proj_size, bias=False, initial states as inputs or zeros, returning the sequence and/or the
final states; fp16 weights; a dynamic sequence length; refusals.

Sequence-first tensors ``(T, 1, F)`` and states ``(L*D, 1, H)`` have their batch axis at dim 1:
ncnn holds them as unbatched blobs (same values, same order), so these tests compare values in
order (:func:`tests.engine.converters.sequence_check.check_sequence`) rather than through the
harness's drop-dim-0 rule.
"""
import numpy as np
import pytest
import torch
from torch import nn

from engine.convert import ConvertOptions, convert
from engine.diagnostics import format_table
from tests.engine.converters.sequence_check import check_sequence
from tests.harness import DIALECTS, export_pt2

T, FEATURES, HIDDEN = 5, 4, 6
KINDS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn_tanh": nn.RNN, "rnn_relu": nn.RNN}
NCNN_TYPE = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN", "rnn_relu": "ReLU"}


class Recurrent(nn.Module):
    """``rnn(x[, states])``; returns ``"all"`` (output and states), ``"output"`` or ``"states"``."""

    def __init__(self, rnn, returns="all"):
        super().__init__()
        self.rnn, self.returns = rnn, returns

    def forward(self, x, *states):
        if states:
            out, hn = self.rnn(x, tuple(states) if isinstance(self.rnn, nn.LSTM) else states[0])
        else:
            out, hn = self.rnn(x)
        return {"all": (out, hn), "output": out, "states": hn}[self.returns]


def make(kind, **kw):
    torch.manual_seed(0)
    if kind.startswith("rnn"):
        kw["nonlinearity"] = kind[4:]
    return KINDS[kind](FEATURES, HIDDEN, **kw)


def sequence(batch_first, steps=T):
    return torch.randn(1, steps, FEATURES) if batch_first else torch.randn(steps, 1, FEATURES)


def layer_types(result):
    return [op.type for op in result.ncnn.ops]


# ---------------------------------------------------------------------------- configurations
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (1, True), (2, False), (2, True)],
                         ids=["1x1", "1x2", "2x1", "2x2"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seqfirst", "batchfirst"])
def test_recurrent(tmp_path, dialect, kind, layers, bidirectional, batch_first):
    rnn = make(kind, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    r = check_sequence(Recurrent(rnn), [sequence(batch_first)], tmp_path, dialect=dialect)
    types = layer_types(r)
    if kind == "rnn_relu":  # ncnn's RNN is tanh only: unrolled, one ReLU per step
        assert types.count("ReLU") == layers * (2 if bidirectional else 1) * T and "RNN" not in types
    else:
        assert types.count(NCNN_TYPE[kind]) == layers
    assert r.pnnx.ops_of_type(f"nn.{KINDS[kind].__name__}"), "both dialects reach the same pnnx op"


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)], ids=["1x1", "2x2"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seqfirst", "batchfirst"])
def test_lstm_projection(tmp_path, dialect, layers, bidirectional, batch_first):
    rnn = make("lstm", num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, proj_size=3)
    r = check_sequence(Recurrent(rnn), [sequence(batch_first)], tmp_path, dialect=dialect)
    lstm = r.ncnn.ops_of_type("LSTM")
    assert len(lstm) == layers and "weight_hr_data" in lstm[0].attrs


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_without_bias(tmp_path, dialect, kind):
    rnn = make(kind, num_layers=2, bidirectional=True, bias=False)
    check_sequence(Recurrent(rnn), [sequence(False)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)], ids=["1x1", "2x2"])
def test_initial_states_as_inputs(tmp_path, dialect, kind, layers, bidirectional):
    rnn = make(kind, num_layers=layers, bidirectional=bidirectional, batch_first=True)
    rows = layers * (2 if bidirectional else 1)
    states = [torch.randn(rows, 1, HIDDEN) for _ in range(2 if kind == "lstm" else 1)]
    x = sequence(True)
    r = check_sequence(Recurrent(rnn), [x, *states], tmp_path, dialect=dialect)
    assert len(r.ncnn.ops_of_type("Input")) == 1 + len(states)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_lstm_projection_with_states(tmp_path, dialect):
    rnn = make("lstm", num_layers=2, bidirectional=True, proj_size=3)
    states = [torch.randn(4, 1, 3), torch.randn(4, 1, HIDDEN)]
    check_sequence(Recurrent(rnn), [sequence(False), *states], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("returns", ["output", "states"])
def test_returned_values(tmp_path, dialect, kind, returns):
    rnn = make(kind, num_layers=2, bidirectional=True)
    r = check_sequence(Recurrent(rnn, returns), [sequence(False)], tmp_path, dialect=dialect)
    tops = {len(op.outputs) for op in r.ncnn.ops_of_type(NCNN_TYPE[kind])}
    assert tops == ({1} if returns == "output" else {3 if kind == "lstm" else 2})  # unused states not computed


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sequence_first_input_fed_2d(tmp_path, dialect):
    """A user may feed the (T, F) sequence ncnn's layers read instead of (T, 1, F)."""
    x = sequence(False)
    check_sequence(Recurrent(make("gru"), "output"), [x], tmp_path, dialect=dialect, feed=[x.numpy()[:, 0]])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_fp16_weights(tmp_path, dialect, kind):
    rnn = make(kind, num_layers=2, bidirectional=True, batch_first=True)
    check_sequence(Recurrent(rnn), [sequence(True)], tmp_path, dialect=dialect, fp16=True)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seqfirst", "batchfirst"])
def test_runs_at_other_lengths(tmp_path, dialect, kind, batch_first):
    """torch.export specializes the sequence length of nn.LSTM/GRU/RNN (its fake-tensor run
    loops over time), but the converted ncnn layers and reshapes leave it free: a model
    exported at T=6 runs at T=11 and matches PyTorch there."""
    model = Recurrent(make(kind, num_layers=2, bidirectional=True, batch_first=batch_first))
    check_sequence(model, [sequence(batch_first, 6)], tmp_path, dialect=dialect, run_inputs=[sequence(batch_first, 11)])


def test_dynamic_length_is_specialized_by_export():
    """Why the test above exports at a fixed length (revisit when torch keeps T symbolic)."""
    model = Recurrent(make("gru", batch_first=True), "output").eval()
    with pytest.raises(Exception, match="specialized"):
        torch.export.export(model, (sequence(True, 6),), dynamic_shapes=({1: torch.export.Dim("steps", min=2)},))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_two_modules_stay_two(tmp_path, dialect):
    """Two stacked single-layer LSTMs (separate zero states) are not merged into one 2-layer op."""

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = make("lstm", batch_first=True), nn.LSTM(HIDDEN, 3, batch_first=True)

        def forward(self, x):
            y, _ = self.a(x)
            return self.b(y)[0]

    r = check_sequence(Two(), [sequence(True)], tmp_path, dialect=dialect)
    assert [op.params["num_layers"] for op in r.pnnx.ops_of_type("nn.LSTM")] == [1, 1]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_final_states_start_the_next_module(tmp_path, dialect, kind):
    """pnnx's ``test_nn_GRU``: a module's ``h_n`` is the next (multi-layer, bidirectional) module's
    initial state. Core ATen unrolls both; each is fused back, the second reading the first's op."""

    class Chained(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = make(kind, num_layers=3, bidirectional=True)
            self.b = KINDS[kind](2 * HIDDEN, HIDDEN, num_layers=3, bidirectional=True)

        def forward(self, x):
            y, states = self.a(x)
            return self.b(y, states)[0]

    r = check_sequence(Chained(), [sequence(False)], tmp_path, dialect=dialect)
    assert len(r.ncnn.ops_of_type(NCNN_TYPE[kind])) == 6


@pytest.mark.parametrize("dialect", DIALECTS)
def test_core_unrolled_cells_are_fused(tmp_path, dialect):
    r = check_sequence(Recurrent(make("lstm", num_layers=2, bidirectional=True)), [sequence(False)], tmp_path,
                  dialect=dialect)
    unrolled = len(r.aten.ops_of_type("aten.sigmoid.default"))
    assert unrolled == (0 if dialect == "training" else 2 * 2 * 3 * T)  # 3 sigmoid gates per step
    assert len(r.pnnx.ops_of_type("nn.LSTM")) == 1
    assert not r.ncnn.ops_of_type("Sigmoid", "TanH", "Gemm", "InnerProduct")


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("batch_first", [False, True], ids=["seqfirst", "batchfirst"])
def test_batch_of_two_runs_as_an_ncnn_batch(tmp_path, dialect, batch_first):
    """A batch of 2 sequences (and states) is ncnn's batch axis: each layer runs one sequence."""
    rnn = make("lstm", num_layers=2, bidirectional=True, batch_first=batch_first)
    x = torch.randn(2, T, FEATURES) if batch_first else torch.randn(T, 2, FEATURES)
    states = [torch.randn(4, 2, HIDDEN), torch.randn(4, 2, HIDDEN)]
    r = check_sequence(Recurrent(rnn, "all"), [x, *states], tmp_path, dialect=dialect)
    b = 0 if batch_first else 1
    assert [d["batch_dim"] for d in r.ncnn.meta["inputs"]] == [b, 1, 1]


def test_gate_order_and_bias_layout(tmp_path):
    """ncnn's LSTM gates are IFOG (torch: IFGO); GRU's bias has 4 rows (b_in, b_hn apart)."""
    lstm, gru = make("lstm"), make("gru")
    r = check_sequence(Recurrent(lstm, "output"), [sequence(False)], tmp_path, dialect="training")
    w = np.asarray(r.ncnn.ops_of_type("LSTM")[0].attrs["weight_xc_data"].data).reshape(4, HIDDEN, FEATURES)
    i, f, g, o = lstm.weight_ih_l0.detach().numpy().reshape(4, HIDDEN, FEATURES)
    assert np.array_equal(w, np.stack([i, f, o, g]))
    r = check_sequence(Recurrent(gru, "output"), [sequence(False)], tmp_path, dialect="training")
    b = np.asarray(r.ncnn.ops_of_type("GRU")[0].attrs["bias_c_data"].data).reshape(4, HIDDEN)
    b_ih, b_hh = (t.detach().numpy().reshape(3, HIDDEN) for t in (gru.bias_ih_l0, gru.bias_hh_l0))
    assert np.allclose(b, [b_ih[0] + b_hh[0], b_ih[1] + b_hh[1], b_ih[2], b_hh[2]])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_transposed_input(tmp_path, dialect, kind):
    """A non-contiguous (transposed) input: core ATen projects it with bmm on expanded operands."""

    class Transposed(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = make(kind, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x):
            return self.rnn(x.transpose(1, 2))[0]

    r = check_sequence(Transposed(), [torch.randn(1, FEATURES, T)], tmp_path, dialect=dialect)
    assert len(r.ncnn.ops_of_type(NCNN_TYPE[kind])) == 2


# ---------------------------------------------------------------------------- cells
CELLS = {"lstm": nn.LSTMCell, "gru": nn.GRUCell, "rnn_tanh": nn.RNNCell, "rnn_relu": nn.RNNCell}


class CellLoop(nn.Module):
    """A decoder-style loop: the cell applied to each of ``x``'s steps (unrolled by export);
    returns every hidden state (concatenated) and the last state(s)."""

    def __init__(self, kind, bias=True, with_state=True):
        super().__init__()
        torch.manual_seed(0)
        kw = {"nonlinearity": kind[4:]} if kind.startswith("rnn") else {}
        self.cell, self.lstm, self.with_state = CELLS[kind](FEATURES, HIDDEN, bias=bias, **kw), kind == "lstm", with_state

    def forward(self, x, *state):
        state = (state if self.lstm else state[0]) if self.with_state else None
        hs = []
        for t in range(x.shape[1]):
            state = self.cell(x[:, t], state)
            hs.append(state[0] if self.lstm else state)
        return torch.cat(hs, 1), state


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", list(CELLS))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_state", [True, False], ids=["states", "zeros"])
def test_cells(tmp_path, dialect, kind, bias, with_state):
    states = [torch.randn(1, HIDDEN) for _ in range(2 if kind == "lstm" else 1)] if with_state else []
    x = torch.randn(1, 3, FEATURES)
    r = check_sequence(CellLoop(kind, bias, with_state), [x, *states], tmp_path, dialect=dialect,
                       feed=[x.numpy()[0], *(s.numpy()[0] for s in states)])
    assert len(r.pnnx.ops_of_type(f"nn.{CELLS[kind].__name__}")) == 3  # one per step
    if kind != "rnn_relu":
        assert len(r.ncnn.ops_of_type(NCNN_TYPE[kind])) == 3
