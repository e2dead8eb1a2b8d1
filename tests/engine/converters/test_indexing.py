"""Indexing and masking: roll, flip, constant-index gathers, masked_fill / where / tril / triu with
constant masks, in-place writes through views (x[a:b] = v), slice/select scatter, stack,
narrow, swapaxes/movedim, expand/repeat/tile — numerically in ncnn, both dialects — and the
refusals of what ncnn cannot compute (comparisons of activations)."""
import pytest
import torch

from engine.convert import convert
from tests.harness import DIALECTS, Fn, check_module, export_pt2


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


ROLLS = {
    "hw": lambda x: torch.roll(x, shifts=(-2, 3), dims=(1, 2)),
    "c": lambda x: torch.roll(x, 1, 3),
    "negative_dim": lambda x: torch.roll(x, shifts=7, dims=-2),
    "zero_shift": lambda x: torch.roll(x, shifts=(6, 0), dims=(1, 2)) + 1,
    "flat": lambda x: torch.roll(x, 7),
    "batch": lambda x: torch.roll(x, 1, 0) * 2,
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(ROLLS))
def test_roll(tmp_path, dialect, name):
    c = check_module(Fn(ROLLS[name]), [torch.randn(1, 6, 5, 4)], tmp_path, dialect=dialect)
    if name == "hw":  # a Slice (or, from core ATen's slices, two Crops) and a Concat per dim
        assert _types(c).count("Concat") == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dims", [(1,), (2, 3), (-1,), (0, 2)])
def test_flip(tmp_path, dialect, dims):
    c = check_module(Fn(lambda x: torch.flip(x, dims)), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)
    assert "Flip" in _types(c)


GATHERS = {
    "dim0_of_a_table": lambda x: x.reshape(6, 20)[torch.tensor([5, 0, 2, 2])].reshape(1, -1),
    "two_dim_index": lambda x: x[:, torch.tensor([[0, 2], [1, 1], [5, 3]])],
    "last_dim_matrix": lambda x: x[..., torch.tensor([[4, 0], [1, 2]])],
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(GATHERS))
def test_constant_index_gather(tmp_path, dialect, name):
    check_module(Fn(GATHERS[name]), [torch.randn(1, 6, 4, 5)], tmp_path, dialect=dialect)


