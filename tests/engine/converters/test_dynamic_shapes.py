"""Packages exported with ``torch.export.Dim``: the converted ncnn model keeps the dynamic dims
dynamic (Reshape 0 = copy, -1 = infer; crops to the end) and runs at other sizes within the
exported range — each model here runs in ncnn at two sizes and matches PyTorch at both."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, check_module, export_pt2, rel_error, run_ncnn


class ConvNet(nn.Module):
    """Conv/BN/ReLU, a strided conv, a residual, a channel attention (global pooling), an
    upsample, a concat, a channel-wise flatten to (N, C, H*W) and back."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.body = nn.Conv2d(16, 16, 3, padding=1)
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 4, 1), nn.ReLU(), nn.Conv2d(4, 16, 1),
                                nn.Sigmoid())
        self.head = nn.Conv2d(24, 5, 1)

    def forward(self, x):
        s = self.stem(x)
        y = self.down(s)
        y = y + self.body(F.relu(y))
        y = y * self.se(y)
        n, c = y.shape[:2]
        y = y.flatten(2).softmax(-1).view(n, c, y.shape[2], y.shape[3]) * y
        up = F.interpolate(y, scale_factor=2.0, mode="nearest")
        return self.head(torch.cat([s, up], 1))


class SequenceModel(nn.Module):
    """A pre-norm transformer block on (1, L, D) with L dynamic: LayerNorm, multi-head
    self-attention, a GELU MLP, residuals, then a mean over the sequence."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.norm2(x))
        return x, self.head(x.mean(1))


class HeadSplit(nn.Module):
    """Attention written out by hand: qkv projection, head split through a 5-D view with the
    sequence length dynamic, scaled scores, softmax, merge."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.heads = heads

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = (q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5).softmax(-1)
        return (a @ v).transpose(1, 2).reshape(b, n, d)


def _randomize(model):
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return model.eval()


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("size", [(12, 20), (24, 16)])
def test_conv_net_with_dynamic_height_and_width(tmp_path, dialect, size):
    h, w = torch.export.Dim("h", min=4, max=64), torch.export.Dim("w", min=4, max=64)
    check_module(_randomize(ConvNet()), [torch.randn(1, 3, 16, 16)], tmp_path, dialect=dialect,
                 dynamic_shapes=({2: 2 * h, 3: 2 * w},), run_inputs=[torch.randn(1, 3, *size)])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [5, 23])
def test_sequence_model_with_dynamic_length(tmp_path, dialect, length):
    n = torch.export.Dim("n", min=2, max=128)
    c = check_module(SequenceModel().eval(), [torch.randn(1, 11, 32)], tmp_path, dialect=dialect,
                     dynamic_shapes=({1: n},), run_inputs=[torch.randn(1, length, 32)])
    reshapes = [op for op in c.result.ncnn.ops if op.type == "Reshape"]
    assert all("11" not in str(op.params.values()) for op in reshapes), "a reshape froze the traced length"


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [3, 17])
def test_hand_written_attention_with_dynamic_length(tmp_path, dialect, length):
    n = torch.export.Dim("n", min=2, max=64)
    check_module(HeadSplit().eval(), [torch.randn(1, 9, 16)], tmp_path, dialect=dialect,
                 dynamic_shapes=({1: n},), run_inputs=[torch.randn(1, length, 16)])


