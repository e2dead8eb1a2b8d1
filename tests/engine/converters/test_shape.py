"""Shape converters: reshape/flatten/squeeze/unsqueeze, permute/transpose, cat, chunk/split,
slice/select, channel shuffle — checked numerically in ncnn, both dialects."""
import itertools

import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


RESHAPES = {
    "flatten1": lambda x: torch.flatten(x, 1),
    "flatten2": lambda x: torch.flatten(x, 2),
    "flatten_mid": lambda x: torch.flatten(x, 1, 2),
    "flatten_all": lambda x: torch.flatten(x),
    "view_1_-1": lambda x: x.view(1, -1),
    "reshape_c_-1": lambda x: x.reshape(x.size(0), 6, -1),
    "reshape_4d": lambda x: x.reshape(1, 3, 8, 5),
    "reshape_2d": lambda x: x.reshape(-1, 5).unsqueeze(0),
    "unflatten": lambda x: x.flatten(2).unflatten(2, (2, 10)),
    "squeeze_dim": lambda x: x[:, :1].squeeze(1),
    "squeeze_all": lambda x: x[:, :, :1].squeeze().unsqueeze(0),
    "unsqueeze_last": lambda x: x.unsqueeze(-1),
    "unsqueeze_1": lambda x: x.flatten(2).unsqueeze(1),
    "unsqueeze_squeeze": lambda x: x.flatten(2).unsqueeze(2).squeeze(2),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(RESHAPES))
