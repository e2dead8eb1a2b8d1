"""mark_integer_inputs end to end (both dialects): token ids that index an embedding are fed as
int32 (what ncnn's Embed reads), other integer inputs as float values; ids also used as numbers
get a float copy through an Embed of ``[[0], [1], ...]``."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, check_module


class RobertaLikeEmbeddings(nn.Module):
    """Word embedding of the ids plus a position embedding whose positions come from the ids
    (``ne(pad)``, cumsum), and a padding mask from a separate integer input."""

    def __init__(self, vocab=40, pad=1, dim=8):
        super().__init__()
        self.words = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(32, dim)
        self.pad = pad

    def forward(self, ids, attention_mask):
        mask = ids.ne(self.pad).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + self.pad
        h = self.words(ids) + self.positions(positions)
        return h * attention_mask[..., None]


def _inputs(length=9):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 40, (1, length), generator=g)
    ids[0, -2:] = 1  # padding
    mask = torch.ones(1, length, dtype=torch.long)
    mask[0, -2:] = 0
    return [ids, mask]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_ids_feed_embed_as_int32_and_arithmetic_as_values(tmp_path, dialect):
    c = check_module(RobertaLikeEmbeddings(), _inputs(), tmp_path, dialect=dialect)
    assert [i["dtype"] for i in c.result.ncnn.meta["inputs"]] == ["int32", "float32"]
    assert c.errors[0] < 1e-6
    embeds = [op for op in c.result.ncnn.ops if op.type == "Embed"]
    assert len(embeds) == 2, "the word lookup and the int32 → float conversion of the ids"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_integer_input_without_embedding_is_fed_as_float(tmp_path, dialect):
    c = check_module(_Twice(), [torch.tensor([[3, 0, 7, -2]])], tmp_path, dialect=dialect)
    assert [i["dtype"] for i in c.result.ncnn.meta["inputs"]] == ["float32"]
    assert c.errors == [0.0]


class _Twice(nn.Module):
    def forward(self, x):
        return (x * 2 + 1).float()
