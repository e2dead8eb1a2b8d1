"""diag / diagonal → ncnn Diag, both dialects."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module

CASES = {
    "vector": (lambda x: torch.diag(x[0]).unsqueeze(0), (1, 5)),
    "vector_below": (lambda x: torch.diag(x[0], -2).unsqueeze(0), (1, 5)),
    "vector_above": (lambda x: torch.diag(x[0], 3).unsqueeze(0), (1, 4)),
    "matrix": (lambda x: torch.diag(x[0]).unsqueeze(0), (1, 5, 5)),
    "matrix_wide_above": (lambda x: torch.diag(x[0], 1).unsqueeze(0), (1, 4, 6)),
    "matrix_tall_below": (lambda x: torch.diag(x[0], -2).unsqueeze(0), (1, 6, 4)),
    "diagonal": (lambda x: x.diagonal(0, 1, 2), (1, 5, 5)),
    "diagonal_swapped_dims": (lambda x: x.diagonal(1, 2, 1), (1, 5, 6)),
    "diagonal_negative_dims": (lambda x: torch.diagonal(x, -1, -2, -1), (1, 6, 5)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_diag(tmp_path, dialect, name):
    fn, shape = CASES[name]
    c = check_module(Fn(fn), [torch.randn(*shape)], tmp_path, dialect=dialect)
    # core ATen builds diag of a vector from constants and arithmetic (no Diag layer needed)
    if not (dialect == "core" and name.startswith("vector")):
        assert "Diag" in [op.type for op in c.result.ncnn.ops]


def test_diagonal_of_other_dims_is_refused(tmp_path):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    pt2 = export_pt2(Fn(lambda x: x.diagonal(0, 1, 3)), [torch.randn(1, 4, 3, 4)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions())
    assert not result.ok and any("diagonal" in d.reason for d in result.errors), result.errors
