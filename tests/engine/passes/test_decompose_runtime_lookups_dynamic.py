"""decompose_runtime_lookups with a dynamic (bounded) length, both dialects: argmax along the
dynamic dim and run-time gathers from it use positions computed at the largest length and cut
to the run-time one; the converted model matches PyTorch at the exported length and two others."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module

DIM = 8


def _seq(max_len: int = 16):
    return torch.export.Dim("seq", min=2, max=max_len)


class ArgmaxThenIndex(nn.Module):
    """The position of each row's largest value along the dynamic dim, then the rows there."""

    def forward(self, x):
        at = x.sum(-1).argmax(-1)  # (1,)
        picked = x[torch.arange(x.shape[0]), at]  # (1, DIM)
        return picked, at.float(), x.argmax(1).float()


def _floats(n: int, seed: int) -> torch.Tensor:
    return torch.randn(1, n, DIM, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [2, 9, 16])
def test_argmax_along_a_dynamic_dim_then_index(tmp_path, dialect, length):
    c = check_module(ArgmaxThenIndex(), [_floats(7, 0)], tmp_path, dialect=dialect,
                     dynamic_shapes=({1: _seq()},), run_inputs=[_floats(length, length)], expect_types=["Crop"])
    assert c.errors == [0.0, 0.0, 0.0]


class PooledText(nn.Module):
    """CLIP's pooled text output: the hidden state at each sequence's end-of-text token, the
    largest id (``hidden[arange(B), ids.argmax(-1)]``), after an embedding of int token ids."""

    def __init__(self, vocab: int = 30):
        super().__init__()
        self.words = nn.Embedding(vocab, DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, input_ids):
        hidden = self.proj(self.words(input_ids)).relu()
        return hidden, hidden[torch.arange(hidden.shape[0]), input_ids.to(torch.int).argmax(-1)]


def _ids(n: int, end: int, seed: int) -> torch.Tensor:
    ids = torch.randint(1, 28, (1, n), generator=torch.Generator().manual_seed(seed))
    ids[0, end] = 29  # the end-of-text token
    return ids


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length,end", [(3, 1), (10, 9), (20, 13)])
def test_pooled_output_at_the_argmax_of_token_ids(tmp_path, dialect, length, end):
    torch.manual_seed(0)
    c = check_module(PooledText(), [_ids(12, 7, 0)], tmp_path, dialect=dialect, dynamic_shapes=({1: _seq(20)},),
                     run_inputs=[_ids(length, end, length)], expect_types=["Embed", "Crop"])
    hidden, pooled = c.outputs
    assert c.errors[1] < 1e-6 and (pooled == hidden[:, end]).all(), "the pooled row is the hidden one, exactly"


LOOKUPS = {
    # a run-time index, negative too: wrapped with the run-time length
    "index": lambda x, y: x[torch.arange(1), (y > 0).long().sum(-1) - 3],
    "index_select": lambda x, y: torch.index_select(x, 1, (y > 0).long().cumsum(-1)[0]),
    "gather": lambda x, y: torch.gather(x, 1, (y > 0).long().cumsum(-1)[..., None].expand(1, 4, DIM)),
}


#: run-time length → the indexing input (an index of -2 at length 5, 0 at 7, 1 or 4 at 11)
RUNS = {5: [[-1.0, -1, -1, 1]], 7: [[1.0, -1, 1, 1]], 11: [[1.0, 1, 1, 1]]}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(LOOKUPS))
@pytest.mark.parametrize("length", list(RUNS))
def test_lookup_along_a_dynamic_dim(tmp_path, dialect, name, length):
    y = torch.tensor(RUNS[length])
    c = check_module(Fn(LOOKUPS[name]), [_floats(7, 0), torch.tensor(RUNS[7])], tmp_path, dialect=dialect,
                     dynamic_shapes=(({1: torch.export.Dim("seq", min=5, max=16)}, None),),
                     run_inputs=[_floats(length, length), y], expect_types=["Crop"])
    assert c.errors == [0.0]