def test_reshape_family(tmp_path, dialect, name):
    check_module(Fn(RESHAPES[name]), [torch.randn(1, 6, 4, 5)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("method", ["reshape_as", "view_as"])
def test_reshape_as(tmp_path, dialect, method):
    """Only the other tensor's shape is read."""
    c = check_module(Fn(lambda x, y: getattr(x, method)(y) * 2), [torch.randn(1, 6, 4, 5), torch.randn(1, 12, 10)],
                     tmp_path, dialect=dialect)
    assert [op.type for op in c.result.ncnn.ops] == ["Input", "Input", "Reshape", "BinaryOp"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_flatten_is_flatten_layer(tmp_path, dialect):
    checked = check_module(nn.Flatten(), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)
    assert [op.type for op in checked.result.ncnn.ops] == ["Input", "Flatten"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dims", [(0,) + p for p in itertools.permutations((1, 2, 3))][1:])
def test_permute_4d(tmp_path, dialect, dims):
    check_module(Fn(lambda x: x.permute(*dims)), [torch.randn(1, 2, 3, 4)], tmp_path, dialect=dialect,
                 expect_types=["Permute"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dims", [(0, 2, 1), (1, 0, 2)])
def test_permute_3d(tmp_path, dialect, dims):
    check_module(Fn(lambda x: x.permute(*dims).permute(*dims).flatten(1)), [torch.randn(1, 5, 7)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dims", list(itertools.permutations((1, 2, 3, 4)))[1::5])
def test_permute_5d_is_4d_in_ncnn(tmp_path, dialect, dims):
    check_module(Fn(lambda x: x.permute(0, *dims)), [torch.randn(1, 2, 3, 4, 5)], tmp_path, dialect=dialect,
                 expect_types=["Permute"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("d0,d1", [(1, 2), (2, 3), (-1, -3), (1, 3)])
def test_transpose(tmp_path, dialect, d0, d1):
    check_module(Fn(lambda x: x.transpose(d0, d1)), [torch.randn(1, 2, 3, 4)], tmp_path, dialect=dialect,
                 expect_types=["Permute"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_transpose_through_batch_axis(tmp_path, dialect):
    check_module(Fn(lambda x: x.transpose(0, 1).transpose(1, 2).transpose(0, 2)), [torch.randn(1, 5, 7)], tmp_path,
                 dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_t(tmp_path, dialect):
    check_module(Fn(lambda x: x.view(4, 5).t().reshape(1, 5, 4)), [torch.randn(1, 4, 5)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("dim", [1, 2, 3, -1])
def test_cat_4d(tmp_path, dialect, n, dim):
    xs = [torch.randn(1, 2 + (k if dim == 1 else 0), 3 + (k if dim == 2 else 0), 4 + (k if dim in (3, -1) else 0))
          for k in range(n)]
    check_module(Fn(lambda *t: torch.cat(t, dim)), xs, tmp_path, dialect=dialect, expect_types=["Concat"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dim", [1, 2])
def test_cat_3d(tmp_path, dialect, dim):
    xs = [torch.randn(1, 3, 4), torch.randn(1, 3, 4)]
    check_module(Fn(lambda a, b: torch.cat([a, b, a], dim)), xs, tmp_path, dialect=dialect, expect_types=["Concat"])


SPLITS = {
    "chunk_c": lambda x: x.chunk(3, 1),
    "chunk_c_uneven": lambda x: x[:, :7].chunk(3, 1),
    "chunk_h": lambda x: x.chunk(2, 2),
    "chunk_w": lambda x: x.chunk(2, -1),
    "split_sizes_c": lambda x: x.split([2, 4, 3], 1),
    "split_int_w": lambda x: x.split(2, 3),
    "split_h_ones": lambda x: x.split(1, 2),
    "unbind_c": lambda x: x[:, :3].unbind(1),
    "tensor_split_sections": lambda x: torch.tensor_split(x, 4, 1),
    "tensor_split_indices": lambda x: torch.tensor_split(x, [2, 5], 1),
    "tensor_split_w": lambda x: x.tensor_split(2, -1),
    "tensor_split_h_indices": lambda x: x.tensor_split((1, 3), dim=2),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(SPLITS))
def test_split_family(tmp_path, dialect, name):
    # core ATen spells unbind as one select per output, tensor_split as slices (Crop layers)
    expect = None if name == "unbind_c" or name.startswith("tensor_split") else ["Slice"]
    check_module(Fn(SPLITS[name]), [torch.randn(1, 9, 4, 5)], tmp_path, dialect=dialect, expect_types=expect)


SLICES = {
    "c_range": lambda x: x[:, 2:7],
    "c_step2": lambda x: x[:, 1:8:2],
    "c_step3_tail": lambda x: x[:, 2::3],
    "h_step2": lambda x: x[:, :, ::2],
    "w_step3": lambda x: x[:, :, :, 1::3],
    "h_negative": lambda x: x[:, :, 1:-1],
    "w_last3": lambda x: x[..., -3:],
    "hw_both": lambda x: x[:, :, 1:, 2:],
    "select_c": lambda x: x[:, 3],
    "select_h_last": lambda x: x[:, :, -1],
    "select_w": lambda x: x[:, :, :, 2],
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(SLICES))
def test_slice_family(tmp_path, dialect, name):
    check_module(Fn(SLICES[name]), [torch.randn(1, 9, 6, 7)], tmp_path, dialect=dialect, expect_types=["Crop"]
                 if name in ("c_range", "h_negative", "w_last3", "hw_both") else None)


GATHERS = {
    "rgb_to_bgr": lambda x: x[:, [2, 1, 0]],
    "channel_runs": lambda x: x[:, [0, 1, 4, 5, 2]],
    "index_select_w": lambda x: x.index_select(3, torch.tensor([4, 0, 1, 1])),
    "negative_h": lambda x: x[:, :, [-1, 0]],
    "one_run": lambda x: x[:, :, :, [1, 2, 3]],
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(GATHERS))
def test_constant_gather(tmp_path, dialect, name):
    check_module(Fn(GATHERS[name]), [torch.randn(1, 6, 4, 5)], tmp_path, dialect=dialect, expect_types=["Crop"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_slices_of_several_dims_are_one_crop(tmp_path, dialect):
    checked = check_module(Fn(lambda x: x[:, 1:8, 2:, :-1]), [torch.randn(1, 9, 6, 7)], tmp_path, dialect=dialect)
    assert [op.type for op in checked.result.ncnn.ops] == ["Input", "Crop"]


SPACE_TO_DEPTH = {
    # YOLOv5's Focus: four interleaved 2-strided slices concatenated on channels
    "focus": lambda x: torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1),
    # Swin's patch merging (NHWC, concatenated on the last dim)
    "patch_merging": lambda x: torch.cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :],
                                          x[..., 1::2, 1::2, :]], -1),
    # the offsets of the second dim varying fastest, stride 3
    "stride3_w_fastest": lambda x: torch.cat([x[:, :, i::3, j::3] for i in range(3) for j in range(3)], 1),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(SPACE_TO_DEPTH))
def test_space_to_depth_slices(tmp_path, dialect, name):
    """Strided slices at every offset concatenated: one Reshape, Permute, Reshape (no Crop,
    Pooling or Concat)."""
    c = check_module(Fn(SPACE_TO_DEPTH[name]), [torch.randn(1, 6, 12, 6)], tmp_path, dialect=dialect,
                     forbid_types=["Concat", "Pooling", "Crop"])
    assert [op.type for op in c.result.ncnn.ops].count("Permute") == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_strided_slices_that_are_not_space_to_depth(tmp_path, dialect):
    check_module(Fn(lambda x: torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2]], 1)),
                 [torch.randn(1, 3, 8, 10)], tmp_path, dialect=dialect, expect_types=["Concat"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", ["steps_3d", "steps_2d"])
def test_strided_slice_lower_rank(tmp_path, dialect, name):
    fn = {"steps_3d": lambda x: x[:, 1::2, ::3], "steps_2d": lambda x: x.flatten(1)[:, 3::4]}[name]
    check_module(Fn(fn), [torch.randn(1, 7, 10)], tmp_path, dialect=dialect)


class ShuffleBlock(nn.Module):
    """torchvision's ShuffleNetV2 channel shuffle: view → transpose → contiguous → view."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, x):
        b, c, h, w = x.size()
        x = x.view(b, self.groups, c // self.groups, h, w)
        x = torch.transpose(x, 1, 2).contiguous()
        return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    """A ShuffleNetV2 stride-1 unit: chunk, a branch on one half, cat, channel shuffle."""

    def __init__(self, c):
        super().__init__()
        self.branch = nn.Conv2d(c // 2, c // 2, 1)
        self.shuffle = ShuffleBlock(2)

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        return self.shuffle(torch.cat((a, self.branch(b)), dim=1))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("groups", [2, 3])
def test_channel_shuffle_pattern(tmp_path, dialect, groups):
    checked = check_module(ShuffleBlock(groups), [torch.randn(1, 12, 3, 4)], tmp_path, dialect=dialect,
                           expect_types=["ShuffleChannel"])
    assert len(checked.result.ncnn.ops) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_channel_shuffle_module(tmp_path, dialect):
    check_module(nn.ChannelShuffle(3), [torch.randn(1, 12, 3, 4)], tmp_path, dialect=dialect,
                 expect_types=["ShuffleChannel"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("groups", [2, 3])
def test_channel_shuffle_5d(tmp_path, dialect, groups):
    """(N, C, D, H, W): ShuffleChannel moves whole channels of the 4-D blob."""
    checked = check_module(nn.ChannelShuffle(groups), [torch.randn(1, 12, 2, 3, 4)], tmp_path, dialect=dialect)
    assert [op.type for op in checked.result.ncnn.ops] == ["Input", "ShuffleChannel"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_shufflenet_unit(tmp_path, dialect):
    check_module(ShuffleUnit(8), [torch.randn(1, 8, 5, 5)], tmp_path, dialect=dialect,
                 expect_types=["ShuffleChannel", "Slice", "Concat"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_noop_expand_as_removed(tmp_path, dialect):
    checked = check_module(Fn(lambda x: x.expand_as(x).flatten(1)), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)
    assert [op.type for op in checked.result.ncnn.ops] == ["Input", "Flatten"]


DYNAMIC = {
    "flatten": lambda x: torch.flatten(x, 1),
    "view_keep_c": lambda x: x.view(x.size(0), x.size(1), -1),
    "slice_h": lambda x: x[:, :, 1:],
    "cat_w": lambda x: torch.cat([x, x], 3),
    "chunk_c": lambda x: x.chunk(2, 1)[1],
    "permute": lambda x: x.permute(0, 2, 3, 1),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(DYNAMIC))
def test_dynamic_spatial_size(tmp_path, dialect, name):
    """Symbolic H/W: reshapes copy or infer the dynamic dims (0 / -1), slices end at -233."""
    h, w = torch.export.Dim("h", min=4, max=64), torch.export.Dim("w", min=4, max=64)
    check_module(Fn(DYNAMIC[name]), [torch.randn(1, 4, 8, 10)], tmp_path, dialect=dialect,
                 dynamic_shapes=(({2: h, 3: w},),), run_inputs=[torch.randn(1, 4, 12, 14)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_select_and_slice_of_the_batch_axis(tmp_path, dialect):
    """x[0] / x[0:1] / x[-1:] of a batch of one keep all the data: no layer but reshapes."""
    check_module(Fn(lambda x: (x[0:1, 1:] + x[-1:, :-1]).flatten(1)[0].unsqueeze(0)), [torch.randn(1, 3, 4, 5)],
                 tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cat_along_batch_axis(tmp_path, dialect):
    """Concatenating along the batch axis makes it data: the batch becomes a dim first."""
    check_module(Fn(lambda x: torch.cat([x, x * 2], 0)), [torch.randn(1, 3, 4, 4)], tmp_path, dialect=dialect)


class ChannelsLastPoolHead(nn.Module):
    """ConvNeXt's head: a LayerNorm between permutes, then a global average pool. Core ATen's
    pooling decomposition re-strides the (1, C, 1, 1) mean channels-last with aten.as_strided."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm, self.fc = nn.Conv2d(3, 8, 3), nn.LayerNorm(8), nn.Linear(8, 4)

    def forward(self, x):
        y = self.norm(self.conv(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.fc(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_as_strided_that_is_a_view(tmp_path, dialect):
    check_module(ChannelsLastPoolHead(), [torch.randn(1, 3, 8, 8)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("size,stride", [((1, 4, 2), (8, 1, 4)), ((1, 2, 2), (8, 4, 2))],
                         ids=["transposing", "skipping"])
def test_as_strided_that_moves_elements_is_refused(tmp_path, size, stride):
    from engine.convert import convert
    from tests.harness import export_pt2

    pt2 = export_pt2(Fn(lambda x: torch.as_strided(x * 2, size, stride) + 1), [torch.randn(1, 2, 4)], tmp_path / "m.pt2")
    result = convert(str(pt2))
    assert not result.ok
    reasons = [d.reason for d in result.errors]
    assert any("as_strided(size=" in r and "only a re-striding that is a plain view converts" in r for r in reasons), reasons
