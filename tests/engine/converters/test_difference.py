"""``torch.diff`` of run-time tensors (the training dialect keeps ``aten.diff``; core ATen spells
it out): first and higher orders, any dim, with ``prepend``/``append`` tensors, and bools
(``!=``), in ncnn against PyTorch."""
import pytest
import torch

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, Fn, check_module, export_pt2

CASES = {
    "last": lambda x: torch.diff(x),
    "dim1_order2": lambda x: torch.diff(x, n=2, dim=1),
    "prepend_append": lambda x: torch.diff(x, dim=2, prepend=x[:, :, :1] * 0.5, append=x[:, :, -2:] + 1),
    "bool": lambda x: torch.diff(x > 0, dim=-1).float(),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_diff_matches(tmp_path, dialect, name):
    check_module(Fn(CASES[name]), [torch.randn(1, 5, 7, 6)], tmp_path, dialect=dialect)


def test_diff_is_converted_not_folded(tmp_path):
    pt2 = export_pt2(Fn(CASES["last"]), [torch.randn(1, 5, 7, 6)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions(lint=True))
    assert result.ok, result.errors
    assert "aten.diff.default" in result.records[0].snapshot
    assert any("aten.diff.default" in (e.meta.get("aten_op") or "") for e in result.pnnx.ops)


def test_diff_along_a_dynamic_dim_is_refused_clearly(tmp_path):
    length = torch.export.Dim("length", min=3, max=20)
    pt2 = export_pt2(Fn(CASES["last"]), [torch.randn(1, 8)], tmp_path / "m.pt2", dynamic_shapes=(({1: length},),))
    result = convert(str(pt2), ConvertOptions(lint=True))
    assert not result.ok
    assert any(d.op == "aten.diff.default" and "must be static" in d.reason for d in result.errors)
