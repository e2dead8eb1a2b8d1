"""scaled_dot_product_attention end to end (both dialects; core ATen's math decomposition is
recomposed): one ncnn SDPA layer, with additive / boolean-constant / padding / per-head masks,
is_causal, explicit scale, grouped-query heads and single-head (3-D) inputs."""
import pytest
import torch
import torch.nn.functional as F

from tests.engine.converters.modules import Fn
from tests.harness import DIALECTS, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


def _qkv(heads=2, lq=5, lk=7, e=8, ev=8, kv_heads=None):
    kv = kv_heads or heads
    return [torch.randn(1, heads, lq, e), torch.randn(1, kv, lk, e), torch.randn(1, kv, lk, ev)]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kwargs", [{}, {"scale": 0.3}], ids=["default_scale", "scale"])
def test_sdpa(tmp_path, dialect, kwargs):
    c = check_module(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs)), _qkv(), tmp_path,
                     dialect=dialect)
    assert _types(c) == ["Input", "Input", "Input", "SDPA"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sdpa_value_dim(tmp_path, dialect):
    c = check_module(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)), _qkv(ev=6), tmp_path,
                     dialect=dialect)
    assert "SDPA" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sdpa_causal(tmp_path, dialect):
    c = check_module(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                     _qkv(lq=6, lk=6), tmp_path, dialect=dialect)
    assert _types(c).count("SDPA") == 1 and "MemoryData" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mask_shape", [(1, 1, 5, 7), (1, 2, 5, 7), (1, 1, 1, 7)],
                         ids=["shared", "per_head", "padding"])
