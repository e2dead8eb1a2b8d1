"""Pad converters: constant / reflect / replicate pads of 1-D, 2-D and 3-D (and channel) dims,
and negative (cropping) pads, checked numerically in ncnn, both dialects."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.harness import DIALECTS, check_module


class Pad(nn.Module):
    def __init__(self, pad, mode="constant", value=None):
        super().__init__()
        self.pad, self.mode, self.value = pad, mode, value

    def forward(self, x):
        if self.mode == "constant":
            return F.pad(x, self.pad, value=self.value or 0.0)
        return F.pad(x, self.pad, mode=self.mode)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("pad", [(1, 2), (1, 2, 3, 0), (0, 0, 2, 1), (2, 2, 2, 2)])
def test_pad_2d(tmp_path, dialect, mode, pad):
    if mode != "constant" and len(pad) == 2:
        pytest.skip("PyTorch pads only the last dim of a 2-D/3-D input in this mode")
    checked = check_module(Pad(pad, mode), [torch.randn(1, 3, 5, 6)], tmp_path, dialect=dialect,
                           expect_types=["Padding"])
    assert [op.type for op in checked.result.ncnn.ops] == ["Input", "Padding"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("pad", [(1, 2, 0, 1, 2, 1), (0, 0, 0, 0, 1, 2), (2, 2, 2, 2, 2, 2)])
def test_pad_3d(tmp_path, dialect, mode, pad):
    """A 5-D (N, C, D, H, W) input is a 4-D ncnn blob: front/behind pad its depth."""
    checked = check_module(Pad(pad, mode, 0.5), [torch.randn(1, 2, 4, 5, 6)], tmp_path, dialect=dialect)
    assert [op.type for op in checked.result.ncnn.ops] == ["Input", "Padding"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("module", [nn.ReplicationPad3d((1, 0, 2, 1, 1, 2)), nn.ConstantPad3d(1, -2.0),
                                    nn.ReflectionPad3d(1), nn.ZeroPad3d((0, 1, 1, 0, 2, 0))],
                         ids=["ReplicationPad3d", "ConstantPad3d", "ReflectionPad3d", "ZeroPad3d"])
def test_pad_3d_modules(tmp_path, dialect, module):
    check_module(module, [torch.randn(1, 3, 4, 5, 6)], tmp_path, dialect=dialect, expect_types=["Padding"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("pad", [(1, 2), (3, 0)])
def test_pad_1d(tmp_path, dialect, mode, pad):
    check_module(Pad(pad, mode), [torch.randn(1, 4, 7)], tmp_path, dialect=dialect, expect_types=["Padding"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("value", [0.0, -1.5])
def test_pad_constant_channels(tmp_path, dialect, value):
    check_module(Pad((1, 0, 0, 2, 1, 1), "constant", value), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect,
                 expect_types=["Padding"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("pad", [(-1, -2), (0, -1, -2, 0), (2, -1, 1, 1)])
def test_pad_negative_crops(tmp_path, dialect, pad):
    check_module(Pad(pad), [torch.randn(1, 3, 5, 6)], tmp_path, dialect=dialect, expect_types=["Crop"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("module", [nn.ReflectionPad2d((1, 2, 2, 1)), nn.ReplicationPad2d(2), nn.ZeroPad2d((0, 1, 1, 0)),
                                    nn.ConstantPad2d(1, 3.5), nn.ReflectionPad1d(2), nn.ReplicationPad1d((0, 3))],
                         ids=["ReflectionPad2d", "ReplicationPad2d", "ZeroPad2d", "ConstantPad2d", "ReflectionPad1d",
                              "ReplicationPad1d"])
def test_pad_modules(tmp_path, dialect, module):
    x = torch.randn(1, 3, 6, 5) if "2d" in type(module).__name__ else torch.randn(1, 3, 6)
    check_module(module, [x], tmp_path, dialect=dialect, expect_types=["Padding"])


@pytest.mark.parametrize("pad", [(1, 1, 2, 0), (1, -1, 2, 0)])
def test_pad_dynamic_size(tmp_path, pad):
    """TRAINING dialect only: core ATen computes dynamic reflect/replicate gathers from the sizes."""
    h, w = torch.export.Dim("h", min=4, max=64), torch.export.Dim("w", min=4, max=64)
    check_module(Pad(pad), [torch.randn(1, 3, 6, 8)], tmp_path, dynamic_shapes=({2: h, 3: w},),
                 run_inputs=[torch.randn(1, 3, 9, 5)])


def test_circular_pad_is_refused(tmp_path):
    from engine.convert import convert
    from tests.harness import export_pt2

    pt2 = export_pt2(Pad((1, 1, 1, 1), "circular"), [torch.randn(1, 3, 5, 5)], tmp_path / "m.pt2")
    result = convert(str(pt2))
    assert not result.ok


class PadToMultiple(nn.Module):
    """Swin's pad of a run-time size up to a multiple of its window."""

    def forward(self, x):
        return F.pad(x, (0, (7 - x.shape[-1] % 7) % 7)) * 2.0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_pad_by_a_run_time_amount_is_refused_by_name(tmp_path, dialect):
    """No ncnn layer pads by an amount it computes: the pad is reported as such, not a crash."""
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    w = torch.export.Dim("w", min=8, max=64)
    pt2 = export_pt2(PadToMultiple(), (torch.randn(1, 3, 9),), tmp_path / "m.pt2", dialect=dialect,
                     dynamic_shapes=({2: w},))
    result = convert(str(pt2), ConvertOptions())
    assert not result.ok
    (err,) = [d for d in result.errors if "pad" in d.op]
    assert err.reason.startswith("unsupported: padding by amounts computed at run time"), err.reason
    assert "failed" not in err.reason
