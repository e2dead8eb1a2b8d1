"""fold_constants on the indexing/masking ops added for attention masks and position tables:
each folded value equals what PyTorch computes (exported for real, folded, compared)."""
import numpy as np
import pytest
import torch

import engine
import engine.convert  # noqa: F401
from engine.build import build_graph
from engine.passes import PassContext, fold_constants, functionalize_view_mutations, normalize_inplace, remove_noops
from tests.harness import Fn, export_pt2

CASES = {
    "index_two_tensors": lambda t: t[torch.tensor([0, 2]), torch.tensor([1, 3])],
    "index_none_first": lambda t: t[:, torch.tensor([[3, 0], [1, 1]])],
    "index_put": lambda t: t.index_put((torch.tensor([0, 2]),), torch.ones(2, 4), accumulate=True),
    "gather": lambda t: torch.gather(t, 1, torch.tensor([[0, 3], [2, 2], [1, 0]])),
    "masked_fill_ne_eq": lambda t: t.masked_fill(t != 0, -100.0).masked_fill(t == 0, 0.0),
    "where_lt": lambda t: torch.where(t < 0.5, t, -t),
    "roll_flip": lambda t: torch.flip(torch.roll(t, (1, -2), (0, 1)), (1,)),
    "tril_triu": lambda t: torch.tril(t, -1) + torch.triu(t, 2),
    "stack_repeat_tile": lambda t: torch.stack([t, t.repeat(1, 1)], 0).tile((2, 1, 1)),
    "slice_scatter": lambda t: torch.slice_scatter(t, torch.zeros(3, 2), dim=1, start=1, end=3),
    "select_scatter": lambda t: torch.select_scatter(t, torch.ones(4), 0, 1),
    "reductions": lambda t: t.sum(0) + t.mean(1, keepdim=True).squeeze(1).amax() + t.amin(),
    "new_full_ones_eye": lambda t: t.new_full((3, 4), 2.5) + t.new_ones((3, 4)) + torch.eye(3, 4),
    "logical": lambda t: torch.where(torch.logical_and(t > 0.2, ~(t > 0.8)), 1.0, 0.0),
    "swap_move_narrow": lambda t: torch.movedim(torch.swapaxes(t.view(3, 2, 2), 0, 2), 0, 1).narrow(0, 1, 1),
    "cumsum_clamp": lambda t: torch.cumsum(t, 1).clamp_min(0.5).clamp_max(2.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_folds_like_pytorch(tmp_path, name):
    table = torch.rand(3, 4)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", table)

        def forward(self, x):
            return x + CASES[name](self.table).float().sum()

    pt2 = export_pt2(M(), [torch.randn(1, 2)], tmp_path / "m.pt2")
    g = build_graph(engine.load(str(pt2)).model)
    cx = PassContext()
    for p in (functionalize_view_mutations.run, normalize_inplace.run, remove_noops.run, fold_constants.run):
        p(g, cx)
    g.lint()
    add = [op for op in g.ops if op.type == "aten.add.Tensor"][-1]
    const = add.inputs[1]
    assert const.producer.type == "pnnx.Attribute", [op.type for op in g.ops]
    np.testing.assert_allclose(const.producer.attrs["data"].data, CASES[name](table).float().sum().numpy(), rtol=1e-6)