class RelativeBias(torch.nn.Module):
    """Swin's relative position bias: a parameter table indexed by a constant buffer folds to one
    constant."""

    def __init__(self, w=3, heads=2):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn((2 * w - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
        self.register_buffer("index", (rel[..., 0] * (2 * w - 1) + rel[..., 1]).flatten())
        self.n = w * w

    def forward(self, x):
        bias = self.table[self.index].view(self.n, self.n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        return x + bias


@pytest.mark.parametrize("dialect", DIALECTS)
def test_relative_position_bias_folds(tmp_path, dialect):
    c = check_module(RelativeBias(), [torch.randn(1, 2, 9, 9)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "MemoryData", "BinaryOp"]


MASKS = {
    "masked_fill_inf": lambda x: x.masked_fill(torch.tensor([[True, False, False, True, False]]), float("-inf"))
    .softmax(-1),
    "masked_fill_value": lambda x: x.masked_fill(torch.arange(5) > 2, 3.5),
    "where_tensor": lambda x: torch.where(torch.arange(20).view(4, 5) % 3 == 0, x, x * 2),
    "where_scalar_other": lambda x: torch.where(torch.eye(4, 5, dtype=torch.bool), x, 0.25),
    "where_scalar_self": lambda x: torch.where(torch.eye(4, 5, dtype=torch.bool), -1.0, x),
    # a constant tensor branch (DETR's core-ATen decoder mask): its selected part is precomputed
    "where_constant_tensor": lambda x: torch.where(torch.eye(4, 5, dtype=torch.bool), torch.arange(5.0) - 2, x),
    "tril": lambda x: torch.tril(x),
    "triu_offset": lambda x: torch.triu(x, 1),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(MASKS))
def test_constant_masks(tmp_path, dialect, name):
    check_module(Fn(MASKS[name]), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)


class CausalMasked(torch.nn.Module):
    """GPT-style: a tril buffer sliced to the sequence length, compared and masked_fill."""

    def __init__(self, n=8):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

    def forward(self, att):
        t = att.shape[-1]
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        return torch.softmax(att, -1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_causal_masked_fill_from_buffer(tmp_path, dialect):
    check_module(CausalMasked(), [torch.randn(1, 2, 6, 6)], tmp_path, dialect=dialect)


class ShiftedWindowMask(torch.nn.Module):
    """Swin's attention mask: slices of new_zeros filled in place, a window partition, a
    pairwise difference, ne/eq and masked_fill — all constant."""

    def forward(self, x):
        mask = x.new_zeros((8, 8))
        count = 0
        for h in ((0, -4), (-4, -2), (-2, None)):
            for w in ((0, -4), (-4, -2), (-2, None)):
                mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        mask = mask.view(2, 4, 2, 4).permute(0, 2, 1, 3).reshape(4, 16)
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, float(-100.0)).masked_fill(mask == 0, float(0.0))
        return x + mask.unsqueeze(0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_shifted_window_mask_is_one_constant(tmp_path, dialect):
    c = check_module(ShiftedWindowMask(), [torch.randn(1, 4, 16, 16)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "MemoryData", "BinaryOp"]


WRITES = {
    "slice_fill": lambda x: _write(x, lambda y: y[:, 1:3].fill_(0.5)),
    "select_add": lambda x: _write(x, lambda y: y[:, :, 2].add_(1.0)),
    "strided_view": lambda x: _write(x, lambda y: y.view(1, 3, 20)[:, :, 5:10].mul_(3.0)),
    "copy_from_constant": lambda x: _write(x, lambda y: y[:, 0, :, :2].copy_(torch.ones(4, 2))),
}


def _write(x, fn):
    y = x * 1.0
    fn(y)
    return y + 0.0


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(WRITES))
def test_in_place_writes_through_views(tmp_path, dialect, name):
    check_module(Fn(WRITES[name]), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)


SHAPES = {
    "swapaxes": lambda x: torch.swapaxes(x, 1, 3),
    "swapdims": lambda x: torch.swapdims(x, -1, -2),
    "movedim": lambda x: torch.movedim(x, 1, -1),
    "movedim_list": lambda x: torch.movedim(x, (1, 2), (3, 1)),
    "narrow": lambda x: x.narrow(2, 1, 2),
    "narrow_negative": lambda x: x.narrow(-1, -3, 2),
    "stack_inner": lambda x: torch.stack([x, x * 2, x + 1], dim=2),
    "stack_last": lambda x: torch.stack([x[0], x[0] * 2], dim=-1).unsqueeze(0),
    "expand": lambda x: x[:, :, :1].expand(1, 3, 4, 5) + x,
    "expand_new_dims": lambda x: x[0, 0, 0].expand(3, 2, 5).unsqueeze(0),
    "repeat": lambda x: x.repeat(1, 2, 1, 3),
    "repeat_more_dims": lambda x: x[0].repeat(1, 2, 1, 2),
    "tile": lambda x: torch.tile(x, (2, 1)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(SHAPES))
def test_shape_ops(tmp_path, dialect, name):
    c = check_module(Fn(SHAPES[name]), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)
    if name in ("expand", "repeat", "tile"):
        assert "Tile" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_slice_and_select_scatter(tmp_path, dialect):
    """Core ATen's form of in-place writes, on an activation."""
    def f(x):
        y = torch.slice_scatter(x, torch.zeros(1, 3, 2, 5), dim=2, start=1, end=3)
        return torch.select_scatter(y, x[:, :, 0] * 2, dim=2, index=-1)

    check_module(Fn(f), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)


def _keypoints(k):
    """A pose head's keypoint decode (Ultralytics YOLO): every third channel rewritten in place."""
    y = k.clone()
    y[:, 2::3] = y[:, 2::3].sigmoid()
    y[:, 0::3] = y[:, 0::3] * 2.0 - 0.5
    y[:, 1::3] = y[:, 1::3] * 3.0
    return y


def _uneven(x):
    y = x * 1.0
    y[:, :, 1:10:4] = x[:, :, 1:10:4] * -1  # positions 1, 5, 9 of 11: a kept tail
    y[:, 3::5] = 0.5 * x[:, 3::5]  # 3, 8 of 12
    y[..., 4::7] = 7.0  # one position only
    return y


STRIDED_WRITES = {"keypoints": (_keypoints, (1, 51, 40)), "uneven": (_uneven, (1, 12, 11, 5))}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(STRIDED_WRITES))
def test_strided_writes(tmp_path, dialect, name):
    """``y[:, 0::3] = ...``: slice_scatter with a step, as slices, views and concats (no scatter)."""
    fn, shape = STRIDED_WRITES[name]
    c = check_module(Fn(fn), [torch.randn(*shape)], tmp_path, dialect=dialect)
    assert "Concat" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_strided_writes_with_a_dynamic_batch_and_length(tmp_path, dialect):
    batch, length = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("length", min=2, max=64)
    check_module(Fn(_keypoints), [torch.randn(2, 51, 40)], tmp_path, dialect=dialect,
                 dynamic_shapes=(({0: batch, 2: length},),), run_inputs=[torch.randn(3, 51, 17)])


class PoseHead(torch.nn.Module):
    """Keypoints by anchor from a feature map of dynamic height and width, decoded in place."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 51, 3, 2, 1)

    def forward(self, x):
        return _keypoints(self.conv(x).view(1, 51, -1))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_strided_reads_and_writes_of_a_dynamic_number_of_anchors(tmp_path, dialect):
    """The keypoints ``(51, anchors)`` blob, the anchors' count dynamic: its strided slices were
    refused (only a 3-D blob's h or w pooled with a dynamic size)."""
    h, w = torch.export.Dim("h", min=2, max=32), torch.export.Dim("w", min=2, max=32)
    torch.manual_seed(0)
    check_module(PoseHead().eval(), [torch.randn(1, 3, 16, 24)], tmp_path, dialect=dialect,
                 dynamic_shapes=({2: 8 * h, 3: 8 * w},), run_inputs=[torch.randn(1, 3, 40, 32)])


GATHER_DIM = {
    "channels": lambda x: torch.gather(x, 1, torch.tensor([2, 0, 0]).view(1, 3, 1, 1).expand(1, 3, 4, 5)),
    "smaller_block": lambda x: torch.gather(x, 3, torch.tensor([4, 1]).view(1, 1, 1, 2).expand(1, 2, 3, 2)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(GATHER_DIM))
def test_gather_with_constant_index(tmp_path, dialect, name):
    check_module(Fn(GATHER_DIM[name]), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)


_PERM = torch.randperm(40, generator=torch.Generator().manual_seed(3))
OUTER = {
    # one constant vector per dim, broadcast as an outer product (core ATen's resizes)
    "rows_cols": lambda x: x[:, :, torch.tensor([3, 3, 0, 2])[:, None], torch.tensor([4, 1, 1, 0, 2])],
    "many_runs_last_dim": lambda x: x[:, :, :, _PERM % 5],
    "many_runs_two_dims": lambda x: x[:, :, (_PERM % 4)[:, None], _PERM[:7] % 5],
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(OUTER))
def test_outer_product_and_many_run_gathers(tmp_path, dialect, name):
    """Constant gathers convert one dim at a time; one of many runs is a single one-hot MatMul
    instead of a Crop per run."""
    c = check_module(Fn(OUTER[name]), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)
    if name.startswith("many_runs"):
        types = [op.type for op in c.result.ncnn.ops]
        assert "MatMul" in types and types.count("Crop") <= 4, types


def _relative_index(q: int, k: int, span: int, log_buckets: bool = False) -> torch.Tensor:
    """DeBERTa's relative positions: ``q - k`` clamped to the span (or log-bucketed far away)."""
    rel = torch.arange(q)[:, None] - torch.arange(k)[None, :]
    if log_buckets:  # DeBERTa-v2's make_log_bucket_position, small
        mid = span // 2
        far = torch.sign(rel) * (mid + torch.ceil(torch.log(rel.abs().float() / mid + 1e-6) * 1.5)).long()
        rel = torch.where(rel.abs() <= mid, rel, far)
    return torch.clamp(rel + span, 0, 2 * span - 1)


def _relative_gather_model(q, k, span, heads, log_buckets=False):
    idx = _relative_index(q, k, span, log_buckets)
    return Fn(lambda x: torch.gather(x * 1.5, -1, idx.unsqueeze(0).expand(heads, q, k)) + 1)


RELATIVE = {  # (Q, K, span, heads, log buckets)
    "square": (6, 6, 4, 1, False),
    "heads_wide_table": (5, 7, 6, 4, False),
    "two_rows": (2, 5, 3, 2, False),
    "log_buckets": (12, 12, 8, 2, True),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(RELATIVE))
def test_gather_by_relative_position(tmp_path, dialect, name):
    """A constant gather index that depends only on ``q - k`` (DeBERTa's disentangled attention)."""
    q, k, span, heads, log_buckets = RELATIVE[name]
    check_module(_relative_gather_model(q, k, span, heads, log_buckets), [torch.randn(heads, q, 2 * span)],
                 tmp_path, dialect=dialect, forbid_types=["Gather"])


def test_gather_by_an_index_that_is_not_relative_is_refused(tmp_path):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    idx = torch.randint(0, 8, (1, 6, 6), generator=torch.Generator().manual_seed(1))
    pt2 = export_pt2(Fn(lambda x: torch.gather(x, -1, idx.expand(2, 6, 6))), [torch.randn(2, 6, 8)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions())
    assert [(d.op, d.reason) for d in result.errors] == [
        ("aten.gather.default", "unsupported: gather with a run-time index or one that differs along other dims")]
