"""The per-value batch layout, end to end: models whose leading axes are not a batch of 1.

Each model is exported with real ``torch.export`` (both dialects), converted, run in ncnn with
every input fed and every output read along the batch axis the converter chose
(``ncnn.Mat(x, batch_index=b)``, see ``tests/harness.py``) and compared with PyTorch in full
shape. The cases are the ones a single "dim 0 is the batch" rule gets wrong: plain matrices,
inputs without a batch, batches larger than one, a batch axis that moves, merges into another
dim or comes back out of one.
"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


def _r(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape) + len(shape)))


def _batches(c) -> list:
    return [d["batch_dim"] for d in c.result.ncnn.meta["inputs"]]


# ----------------------------------------------------------------------------- no batch at all
_BIAS = _r(35)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fn", [torch.mm, torch.matmul, lambda a, b: torch.addmm(_BIAS, a, b, beta=0.5)],
                         ids=["mm", "matmul", "addmm"])
def test_plain_matrix_products_keep_every_row(tmp_path, dialect, fn):
    c = check_module(Fn(fn), [_r(23, 14), _r(14, 35)], tmp_path, dialect=dialect)
    assert _batches(c) == [None, None]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fn", [
    lambda x: torch.flip(x, [0]), lambda x: torch.roll(x, 1, 0), lambda x: torch.prod(x, 0),
    lambda x: torch.flatten(x), lambda x: x.repeat(3, 1), lambda x: x.unflatten(0, (2, 3)),
    lambda x: x[1:5], lambda x: x.softmax(0), lambda x: x.t() @ x,
], ids=["flip", "roll", "prod", "flatten", "repeat", "unflatten", "slice", "softmax", "gram"])
def test_leading_axis_larger_than_one_is_data(tmp_path, dialect, fn):
    check_module(Fn(fn), [_r(6, 12)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fn", [
    lambda x, y: torch.cat([x, y], 0), lambda x, y: torch.stack([x, y], 0), lambda x, y: torch.maximum(x, y),
    lambda x, y: torch.minimum(x, y), lambda x, y: torch.atan2(x, y), lambda x, y: x + y.transpose(0, 1),
], ids=["cat", "stack", "maximum", "minimum", "atan2", "x_plus_yT"])
def test_binary_ops_on_unbatched_tensors(tmp_path, dialect, fn):
    check_module(Fn(fn), [_r(4, 4, 5), _r(4, 4, 5)], tmp_path, dialect=dialect)


# ----------------------------------------------------------------------------- batches of more than one
class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(F.relu(self.conv(x)), 1).flatten(1))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_batch_of_four_runs_as_an_ncnn_batch(tmp_path, dialect):
    c = check_module(ConvNet(), [_r(4, 3, 10, 10)], tmp_path, dialect=dialect)
    assert _batches(c) == [0] and not c.result.diagnostics


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batch_found_behind_a_permute(tmp_path, dialect):
    """The pooled tensor's batch is the input's dim 1: fed that way, nothing is converted."""
    c = check_module(Fn(lambda x: F.max_pool2d(x.permute(1, 0, 2, 3), 3, 1, 1)), [_r(2, 3, 5, 7)], tmp_path,
                     dialect=dialect, forbid_types=["Permute"])
    assert _batches(c) == [1]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fn", [
    lambda x: F.max_pool2d(x.reshape(3, 2, 5, 7).permute(1, 0, 2, 3), 3, 1, 1),
    lambda x: F.max_pool2d(x.unflatten(0, (3, 2)).permute(1, 2, 0, 3), 3, 1, 1),
], ids=["reshape_permute", "unflatten_permute"])
def test_batch_split_out_of_a_data_axis(tmp_path, dialect, fn):
    """(6, 5, 7) → (3, 2, 5, 7): the 2 that pooling takes as its batch is carved out of dim 0."""
    check_module(Fn(fn), [_r(6, 5, 7)], tmp_path, dialect=dialect)


class PackedBatch(nn.Module):
    """The batch of 2 is merged into channels between two convolutions and split off again."""

    def __init__(self):
        super().__init__()
        self.conv0 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv1 = nn.Conv2d(4, 8, 1)

    def forward(self, x):
        return self.conv1(torch.flatten(self.conv0(x), 0, 1).reshape(4, 4, 5, 7))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batch_merged_into_channels_and_split_again(tmp_path, dialect):
    c = check_module(PackedBatch(), [_r(2, 3, 5, 7)], tmp_path, dialect=dialect)
    reshapes = [op for op in c.result.ncnn.ops if op.type == "Reshape" and (12 in op.params or 13 in op.params)]
    assert reshapes  # the batch moved by ncnn's Reshape, not assumed to be 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_reduction_and_softmax_across_the_batch(tmp_path, dialect):
    def fn(x):
        y = F.max_pool2d(x, 1)
        return y.softmax(0), y.sum(0), y.mean(0, keepdim=True)

    check_module(Fn(fn), [_r(3, 4, 5, 6)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_constant_varying_along_the_batch(tmp_path, dialect):
    """A constant cannot be an ncnn batch: the batched value is converted before the add."""
    w = _r(3, 1, 1, 1)
    check_module(Fn(lambda x: F.max_pool2d(x, 1) * w), [_r(3, 4, 5, 6)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_broadcast_against_a_batch(tmp_path, dialect):
    def fn(x, y):
        return F.max_pool2d(x, 1) + y.reshape(4, 1, 1)  # y has no batch: broadcast over it

    check_module(Fn(fn), [_r(2, 4, 5, 7), _r(4)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cat_and_split_along_the_batch(tmp_path, dialect):
    def fn(x, y):
        x, y = F.max_pool1d(x, 1), F.max_pool1d(y, 1)
        a, b = torch.split(torch.cat([x, y], 0), [2, 3], 0)
        return a * 2, b.unbind(0)[1]

    check_module(Fn(fn), [_r(2, 4, 5), _r(3, 4, 5)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dynamic_batch(tmp_path, dialect):
    """Exported with a dynamic batch, the model runs at other batch sizes as an ncnn batch."""
    batch = torch.export.Dim("batch", min=1, max=16)
    for n in (2, 5):
        check_module(ConvNet(), [_r(3, 3, 10, 10)], tmp_path, dialect=dialect, name=f"dyn{n}",
                     dynamic_shapes=({0: batch},), run_inputs=[_r(n, 3, 10, 10)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_output_whose_batch_moved(tmp_path, dialect):
    """conv(x).permute(1, 0, 2, 3) is the conv's blob read with its batch at dim 1."""
    conv = nn.Conv2d(3, 4, 1)
    c = check_module(Fn(lambda w: conv(w).permute(1, 0, 2, 3)), [_r(2, 3, 5, 7)], tmp_path, dialect=dialect)
    assert [d["batch_dim"] for d in c.result.ncnn.meta["outputs"]] == [1]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_normalize_a_batch(tmp_path, dialect):
    """F.normalize expands the (N, 1, H, W) norm over channels of a batch of two."""
    check_module(Fn(lambda x: F.normalize(F.max_pool2d(x, 1), dim=1)), [_r(2, 3, 5, 7)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_one_expanded_along_the_batch_and_read_unbatched(tmp_path, dialect):
    """A (1, C, L) input expanded to (4, C, L) then weighted per row by a constant: the
    expanded value is really replicated (Tile, then the rows moved into a batch when it is one),
    never a one-sample blob standing for four."""
    fn = Fn(lambda x: (x.expand(4, 3, 5) * torch.arange(1.0, 5.0).view(4, 1, 1)).sum(0))
    check_module(fn, [torch.randn(1, 3, 5)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_reshape_to_five_dims_makes_dim_0_the_batch(tmp_path, dialect):
    """A (2, 360) input viewed as (2, 3, 4, 5, 6): five dims are one more than a blob holds, so
    dim 0 becomes the batch (two samples of (3, 4, 5, 6)), computed and read back as such."""
    c = check_module(Fn(lambda x: x.reshape(2, 3, 4, 5, 6) * 2), [torch.randn(2, 360)], tmp_path, dialect=dialect)
    assert c.result.ncnn.meta["outputs"][0]["batch_dim"] == 0


# ----------------------------------------------------------------------------- tokens as the batch
class TokenNormAttention(nn.Module):
    """LeViT's attention: ``Linear`` + a BatchNorm1d over the flattened tokens (which makes the
    tokens an ncnn batch), then products of per-head matrices along that token axis."""

    def __init__(self, dim=32, heads=4, key=4, n=9):
        super().__init__()
        self.heads, self.key = heads, key
        self.qkv, self.bn = nn.Linear(dim, heads * 4 * key, bias=False), nn.BatchNorm1d(heads * 4 * key)
        self.proj = nn.Linear(heads * 2 * key, dim)
        self.register_buffer("bias", _r(heads, n, n))
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5), self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        b, n, _ = x.shape
        y = F.hardswish(self.qkv(x))  # keeps the norm from folding into the linear layer
        y = self.bn(y.flatten(0, 1)).reshape_as(y)
        q, k, v = y.view(b, n, self.heads, -1).split([self.key, self.key, 2 * self.key], dim=3)
        attn = (q.permute(0, 2, 1, 3) @ k.permute(0, 2, 3, 1)) * 0.5 + self.bias
        out = (attn.softmax(-1) @ v.permute(0, 2, 1, 3)).transpose(1, 2).reshape(b, n, -1)
        return self.proj(F.hardswish(out))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_tokens_batched_by_a_norm_reach_stacked_matrix_products(tmp_path, dialect):
    check_module(TokenNormAttention().eval(), [_r(1, 9, 32)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_five_dim_value_split_along_dim_0_keeps_it_unbatched(tmp_path, dialect):
    """Channels interleaved in pairs through a 5-D view (2, 1, C/2, H, W) whose dim 0 is then
    indexed: dim 0 is selected, not computed along, so it cannot be the batch; the unit dim
    is squeezed instead and both halves match."""

    def shuffle(x):
        y = torch.nn.functional.relu(x)
        y = y.reshape(12, 2, 30).permute(1, 0, 2).reshape(2, -1, 12, 5, 6)
        return y[0], y[1]

    check_module(Fn(shuffle), [torch.randn(1, 24, 5, 6)], tmp_path, dialect=dialect)
