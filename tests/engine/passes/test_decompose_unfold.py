"""``Tensor.unfold`` (sliding windows) written out as slices, views, a cat and a permute
(``decompose_unfold``): exported with torch.export in both dialects and run in ncnn against
PyTorch — overlapping windows (step below size), windows with gaps (step above size), a window
as long as the dim, the last dim, and HaloNet's two-dim halos."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.harness import DIALECTS, Fn, check_module  # noqa: E402


def _halos(x, block=4, halo=1):
    """timm's HaloNet: pad by the halo, then overlapping (block + 2·halo)² windows every block."""
    win = block + 2 * halo
    x = torch.nn.functional.pad(x, [halo, halo, halo, halo])
    kv = x.unfold(2, win, block).unfold(3, win, block)
    return kv.reshape(x.shape[0], x.shape[1], -1, win * win).transpose(1, 2) * 2.0


CASES = {
    "overlapping_dim2": (lambda x: x.unfold(2, 5, 2) + 1.0, (1, 3, 12, 8)),
    "gaps_dim1": (lambda x: x.unfold(1, 2, 3) * 2.0, (1, 10, 6)),
    "whole_dim": (lambda x: x.unfold(1, 7, 1).sigmoid(), (1, 7, 5)),
    "last_dim_overlap": (lambda x: x.unfold(-1, 4, 3).relu(), (1, 2, 14)),
    "halonet_blocks": (_halos, (1, 4, 8, 8)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_unfold_matches_pytorch_in_ncnn(case, dialect, tmp_path):
    fn, shape = CASES[case]
    torch.manual_seed(0)
    checked = check_module(Fn(fn), (torch.randn(*shape),), tmp_path, dialect=dialect, tol=1e-6,
                           forbid_types=("Gather", "Embed"))  # views only, no lookup
    assert max(checked.errors) <= 1e-6



@pytest.mark.parametrize("dialect", DIALECTS)
def test_unfold_beside_a_run_time_length(dialect, tmp_path):
    """Windows along a static dim of a tensor whose other dim is dynamic: its views keep it as -1."""
    torch.manual_seed(1)
    t = torch.export.Dim("t", min=4, max=64)
    check_module(Fn(lambda x: x.unfold(1, 3, 2).sum(-1) * 2.0), (torch.randn(1, 9, 10),), tmp_path, dialect=dialect,
                 dynamic_shapes=(({2: t},),), run_inputs=(torch.randn(1, 9, 17),), tol=1e-6)
