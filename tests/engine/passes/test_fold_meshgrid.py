"""``meshgrid`` of constant vectors (BEiT's relative-position tables) folds to one constant per
grid in the training dialect (core ATen spells it as views and expands); both indexings, in ncnn
against PyTorch."""
import pytest
import torch

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, Fn, check_module, export_pt2


def grid_ij(x):
    gy, gx = torch.meshgrid(torch.arange(4), torch.arange(6), indexing="ij")
    return x * 2 + (gy * 10 + gx).float()


def grid_xy(x):
    gx, gy = torch.meshgrid(torch.arange(6), torch.arange(4), indexing="xy")
    return x - torch.stack([gx, gy]).float().sum(0) / 3


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fn", [grid_ij, grid_xy])
def test_meshgrid_of_constants(tmp_path, dialect, fn):
    check_module(Fn(fn), [torch.randn(1, 4, 6)], tmp_path, dialect=dialect)


def test_meshgrid_folds_to_one_constant_per_grid(tmp_path):
    pt2 = export_pt2(Fn(grid_ij), [torch.randn(1, 4, 6)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions(lint=True))
    text = next(r for r in result.records if r.name == "fold_constants").snapshot
    assert "aten.meshgrid" not in text
    assert "aten.meshgrid" in result.records[0].snapshot  # it was there before folding
