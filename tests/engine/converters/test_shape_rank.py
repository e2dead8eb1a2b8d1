"""Tensors of more than 4 dims (without the batch axis) rewritten into ≤4-D ones by the
``legalize_tensor_rank`` pass: window partition/reverse (Swin, MaxViT), head splits, 5-D
elementwise broadcasting, softmax/reductions/cat/splits of 5-D tensors — numerically in ncnn,
both dialects, with the layer counts that make them fast."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


def _window_partition(x, w):
    b, h, wd, c = x.shape
    x = x.view(b, h // w, w, wd // w, w, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, w * w, c)


def _window_reverse(x, w, h, wd):
    c = x.shape[-1]
    x = x.view(1, h // w, wd // w, w, w, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(1, h, wd, c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_swin_window_partition_is_one_permute(tmp_path, dialect):
    c = check_module(Fn(lambda x: _window_partition(x, 4).reshape(1, -1, 6)), [torch.randn(1, 8, 12, 6)], tmp_path,
                     dialect=dialect)
    assert _types(c).count("Permute") == 1
    assert len(c.result.ncnn.ops) <= 4  # Input, Reshape, Permute, Reshape


@pytest.mark.parametrize("dialect", DIALECTS)
def test_swin_window_partition_and_reverse(tmp_path, dialect):
    def f(x):
        windows = _window_partition(x, 4) * 2.0 + 1.0
        return _window_reverse(windows, 4, 8, 12)

    c = check_module(Fn(f), [torch.randn(1, 8, 12, 6)], tmp_path, dialect=dialect)
    assert _types(c).count("Permute") == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("grid", [False, True])
def test_maxvit_partition(tmp_path, dialect, grid):
    """MaxViT: (B, C, H, W) → (B, C, H/P, P, W/P, P) → permute(0, 2, 4, 3, 5, 1): five blocks
    that no single 4-D Permute can order — two steps."""
    def f(x, p=3):
        b, ch, h, w = x.shape
        x = x.reshape(b, ch, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1).reshape(b, (h // p) * (w // p), p * p, ch)
        if grid:
            x = torch.swapaxes(x, -2, -3)
        x = x + 1.0
        if grid:
            x = torch.swapaxes(x, -2, -3)
        x = x.reshape(b, h // p, w // p, p, p, ch).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(b, ch, h, w)

    c = check_module(Fn(f), [torch.randn(1, 4, 6, 9)], tmp_path, dialect=dialect)
    assert _types(c).count("Permute") <= 4 + (2 if grid else 0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_qkv_head_split_crops_the_linear_output(tmp_path, dialect):
    """reshape(N, L, 3, heads, d).permute(2, 0, 3, 1, 4) then [0], [1], [2]: no 5-D permute —
    the 5-D values run with their dim 0 as ncnn's batch (one Permute of 4 dims; before, the
    selects moved before the permutation and cropped the linear output with three)."""
    lin = torch.nn.Linear(16, 48)

    def f(x):
        qkv = lin(x).reshape(4, 9, 3, 2, 8).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        return (q * 2 + k - v).reshape(1, -1, 8)

    c = check_module(Fn(f), [torch.randn(1, 36, 16)], tmp_path, dialect=dialect)
    assert _types(c).count("Permute") <= 3


@pytest.mark.parametrize("dialect", DIALECTS)
def test_qkv_unbind(tmp_path, dialect):
    def f(x):
        q, k, v = x.reshape(1, 9, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v

    check_module(Fn(f), [torch.randn(1, 9, 48)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_elementwise_5d_with_broadcast(tmp_path, dialect):
    """Swin's masked attention: (64, 3, L, L) viewed as (1, 64, 3, L, L) + a (64, 1, L, L) mask."""
    mask = torch.randn(4, 1, 5, 5)

    def f(x):
        a = x.view(4, 3, 5, 5).view(1, 4, 3, 5, 5) + mask.unsqueeze(0)
        b = x.view(1, 2, 2, 3, 5, 5) * torch.arange(3.0).view(3, 1, 1)
        return a.view(1, 12, 5, 5) + b.reshape(1, 12, 5, 5)

    check_module(Fn(f), [torch.randn(1, 12, 5, 5)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_5d_not_batched(tmp_path, dialect):
    """A 5-D tensor whose leading dim is not the batch (it merged the batch away)."""
    def f(x):
        y = x.reshape(2, 3, 4, 5, 6).permute(1, 0, 3, 2, 4)  # no dims stay together but the last
        return torch.relu(y - 0.5).reshape(1, 3, -1)

    c = check_module(Fn(f), [torch.randn(1, 720)], tmp_path, dialect=dialect)
    assert "ReLU" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_softmax_reduce_cat_split_of_5d(tmp_path, dialect):
    def f(x):
        y = x.view(1, 2, 3, 4, 5, 6)
        s = torch.softmax(y, dim=3)
        m = y.mean(dim=(2, 4), keepdim=True)
        a, b = torch.chunk(y, 2, dim=4)
        cat = torch.cat([b, a, s[:, :, :, :, 1:]], dim=4)
        return (cat + m).sum(dim=5).reshape(1, -1), y.amax(dim=2).reshape(1, -1)

    check_module(Fn(f), [torch.randn(1, 720)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_max_over_a_dim_of_6d(tmp_path, dialect):
    """Hiera's query pooling: a 6-D view of (batch, heads, windows, tokens, head dim) split by
    the stride, then ``max(dim=3).values`` (and ``min``) — indices unread, so an ``amax``."""
    def f(x):
        q = x.view(1, 2, 3, 4, 5, 6).permute(0, 2, 1, 3, 4, 5)
        top = q.max(dim=3).values
        low = torch.min(q, dim=4, keepdim=True).values
        return top.reshape(1, -1), (low * 2.0).reshape(1, -1)

    c = check_module(Fn(f), [torch.randn(1, 720)], tmp_path, dialect=dialect)
    assert "ArgMax" not in _types(c)


class DeformableOffsets(torch.nn.Module):
    """Multi-scale deformable attention's sampling locations (Deformable DETR, Mask2Former,
    RT-DETR): offsets viewed 6-D (queries, heads, levels, points, xy), divided by a constant
    6-D normalizer (each level's width and height, int64), added to 6-D-unsqueezed reference
    points, then one level selected and flattened for ``grid_sample``."""

    def __init__(self):
        super().__init__()
        self.offsets = torch.nn.Linear(8, 2 * 3 * 4 * 2)
        self.register_buffer("normalizer", torch.tensor([[6, 5], [3, 4], [2, 2]]))

    def forward(self, q, ref):
        b, n, _ = q.shape
        off = self.offsets(q).view(b, n, 2, 3, 4, 2)
        loc = ref[:, :, None, :, None, :] + off / self.normalizer[None, None, None, :, None, :]
        grid = 2 * loc - 1
        return grid[:, :, :, 1].transpose(1, 2).flatten(0, 1), grid.sum(-1).amax(-1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_deformable_sampling_locations_with_a_6d_constant(tmp_path, dialect):
    torch.manual_seed(0)
    c = check_module(DeformableOffsets(), [torch.randn(1, 7, 8), torch.rand(1, 7, 3, 2)], tmp_path, dialect=dialect)
    assert all(len(o.shape or ()) <= 5 for op in c.result.ncnn.ops for o in op.outputs)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_select_and_slice_of_6d(tmp_path, dialect):
    def f(x):
        y = x.view(1, 2, 3, 4, 5, 2).permute(0, 2, 1, 4, 3, 5)
        return y[:, 1, :, 1:4, ::2].reshape(1, -1), y.select(4, 2).reshape(1, -1)

    check_module(Fn(f), [torch.randn(1, 240)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mobilevit_unfold_fold(tmp_path, dialect):
    """MobileViT's patch unfolding and folding (reshape/transpose through 5-D views)."""
    def f(x, p=2):
        b, c, h, w = x.shape
        n_h, n_w = h // p, w // p
        t = x.reshape(b * c * n_h, p, n_w, p).transpose(1, 2)
        t = t.reshape(b, c, n_h * n_w, p * p).transpose(1, 3).reshape(b * p * p, n_h * n_w, c)
        t = t * 3.0
        t = t.contiguous().view(b, p * p, n_h * n_w, -1).transpose(1, 3)
        t = t.reshape(b * c * n_h, n_w, p, p).transpose(1, 2)
        return t.reshape(b, c, n_h * p, n_w * p)

    check_module(Fn(f), [torch.randn(1, 5, 4, 6)], tmp_path, dialect=dialect)


class LocallyGroupedAttention(torch.nn.Module):
    """Twins-SVT's window attention: its qkv Linear reads the 6-D windows
    ``(B, H/ws, W/ws, ws, ws, C)`` whole, then a 6-D head split."""

    def __init__(self, dim=16, heads=2, ws=4):
        super().__init__()
        self.qkv, self.proj, self.heads, self.ws = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim), heads, ws

    def forward(self, x):
        b, h, w, c = x.shape
        ws, hh, ww = self.ws, h // self.ws, w // self.ws
        x = x.reshape(b, hh, ws, ww, ws, c).transpose(2, 3)
        qkv = self.qkv(x).reshape(b, hh * ww, ws * ws, 3, self.heads, c // self.heads).permute(3, 0, 1, 4, 2, 5)
        q, k, v = qkv.unbind(0)
        x = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x.transpose(2, 3).reshape(b, hh, ww, ws, ws, c).transpose(2, 3).reshape(b, h, w, c)
        return self.proj(x)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_linear_of_6d_windows(tmp_path, dialect):
    torch.manual_seed(0)
    check_module(LocallyGroupedAttention(), [torch.randn(1, 8, 12, 16)], tmp_path, dialect=dialect, tol=1e-5)


class PerHeadWeights(torch.nn.Module):
    """A 5-D product with a small per-head weight broadcast over the leading dims: core ATen
    flattens it into one bmm whose weight constant folding makes a (24, K, N) constant."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 16, 8))

    def forward(self, x):
        return (torch.matmul(x.reshape(1, 2, 3, 4, 4, 16), self.w) * 2.0).reshape(1, 6, 16, 8)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_matmul_with_a_broadcast_batched_weight(tmp_path, dialect):
    """The bmm's folded weight is not one matrix: the product keeps its per-head weights."""
    torch.manual_seed(0)
    check_module(PerHeadWeights(), [torch.randn(1, 6, 16, 16)], tmp_path, dialect=dialect, tol=1e-5)