def test_sdpa_float_mask_input(tmp_path, dialect, mask_shape):
    mask = torch.randn(mask_shape)
    c = check_module(Fn(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
                     _qkv() + [mask], tmp_path, dialect=dialect)
    assert _types(c).count("SDPA") == 1


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mask_shape", [(5, 7), (1, 7)], ids=["2d", "row"])
def test_sdpa_constant_float_mask(tmp_path, dialect, mask_shape):
    mask = torch.randn(mask_shape)
    check_module(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)), _qkv(), tmp_path,
                 dialect=dialect, expect_types=["SDPA"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sdpa_constant_bool_mask(tmp_path, dialect):
    keep = torch.rand(5, 7) > 0.3
    keep[:, 0] = True  # no row fully masked
    check_module(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=keep)), _qkv(), tmp_path,
                 dialect=dialect, expect_types=["SDPA"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sdpa_gqa(tmp_path, dialect):
    """(core ATen spells enable_gqa as repeat_interleave / index_select on k and v.)"""
    check_module(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
                 _qkv(heads=4, kv_heads=2), tmp_path, dialect=dialect, expect_types=["SDPA"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sdpa_single_head(tmp_path, dialect):
    """(1, L, E) q/k/v: 2-D blobs in ncnn, viewed as one head."""
    check_module(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
                 [torch.randn(1, 5, 8), torch.randn(1, 7, 8), torch.randn(1, 7, 8)], tmp_path, dialect=dialect,
                 expect_types=["SDPA"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("seed", [0, 1])
def test_sdpa_computed_bool_mask(tmp_path, dialect, seed):
    """A boolean mask computed from an input (random 0/1 per query/key, one row masked entirely:
    PyTorch gives zeros there, and so does the converted model)."""
    m = (torch.rand(1, 1, 5, 7, generator=torch.Generator().manual_seed(seed)) > 0.5).float()
    m[..., 2, :] = 0
    check_module(Fn(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0)), _qkv() + [m],
                 tmp_path, dialect=dialect, expect_types=["SDPA"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sdpa_batch_of_sequences(tmp_path, dialect):
    """(B, H, L, E) attention with B > 1 that is not the model's batch (as after MobileViT's unfold):
    the B*H sequences are heads to ncnn's SDPA."""
    check_module(Fn(lambda q, k, v: F.scaled_dot_product_attention(q.reshape(3, 2, 5, 8), k.reshape(3, 2, 7, 8),
                                                                   v.reshape(3, 2, 7, 8)).reshape(1, 6, 5, 8)),
                 [torch.randn(1, 6, 5, 8), torch.randn(1, 6, 7, 8), torch.randn(1, 6, 7, 8)], tmp_path,
                 dialect=dialect, expect_types=["SDPA"])


# ----------------------------------------------------------------------------- multi-head attention
class Mha(torch.nn.Module):
    """nn.MultiheadAttention in a residual (so its input/output are internal tensors)."""

    def __init__(self, cross=False, need_weights=False, **kwargs):
        super().__init__()
        self.cross, self.need_weights = cross, need_weights
        self.attn = torch.nn.MultiheadAttention(32, 4, **kwargs)
        self.pre = torch.nn.Linear(32, 32)

    def forward(self, x, *rest):
        h = self.pre(x)
        if not self.attn.batch_first:
            h = h.transpose(0, 1)
        kv = rest[0] if self.cross else h
        y = self.attn(h, kv, kv, need_weights=self.need_weights)[0]
        if not self.attn.batch_first:
            y = y.transpose(0, 1)
        return x + y


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("kwargs", [
    {"batch_first": True}, {"batch_first": False}, {"batch_first": True, "need_weights": True},
    {"batch_first": True, "bias": False},
], ids=["batch_first", "seq_first", "need_weights", "nobias"])
def test_multihead_attention_fused(tmp_path, dialect, fp16, kwargs):
    c = check_module(Mha(**kwargs).eval(), [torch.randn(1, 9, 32)], tmp_path, dialect=dialect, fp16=fp16)
    types = _types(c)
    assert types.count("MultiHeadAttention") == 1 and "SDPA" not in types and "Permute" not in types


@pytest.mark.parametrize("dialect", DIALECTS)
def test_multihead_attention_cross_kdim_vdim(tmp_path, dialect):
    m = Mha(cross=True, batch_first=True, kdim=16, vdim=16).eval()
    c = check_module(m, [torch.randn(1, 9, 32), torch.randn(1, 6, 16)], tmp_path, dialect=dialect)
    assert _types(c).count("MultiHeadAttention") == 1


class MhaMasked(torch.nn.Module):
    def __init__(self, causal=False):
        super().__init__()
        self.causal = causal
        self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x, pad=None):
        n = x.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf")), 1) if self.causal else None
        return self.attn(x, x, x, attn_mask=mask, key_padding_mask=pad, need_weights=False)[0]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_multihead_attention_float_padding_mask(tmp_path, dialect):
    """A float key_padding_mask (additive, as an input): merged into SDPA's mask."""
    pad = torch.zeros(1, 9)
    pad[0, 6:] = -1e4
    c = check_module(MhaMasked().eval(), [torch.randn(1, 9, 32), pad], tmp_path, dialect=dialect)
    assert "MultiHeadAttention" in _types(c) or "SDPA" in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_hand_written_attention_fused(tmp_path, dialect):
    """q/k/v linears, view/transpose head split, SDPA, merge, output linear → one MultiHeadAttention."""
    from tests.engine.models.test_transformer_blocks import SelfAttention

    c = check_module(SelfAttention().eval(), [torch.randn(1, 9, 32)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "MultiHeadAttention"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_multihead_attention_causal_constant_mask(tmp_path, dialect):
    """attn_mask = triu(full(-inf), 1) built in forward: evaluated to a constant."""
    c = check_module(MhaMasked(causal=True).eval(), [torch.randn(1, 9, 32)], tmp_path, dialect=dialect)
    assert _types(c).count("MultiHeadAttention") == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_multihead_attention_causal_and_padding(tmp_path, dialect):
    """A constant causal mask merged with a float key padding mask input (one (1, H, L, S) mask;
    the causal half is triu / ge / where of constants, folded)."""
    pad = torch.zeros(1, 9)
    pad[0, 7:] = -1e4
    c = check_module(MhaMasked(causal=True).eval(), [torch.randn(1, 9, 32), pad], tmp_path, dialect=dialect)
    assert _types(c).count("MultiHeadAttention") == 1


MIXED_RANKS = {
    # a 3-D key / value for a 4-D query (and a 2-D mask): PyTorch broadcasts the batch dims
    "key_without_batch": ([(2, 4, 16, 8), (4, 7, 8), (4, 7, 9)], True),
    # a 3-D query for 4-D key / value: the output takes the broadcast batch
    "query_without_batch": ([(4, 16, 8), (2, 4, 7, 8), (2, 4, 7, 9)], False),
    # one batch of keys for two of queries
    "single_key_batch": ([(2, 3, 5, 8), (1, 3, 6, 8), (1, 3, 6, 8)], False),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", sorted(MIXED_RANKS))
def test_sdpa_with_broadcast_batch_dims(tmp_path, dialect, case):
    shapes, masked = MIXED_RANKS[case]
    torch.manual_seed(0)
    inputs = [torch.rand(*s) for s in shapes] + ([torch.rand(shapes[0][-2], shapes[1][-2])] if masked else [])
    c = check_module(Fn(lambda q, k, v, *m: F.scaled_dot_product_attention(q, k, v, attn_mask=m[0] if m else None)),
                     inputs, tmp_path, dialect=dialect)
    assert "SDPA" in [op.type for op in c.result.ncnn.ops]


class SeparateInputs(torch.nn.Module):
    """nn.MultiheadAttention on distinct query / key / value (its packed in-projection weight is
    split into q and k/v pieces in the graph), with a float mask when ``masked``."""

    def __init__(self, masked: bool, batch_first: bool):
        super().__init__()
        torch.manual_seed(0)
        self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=batch_first)
        self.masked = masked

    def forward(self, q, k, v, m):
        return self.attn(q, k, k if self.masked else v, attn_mask=m if self.masked else None)[0]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("masked", [False, True], ids=["key_value", "key_key_masked"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_with_separate_inputs(tmp_path, dialect, masked, batch_first):
    torch.manual_seed(1)
    n, lq, lk = 1, 6, 9
    q, k, v = ((torch.randn(n, length, 32) if batch_first else torch.randn(length, n, 32)) for length in (lq, lk, lk))
    check_module(SeparateInputs(masked, batch_first), [q, k, v, torch.randn(lq, lk)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("bias_shape", [(1, 4, 2, 9, 9), (2, 9, 9), None], ids=["per_window", "per_head", "none"])
def test_sdpa_of_windows_and_heads(tmp_path, dialect, bias_shape):
    """5-D attention (batch, windows, heads, L, E), as MaxViT's re-exported Python spells it, with
    a bias per window and head, per head only (a relative position bias: SDPA would need it tiled
    over the windows) or none: merging windows × heads into SDPA's heads would cost a Reshape of
    q, k, v and the result, so MatMul → Softmax → MatMul over the 4-D blobs, nothing reshaped."""
    torch.manual_seed(5)
    bias = None if bias_shape is None else torch.randn(bias_shape)
    f = Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    c = check_module(f, [torch.randn(1, 4, 2, 9, 8) for _ in range(3)], tmp_path, dialect=dialect,
                     expect_types=["MatMul", "Softmax"], forbid_types=["SDPA", "Reshape", "Tile"])
    assert _types(c).count("MatMul") == 2 and len(_types(c)) <= 3 + 4 + 2 * (bias is not None)