class PositionSlice(nn.Module):
    """A learned position table sliced to the run-time sequence length: an ncnn Crop that measures
    the input (or, with ``--inputshape``, a constant slice)."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, 64, 16))

    def forward(self, x):
        return x + self.pos[:, : x.shape[1]]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [3, 9, 40])
def test_slice_to_a_runtime_size(tmp_path, dialect, length):
    n = torch.export.Dim("n", min=2, max=64)
    check_module(PositionSlice().eval(), [torch.randn(1, 9, 16)], tmp_path, dialect=dialect,
                 dynamic_shapes=({1: n},), run_inputs=[torch.randn(1, length, 16)], expect_types=["Crop"])


def test_input_shape_binds_the_size(tmp_path):
    n = torch.export.Dim("n", min=2, max=64)
    pt2 = export_pt2(PositionSlice().eval(), [torch.randn(1, 9, 16)], tmp_path / "m.pt2", dynamic_shapes=({1: n},))
    bound = convert(str(pt2), ConvertOptions(input_shapes=[[1, 12, 16]], lint=True))
    assert bound.ok, bound.errors
    param, bin_ = tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin"
    bound.write(param, bin_, tmp_path / "m.pnnx.param", tmp_path / "m.pnnx.bin")
    assert all(len(op.inputs) == 1 for op in bound.ncnn.ops if op.type == "Crop"), "a bound size is a constant"
    model = torch.export.load(str(pt2)).module()
    x = torch.randn(1, 12, 16)
    got, = run_ncnn(param, bin_, [x[0].numpy()], 1)
    assert rel_error(got, model(x)[0].detach().numpy()) < 1e-5


class MaskedAttention(nn.Module):
    """SDPA with an additive float mask input ``(1, 1, L, L)``, L dynamic."""

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [6, 17])
def test_attention_with_a_mask_of_dynamic_length(tmp_path, dialect, length):
    n = torch.export.Dim("n", min=2, max=64)

    def inputs(L):
        mask = torch.zeros(1, 1, L, L)
        mask[..., L // 2:] = -1e4
        return [torch.randn(1, 2, L, 8), torch.randn(1, 2, L, 8), torch.randn(1, 2, L, 8), mask]

    check_module(MaskedAttention(), inputs(9), tmp_path, dialect=dialect,
                 dynamic_shapes=({2: n}, {2: n}, {2: n}, {2: n, 3: n}), run_inputs=inputs(length))


class ComputedSizes(nn.Module):
    """Interpolation to sizes computed from the inputs' sizes at run time."""

    def forward(self, x, y):
        a = F.interpolate(x, size=(x.size(2) // 2, y.size(3) * 2), mode="nearest")
        b = F.interpolate(x, size=(y.size(2) + 2, x.size(3) - 1), mode="bilinear", align_corners=True)
        c = F.interpolate(y.flatten(2), size=x.size(2) * 3, mode="linear", align_corners=False)
        return a, b, c


@pytest.mark.parametrize("dialect", ["training"])  # core ATen decomposes these into run-time index maths
@pytest.mark.parametrize("sizes", [((20, 14), (6, 9)), ((12, 30), (11, 4))])
def test_interpolate_to_sizes_computed_at_run_time(tmp_path, dialect, sizes):
    (h, w), (h2, w2) = sizes
    dims = [torch.export.Dim(n, min=4, max=64) for n in ("h", "w", "h2", "w2")]
    c = check_module(ComputedSizes(), [torch.randn(1, 3, 16, 10), torch.randn(1, 2, 5, 7)], tmp_path,
                     dialect=dialect, dynamic_shapes=({2: dims[0], 3: dims[1]}, {2: dims[2], 3: dims[3]}),
                     run_inputs=[torch.randn(1, 3, h, w), torch.randn(1, 2, h2, w2)])
    assert all(9 in op.params for op in c.result.ncnn.ops_of_type("Interp"))  # size_expr


class RunTimeBounds(nn.Module):
    """pnnx's ``test_ncnn_slice_expr``: a select at an index computed from sizes, and slice ends
    that are negative floor divisions (Python floors ``-39 // 7`` to -6; C truncates to -5)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 1)

    def forward(self, x, y):
        z = self.conv(y)
        a = x[..., x.size(1) // 3] * 2.0
        b = z[:, :, z.size(2) // 3, 1:-z.size(3) // 7] * 1.5
        c = z[..., : -z.size(3) // 10, z.size(3) // 8: -z.size(3) // 8] * -1.0
        return a, b, c


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("sizes", [((7, 10), (39, 16)), ((7, 25), (15, 33))])
def test_run_time_select_and_negative_floor_divisions(tmp_path, dialect, sizes):
    (r, n), (h, w) = sizes
    auto = torch.export.Dim.AUTO
    check_module(RunTimeBounds().eval(), [torch.randn(7, 10), torch.randn(1, 3, 39, 16)], tmp_path, dialect=dialect,
                 dynamic_shapes=({1: auto}, {2: auto, 3: auto}),
                 run_inputs=[torch.randn(r, n), torch.randn(1, 3, h, w)], expect_types=["Crop"])


class BatchThroughRunTimeReshapes(nn.Module):
    """The batch axis moved inside the tensor and back while both spatial sizes are dynamic (as in
    pnnx's ``test_ncnn_solve_batch_index``): rows regrouped by a count computed from the height,
    the batch carried as an inner axis, then put first again. Two dims of the middle reshape
    are computed at run time, so ncnn's batch-aware ``Reshape`` evaluates a shape expression over
    the batch count."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 1)

    def forward(self, x):
        y = self.conv(x).permute(2, 3, 0, 1)  # (H, W, N, 6)
        y = y.reshape(-1, y.size(0) // 4, y.size(2), 2, 3).transpose(0, 1)  # (H//4, H*W/(H//4), N, 2, 3)
        y = y.reshape(-1, y.size(2), 6).permute(1, 2, 0)  # (N, 6, H*W)
        return torch.sigmoid(y.reshape(y.size(0), 1, -1))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("batch", [1, 2])
def test_batch_moved_through_reshapes_with_two_run_time_dims(tmp_path, dialect, batch):
    auto = torch.export.Dim.AUTO
    checked = check_module(BatchThroughRunTimeReshapes().eval(), [torch.randn(batch, 3, 16, 12)], tmp_path,
                           dialect=dialect, dynamic_shapes=({2: auto, 3: auto},),
                           run_inputs=[torch.randn(batch, 3, 24, 20)], expect_types=["Reshape"])
    assert [spec["batch_dim"] for spec in checked.result.ncnn.meta["outputs"]] == [0]


class AtLeastSix(nn.Module):
    """Lengths computed with ``max``/``min`` of a run-time size (``torch.sym_max``, as MPT's
    ALiBi window): a table cut to ``max(n, 6)`` and to ``min(n, 5)`` rows. ncnn's shape expressions spell it ``max``;
    pnnx's ``maximum`` made the runtime fail ("malformed literal token maximum")."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(64, 8))

    def forward(self, x):
        n = x.shape[1]
        return self.table[: torch.sym_max(n, 6)] * 2.0, self.table[: torch.sym_min(n, 5)] + x.sum()


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [3, 11])
def test_sizes_computed_with_max_and_min(tmp_path, dialect, length):
    n = torch.export.Dim("n", min=2, max=32)
    check_module(AtLeastSix(), [torch.randn(1, 9, 8)], tmp_path, dialect=dialect, dynamic_shapes=({1: n},),
                 run_inputs=[torch.randn(1, length, 8)])
