"""Whole sequence models end to end (both dialects, fp32 and fp16 weights): an LSTM tagger, a
bidirectional 2-layer GRU classifier, an RNN classifier and a 1-D conv + LSTM model.

The recurrent layers meet the other families here: an Embedding (token ids fed to ncnn as
int32), Linear heads on sequences, selects and slices of the sequence / final states, cat,
log_softmax, Conv1d/BatchNorm/pooling and a transpose into the LSTM. Sequence-first inputs
``(T, 1, F)`` carry their batch at dim 1 (ncnn gets the ``(T, F)`` sequence).
"""
import pytest
import torch
from torch import nn

from tests.engine.converters.sequence_check import check_sequence, int32_ids
from tests.harness import DIALECTS, check_module

T, FEATURES = 7, 8


class Tagger(nn.Module):
    """A bidirectional LSTM tagger over word vectors (or token ids with an embedding): one
    tag distribution per token, batch_first."""

    def __init__(self, vocab=0, dim=FEATURES, hidden=12, tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim) if vocab else None
        self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, x):
        if self.embed is not None:
            x = self.embed(x)
        out, _ = self.lstm(x)
        return torch.log_softmax(self.head(out), dim=-1)


class GRUClassifier(nn.Module):
    """2-layer bidirectional GRU over a sequence-first input; the last layer's two final states
    (or the last output step) feed the classifier."""

    def __init__(self, from_states=True, hidden=10, classes=4):
        super().__init__()
        self.from_states = from_states
        self.gru = nn.GRU(FEATURES, hidden, num_layers=2, bidirectional=True)
        self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        out, h = self.gru(x)
        feat = torch.cat([h[-2], h[-1]], dim=1) if self.from_states else out[-1]
        return self.head(feat)


class RNNClassifier(nn.Module):
    """tanh RNN, batch_first; the last time step classifies."""

    def __init__(self, hidden=10, classes=3):
        super().__init__()
        self.rnn = nn.RNN(FEATURES, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class ConvLSTM(nn.Module):
    """Conv1d + ReLU + max pooling over (1, C, L), then an LSTM over the pooled steps, mean over
    time and a linear head."""

    def __init__(self, channels=6, conv=12, hidden=9, classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv1d(channels, conv, 3, padding=1), nn.BatchNorm1d(conv), nn.ReLU(),
                                      nn.MaxPool1d(2))
        self.lstm = nn.LSTM(conv, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        y = self.features(x).transpose(1, 2)
        out, _ = self.lstm(y)
        return self.head(out.mean(dim=1))


def _init(model):
    torch.manual_seed(0)
    for p in model.parameters():
        nn.init.uniform_(p, -0.5, 0.5)
    return model


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_lstm_tagger(tmp_path, dialect, fp16):
    c = check_module(_init(Tagger()), [torch.randn(1, T, FEATURES)], tmp_path, dialect=dialect, fp16=fp16,
                     expect_types=["LSTM"])
    assert len(c.result.ncnn.ops_of_type("LSTM")) == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_lstm_tagger_with_embedding(tmp_path, dialect):
    ids = torch.randint(0, 20, (1, T))
    r = check_sequence(_init(Tagger(vocab=20)), [ids], tmp_path, dialect=dialect, feed=[int32_ids(ids[0])])
    assert [op.type for op in r.ncnn.ops][:3] == ["Input", "Embed", "LSTM"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("from_states", [True, False], ids=["states", "last_step"])
@pytest.mark.parametrize("fp16", [False, True])
def test_gru_classifier(tmp_path, dialect, from_states, fp16):
    c = check_module(_init(GRUClassifier(from_states)), [torch.randn(T, 1, FEATURES)], tmp_path, dialect=dialect,
                     fp16=fp16, batched=[True])  # the batch is dim 1
    assert len(c.result.ncnn.ops_of_type("GRU")) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_rnn_classifier(tmp_path, dialect, fp16):
    c = check_module(_init(RNNClassifier()), [torch.randn(1, T, FEATURES)], tmp_path, dialect=dialect, fp16=fp16)
    assert len(c.result.ncnn.ops_of_type("RNN")) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_conv1d_lstm(tmp_path, dialect, fp16):
    c = check_module(_init(ConvLSTM()), [torch.randn(1, 6, 2 * T)], tmp_path, dialect=dialect, fp16=fp16,
                     expect_types=["Convolution1D", "LSTM"])
    assert not c.result.ncnn.ops_of_type("BatchNorm")  # folded into the convolution
