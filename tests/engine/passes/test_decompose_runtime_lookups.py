"""decompose_runtime_lookups end to end (both dialects): lookups with computed indices, several
constant index tensors, gathers from uniform constants and argmax/argmin become exact arithmetic."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


def _ids(*shape, high=6, seed=0):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed)).float()


class ComputedEmbedding(nn.Module):
    """An embedding looked up at indices computed from a float input (positions from a mask)."""

    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(12, 5)

    def forward(self, x):
        mask = (x > 0).long()
        positions = torch.cumsum(mask, 1) * mask + 1
        return self.table(positions)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_embedding_with_computed_indices(tmp_path, dialect):
    c = check_module(ComputedEmbedding(), [torch.randn(1, 9)], tmp_path, dialect=dialect, forbid_types=["Embed"])
    assert c.errors[0] < 1e-6


LOOKUPS = {
    # one run-time index tensor, with negative indices
    "index_runtime": lambda x, i: x[:, :, i[0].long() - 3],
    "index_select_runtime": lambda x, i: torch.index_select(x, 2, i[0].long()),
    "gather_runtime": lambda x, i: torch.gather(x, 2, ((i[:, None, :] + torch.arange(4)[None, :, None]) % 6).long()),
    # two index tensors broadcast together (mask[batch_idx, kv_idx])
    "index_two_runtime": lambda x, i: x[torch.zeros(1, 1, dtype=torch.long), (i % 4).long()],
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(LOOKUPS))
def test_lookup_with_runtime_indices(tmp_path, dialect, name):
    c = check_module(Fn(LOOKUPS[name]), [torch.randn(1, 4, 6), _ids(1, 6)], tmp_path, dialect=dialect)
    assert c.errors[0] < 1e-6


@pytest.mark.parametrize("dialect", DIALECTS)
def test_constant_index_tensors_into_runtime_data(tmp_path, dialect):
    """Hugging Face's padding mask lookup: ``mask[arange(1)[:, None, None, None], arange(L)[None, None, None, :]]``."""

    def f(mask):
        b = torch.arange(1)[:, None, None, None]
        kv = torch.arange(7)[None, None, None, :]
        return (mask.bool()[b, kv] & (torch.arange(7)[None, None, :, None] >= kv)).float()

    mask = torch.tensor([[1.0, 1, 1, 0, 1, 1, 0]])
    c = check_module(Fn(f), [mask], tmp_path, dialect=dialect)
    assert c.errors == [0.0]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_gather_from_a_uniform_constant(tmp_path, dialect):
    """RoBERTa's token type ids: ``zeros(1, 16).gather(1, positions)`` is zeros whatever the positions."""
    types = nn.Embedding(2, 4)

    def f(x):
        positions = (torch.cumsum((x > 0).long(), 1) + 1)
        return types(torch.zeros(1, 16, dtype=torch.long).gather(1, positions)) + x[..., None]

    c = check_module(Fn(f), [torch.randn(1, 6)], tmp_path, dialect=dialect, forbid_types=["MatMul", "Gemm"])
    assert c.errors[0] < 1e-6


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("which", ["argmax", "argmin"])
def test_argmax_takes_the_first_of_ties(tmp_path, dialect, which):
    fn = getattr(torch, which)
    x = torch.tensor([[[3.0, 1, 3, 0, 3], [0, 0, 2, 2, 1], [5, 5, 5, 5, 5]]])
    c = check_module(Fn(lambda x: (fn(x, -1), fn(x, 1, keepdim=True), fn(x.flatten(1), 1))), [x], tmp_path,
                     dialect=dialect)
    assert c.errors == [0.0, 0.0, 0.0]


class GroupMask(nn.Module):
    """DeepSeek-V3's group-limited routing: the best 2 of 4 expert groups per token, marked by
    scattering ones into zeros at their indices, then the scores of the other groups zeroed."""

    def forward(self, scores):
        groups = scores.view(scores.shape[0], 4, -1).amax(-1)
        idx = torch.topk(groups, k=2, dim=-1, sorted=False)[1]
        mask = torch.zeros_like(groups)
        mask.scatter_(1, idx, 1)
        keep = mask.unsqueeze(-1).expand(-1, 4, scores.shape[1] // 4).reshape(scores.shape[0], -1)
        return scores.masked_fill(~keep.bool(), 0.0), mask


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scatter_of_a_scalar_at_computed_indices(tmp_path, dialect):
    torch.manual_seed(0)
    c = check_module(GroupMask(), [torch.randn(5, 16)], tmp_path, dialect=dialect, tol=1e-6)
    assert max(c.errors) <= 1e-6


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scatter_of_a_scalar_into_activations_along_a_run_time_length(tmp_path, dialect):
    """Values written into a computed tensor, the scattered dim of run-time size (cut positions)."""
    n = torch.export.Dim("n", min=4, max=32)
    fn = Fn(lambda x: (x * 2).scatter(1, torch.argmax(x, dim=1, keepdim=True), -5.0))
    check_module(fn, [torch.randn(3, 7)], tmp_path, dialect=dialect, dynamic_shapes=(({1: n},),),
                 run_inputs=[torch.randn(3, 12)], tol=1e-6)
