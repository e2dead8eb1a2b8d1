"""argmax / argmin, max / min over a dim with their indices, and topk (an MoE router's pick)
written out as exact arithmetic (``decompose_selections``): exported with torch.export in both
dialects and run in ncnn against PyTorch, indices compared exactly (random inputs: no ties, whose
order PyTorch's kernel does not define)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.convert import ConvertOptions, convert  # noqa: E402
from tests.harness import DIALECTS, Fn, check_module, export_pt2  # noqa: E402
from tests.ncnn_runtime import run_layout  # noqa: E402

def _topk_both(x, k, **kw):
    v, i = torch.topk(x, k, **kw)
    return v, i.float()


CASES = {
    "argmax_last": lambda x: torch.argmax(x, dim=-1).float(),
    "argmin_dim1_keepdim": lambda x: torch.argmin(x, dim=1, keepdim=True).float(),
    "argmax_flattened": lambda x: torch.argmax(x).float(),
    "max_dim_with_indices": lambda x: tuple(t.float() for t in torch.max(x, dim=2)),
    "min_dim_keepdim_with_indices": lambda x: tuple(t.float() for t in torch.min(x, dim=0, keepdim=True)),
    "topk3_last": lambda x: _topk_both(x, 3),
    "topk2_smallest_dim1": lambda x: _topk_both(x, 2, dim=1, largest=False),
    "topk_all_of_dim": lambda x: _topk_both(x, 8, dim=-1),
    # a router: softmax, top-2, renormalised weights, and the experts' outputs gathered by index
    "moe_router": lambda x: (lambda w, i: (w / w.sum(-1, keepdim=True),
                                           torch.gather(x * 3 + 1, -1, i)))(*torch.softmax(x, -1).topk(2, -1)),
    "sort_ascending": lambda x: tuple(t.float() for t in torch.sort(x, dim=-1)),
    "sort_descending_dim1": lambda x: tuple(t.float() for t in torch.sort(x, dim=1, descending=True)),
    "argsort_stable": lambda x: torch.argsort(x, dim=-1, stable=True).float(),
    # ViT-MAE's random masking: argsort of the noise, the first half kept, argsort again to restore
    "mae_masking": lambda x: (lambda ids: (torch.gather(x, -1, ids[..., :4]),
                                           torch.argsort(ids, dim=-1).float()))(torch.argsort(x, dim=-1)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_selection_matches_pytorch_in_ncnn(case, dialect, tmp_path):
    torch.manual_seed(0)
    checked = check_module(Fn(CASES[case]), (torch.randn(2, 4, 8),), tmp_path, dialect=dialect, tol=1e-6)
    assert max(checked.errors) <= 1e-6


def test_topk_of_masked_scores_picks_every_finite_one_then_a_masked_one(tmp_path):
    """Fewer finite scores than k: the finite picks exactly, the last one at a masked place not taken
    before (PyTorch orders tied picks its own way; any order of them is a right answer)."""
    torch.manual_seed(1)
    mask = torch.tensor([0, 1, 0, 1, 1, 0], dtype=torch.bool)
    module = Fn(lambda x: _topk_both(x.masked_fill(mask, float("-inf")), 4, dim=-1)).eval()
    x = torch.randn(1, 3, 6)
    result = convert(str(export_pt2(module, (x,), tmp_path / "masked.pt2")), ConvertOptions(fp16=False))
    assert result.ok
    paths = [tmp_path / n for n in ("m.ncnn.param", "m.ncnn.bin", "m.pnnx.param", "m.pnnx.bin")]
    result.write(*paths)
    values, indices = run_layout(paths[0], paths[1], [x.numpy()], result.ncnn.meta)
    want_values, want_indices = (t.numpy() for t in module(x))
    finite = np.isfinite(want_values)
    assert np.array_equal(values[finite], want_values[finite])
    assert (values[~finite] == np.float32(-1e38)).all() and (~finite[..., 3]).all()  # -inf as -1e38
    assert np.array_equal(indices[..., :3], want_indices[..., :3])  # the finite picks, in order
    tied = indices[..., 3].astype(int)
    assert mask.numpy()[tied].all()  # the -inf pick is a masked place not taken before
    assert all(t not in row for t, row in zip(tied.reshape(-1), indices[..., :3].reshape(-1, 3)))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_topk_along_a_static_dim_of_a_run_time_length_sequence(dialect, tmp_path):
    torch.manual_seed(2)
    seq = torch.export.Dim("seq", min=2, max=64)
    check_module(Fn(lambda x: _topk_both(x, 2)), (torch.randn(1, 5, 8),), tmp_path, dialect=dialect,
                 dynamic_shapes=(({1: seq},),), run_inputs=(torch.randn(1, 11, 8),), tol=1e-6)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_topk_and_max_along_the_run_time_dim_itself(dialect, tmp_path):
    """The picks along a dim of run-time size: positions made at the largest size, cut to it."""
    torch.manual_seed(3)
    seq = torch.export.Dim("seq", min=4, max=64)
    fn = Fn(lambda x: (*_topk_both(x, 3, dim=1), torch.max(x, dim=1)[1].float()))
    check_module(fn, (torch.randn(1, 6, 5),), tmp_path, dialect=dialect, dynamic_shapes=(({1: seq},),),
                 run_inputs=(torch.randn(1, 13, 5),), tol=1e-6)


def test_topk_beyond_the_largest_k_stays_and_is_reported(tmp_path):
    pt2 = export_pt2(Fn(lambda x: torch.topk(x, 65, dim=-1)[0]), (torch.randn(1, 70),), tmp_path / "big.pt2")
    result = convert(str(pt2), ConvertOptions())
    assert [e.op for e in result.errors] == ["aten.topk.default"]
    assert "topk with k=65 (written out up to k=64" in result.errors[0].reason


def test_sort_beyond_the_largest_k_stays_and_is_reported(tmp_path):
    pt2 = export_pt2(Fn(lambda x: torch.sort(x, dim=-1)[0]), (torch.randn(1, 70),), tmp_path / "big.pt2")
    result = convert(str(pt2), ConvertOptions())
    assert [e.op for e in result.errors] == ["aten.sort.default"]
    assert "sort of 70 values (written out up to k=64" in result.errors[0].reason
