"""``fold_dynamic_constants`` beyond a model input's sizes: values made only of sizes of
intermediate tensors (a detection head's anchor grid over each feature map, of height ``4*h``
and width ``4*w`` for an input ``32*h × 32*w``) fold at the largest sizes and are cut by ncnn to
the size a feature map has at run time. The converted model runs at another input size and
matches PyTorch there (real torch.export, real ncnn)."""
import pytest
import torch
from torch import nn

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, check_module, export_pt2


def make_anchors(feats, strides, offset=0.5):
    """Ultralytics' ``make_anchors``: per feature map, the cell centres (x, y) flattened, and a
    column of its stride."""
    points, stride_rows = [], []
    for f, stride in zip(feats, strides):
        h, w = f.shape[2:]
        sx = torch.arange(end=w, dtype=f.dtype) + offset
        sy = torch.arange(end=h, dtype=f.dtype) + offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_rows.append(torch.full((h * w, 1), stride.item(), dtype=f.dtype))
    return torch.cat(points), torch.cat(stride_rows)


class AnchorHead(nn.Module):
    """Two strided feature maps and a YOLO-style box decode over their anchor grid, the strides
    read with ``.item()`` from a tensor."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, 2, 1)
        self.c2 = nn.Conv2d(6, 6, 3, 2, 1)
        self.register_buffer("stride", torch.tensor([2.0, 4.0]))

    def forward(self, x):
        f1 = self.c1(x)
        feats = [f1, self.c2(f1)]
        anchors, strides = (t.transpose(0, 1) for t in make_anchors(feats, self.stride))
        flat = torch.cat([f.view(1, 6, -1) for f in feats], 2)
        lt, rb = flat[:, :2], flat[:, 2:4]
        boxes = torch.cat(((anchors - lt + anchors + rb) / 2, rb + lt), 1) * strides
        return torch.cat((boxes, flat[:, 4:].sigmoid()), 1)


def _dims():
    return torch.export.Dim("h", min=1, max=24), torch.export.Dim("w", min=1, max=24)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_anchor_grids_of_feature_maps_follow_the_input_size(tmp_path, dialect):
    torch.manual_seed(0)
    h, w = _dims()
    check_module(AnchorHead().eval(), [torch.randn(1, 3, 32, 24)], tmp_path, dialect=dialect,
                 dynamic_shapes=({2: 8 * h, 3: 8 * w},), run_inputs=[torch.randn(1, 3, 40, 56)])


def test_anchor_grids_fold_to_constants_cut_by_a_feature_map(tmp_path):
    """No anchor arithmetic is left in ncnn: the grids and stride columns are constants at the
    largest size, each cut (a Crop) to the size of a feature map."""
    torch.manual_seed(0)
    h, w = _dims()
    pt2 = export_pt2(AnchorHead().eval(), [torch.randn(1, 3, 32, 24)], tmp_path / "m.pt2",
                     dynamic_shapes=({2: 8 * h, 3: 8 * w},))
    result = convert(str(pt2), ConvertOptions(fp16=False))
    assert result.ok, result.errors
    largest = [op for op in result.pnnx.ops if op.type == "pnnx.Attribute" and "largest" in op.name]
    shapes = sorted(list(op.outputs[0].shape) for op in largest)
    assert [96, 96, 2] in shapes and [48, 48, 2] in shapes, shapes  # the grids at 8*24/2 and 8*24/4
    assert not [op for op in result.pnnx.ops if "arange" in op.type or "meshgrid" in op.type]


class Warp(nn.Module):
    """Optical-flow style warping at a dynamic size: pixel coordinates plus a predicted flow,
    normalised by ``w - 1`` and ``h - 1`` (sizes read as numbers), then ``grid_sample``."""

    def __init__(self):
        super().__init__()
        self.flow = nn.Conv2d(3, 2, 3, 2, 1)
        self.feat = nn.Conv2d(3, 4, 3, 2, 1)

    def forward(self, x):
        flow, feat = self.flow(x), self.feat(x)
        h, w = feat.shape[-2:]
        ys, xs = torch.meshgrid(torch.arange(h, dtype=x.dtype), torch.arange(w, dtype=x.dtype), indexing="ij")
        px = (xs + flow[:, 0]) / (w - 1) * 2 - 1
        py = (ys + flow[:, 1]) * (2.0 / (h - 1)) - 1
        warped = nn.functional.grid_sample(feat, torch.stack((px, py), -1), align_corners=True)
        return warped - flow[:, :1] * (1 - w) + (h + 3)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sizes_read_as_numbers_follow_the_input_size(tmp_path, dialect):
    """``x / (w - 1)`` with ``w`` a feature map's run-time width: ncnn computes the size as a
    one-element tensor (a cut ones vector, summed) — it was refused ("other is the symbolic
    scalar 4*s0-1")."""
    torch.manual_seed(0)
    h, w = _dims()
    check_module(Warp().eval(), [torch.randn(1, 3, 32, 24)], tmp_path, dialect=dialect,
                 dynamic_shapes=({2: 8 * h, 3: 8 * w},), run_inputs=[torch.randn(1, 3, 40, 56)])
