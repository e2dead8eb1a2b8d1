"""Resize converters: upsample / interpolate (nearest, bilinear, linear, bicubic, trilinear and
3-D nearest; scale or size; align_corners) and pixel (un)shuffle, checked numerically in ncnn,
both dialects."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.harness import DIALECTS, check_module, export_pt2


def check_resize(module, x, tmp_path, dialect):
    """Numeric check. Core ATen decomposes linear and bicubic resizes into constant gathers and
    arithmetic: the gathers (broadcast as outer products for 2-D) convert one dim at a time, as
    Crop/Concat of a few runs or a one-hot MatMul; the TRAINING dialect gives one Interp."""
    mode = getattr(module, "kw", {}).get("mode")
    if dialect == "core" and mode in ("linear", "bicubic"):
        c = check_module(module, [x], tmp_path, dialect=dialect)
        types = {op.type for op in c.result.ncnn.ops}
        assert {"Concat", "MatMul"} & types, types
        return
    check_module(module, [x], tmp_path, dialect=dialect, expect_types=["Interp"])


class Interp(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw)


CASES = [
    dict(scale_factor=2, mode="nearest"),
    dict(scale_factor=(2, 3), mode="nearest"),
    dict(scale_factor=1.5, mode="nearest"),
    dict(scale_factor=0.5, mode="nearest"),
    dict(size=(7, 9), mode="nearest"),
    dict(size=(3, 4), mode="nearest"),
    dict(scale_factor=2, mode="bilinear", align_corners=False),
    dict(scale_factor=2, mode="bilinear", align_corners=True),
    dict(scale_factor=1.5, mode="bilinear", align_corners=True),
    dict(scale_factor=(3, 2), mode="bilinear", align_corners=False),
    dict(size=(7, 11), mode="bilinear", align_corners=False),
    dict(size=(7, 11), mode="bilinear", align_corners=True),
    dict(size=(3, 3), mode="bilinear", align_corners=False),
    dict(scale_factor=1.5, mode="bilinear", align_corners=False, recompute_scale_factor=True),
    dict(scale_factor=2, mode="bicubic", align_corners=False),
    dict(size=(9, 7), mode="bicubic", align_corners=True),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_interpolate_2d(tmp_path, dialect, kw):
    check_resize(Interp(**kw), torch.randn(1, 3, 6, 8), tmp_path, dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="nearest"), dict(size=11, mode="nearest"),
                                dict(scale_factor=2, mode="linear", align_corners=False),
                                dict(size=13, mode="linear", align_corners=True)],
                         ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_interpolate_1d(tmp_path, dialect, kw):
    check_resize(Interp(**kw), torch.randn(1, 4, 7), tmp_path, dialect)


CASES_3D = [
    dict(scale_factor=2, mode="nearest"),
    dict(scale_factor=(1, 2, 3), mode="nearest"),
    dict(scale_factor=1.5, mode="nearest"),
    dict(scale_factor=0.5, mode="nearest"),
    dict(size=(5, 7, 9), mode="nearest"),
    dict(size=(2, 2, 7), mode="nearest"),
    dict(scale_factor=2, mode="trilinear", align_corners=False),
    dict(scale_factor=(2, 1, 3), mode="trilinear", align_corners=True),
    dict(size=(5, 7, 9), mode="trilinear", align_corners=False),
    dict(size=(4, 6, 3), mode="trilinear", align_corners=True),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kw", CASES_3D, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_interpolate_3d(tmp_path, dialect, kw):
    """ncnn's Interp has no depth axis: (H, W) on a (C·D, H, W) view, then D on (C, D, H'·W').
    Core ATen spells a 3-D nearest resize as one gather per spatial dim (recognised); its
    trilinear resize as eight gathers (outer products of constant vectors) and arithmetic, which
    convert one dim at a time and match."""
    x = torch.randn(1, 2, 3, 4, 5)
    if dialect == "core" and kw["mode"] == "trilinear":
        check_module(Interp(**kw), [x], tmp_path, dialect=dialect, expect_types=["Concat"])
        return
    check_module(Interp(**kw), [x], tmp_path, dialect=dialect, expect_types=["Interp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("module", [nn.Upsample(scale_factor=2), nn.Upsample(size=(10, 13), mode="bilinear"),
                                    nn.UpsamplingNearest2d(scale_factor=3), nn.UpsamplingBilinear2d(size=(9, 9))],
                         ids=["Upsample2", "UpsampleBilinearSize", "UpsamplingNearest2d", "UpsamplingBilinear2d"])
def test_upsample_modules(tmp_path, dialect, module):
    check_module(module, [torch.randn(1, 2, 5, 6)], tmp_path, dialect=dialect, expect_types=["Interp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_dynamic_size(tmp_path, dialect, mode):
    h, w = torch.export.Dim("h", min=4, max=64), torch.export.Dim("w", min=4, max=64)
    check_module(Interp(scale_factor=2, mode=mode), [torch.randn(1, 3, 6, 8)], tmp_path, dialect=dialect,
                 dynamic_shapes=({2: h, 3: w},), run_inputs=[torch.randn(1, 3, 9, 5)], expect_types=["Interp"])


def test_fractional_trilinear_scale_is_refused(tmp_path):
    from engine.convert import convert

    pt2 = export_pt2(Interp(scale_factor=1.5, mode="trilinear"), [torch.randn(1, 2, 3, 5, 5)], tmp_path / "m.pt2")
    result = convert(str(pt2))
    assert not result.ok
    assert any("fractional scale" in d.reason for d in result.errors), [str(d) for d in result.errors]


def test_fractional_bilinear_scale_is_refused(tmp_path):
    from engine.convert import convert

    pt2 = export_pt2(Interp(scale_factor=1.5, mode="bilinear"), [torch.randn(1, 3, 5, 5)], tmp_path / "m.pt2")
    result = convert(str(pt2))
    assert not result.ok
    assert any("fractional scale" in d.reason for d in result.errors), [str(d) for d in result.errors]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("r", [2, 3])
def test_pixel_shuffle(tmp_path, dialect, r):
    checked = check_module(nn.PixelShuffle(r), [torch.randn(1, 2 * r * r, 4, 5)], tmp_path, dialect=dialect,
                           expect_types=["PixelShuffle"])
    assert len(checked.result.ncnn.ops) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("r", [2, 3])
def test_pixel_unshuffle(tmp_path, dialect, r):
    checked = check_module(nn.PixelUnshuffle(r), [torch.randn(1, 3, 4 * r, 2 * r)], tmp_path, dialect=dialect,
                           expect_types=["Reorg"])
    assert len(checked.result.ncnn.ops) == 2
