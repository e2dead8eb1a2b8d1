"""Hand-built ncnn-vocabulary graphs, written by :func:`engine.writers.write_ncnn`, run in the
real ncnn runtime and compared with PyTorch: fp32 weights within 1e-5 (relative to the
output's max magnitude), fp16 weights within 5e-3."""
from __future__ import annotations

import numpy as np
import pytest

from engine.ncnn.enums import (ActivationType, BinaryOpType, EltwiseOp, InterpResizeType, PoolingType, UnaryOpType,
                               activation)

from tests.engine.writers.ncnn_graphs import NetBuilder, rel_error, run

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytest.importorskip("ncnn")

TOL = {False: 1e-5, True: 5e-3}
FP16 = pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@FP16
def test_cnn_chain(fp16, tmp_path, rng):
    """Input → Convolution(+bias) → ReLU → Pooling → Flatten → InnerProduct → Softmax."""
    x = rng.standard_normal((3, 8, 8)).astype(np.float32)
    w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(4).astype(np.float32)
    w2 = rng.standard_normal((10, 64)).astype(np.float32) * 0.2
    b2 = rng.standard_normal(10).astype(np.float32)
    b = NetBuilder()
    h = b.input("in0", x.shape)
    h = b.layer("Convolution", [h], num_output=4, kernel_w=3, pad_left=1, bias_term=1, weight_data_size=w1.size,
                weights={"weight_data": w1, "bias_data": b1})
    h = b.layer("ReLU", [h])
    h = b.layer("Pooling", [h], pooling_type=PoolingType.MAX, kernel_w=2, stride_w=2)
    h = b.layer("Flatten", [h])
    h = b.layer("InnerProduct", [h], num_output=10, bias_term=1, weight_data_size=w2.size,
                weights={"weight_data": w2, "bias_data": b2})
    b.layer("Softmax", [h], name="out0", axis=0)
    (got,) = run(*b.write(tmp_path, fp16=fp16), {"in0": x}, ["out0"])
    ref = F.relu(F.conv2d(_t(x)[None], _t(w1), _t(b1), padding=1))
    ref = F.softmax(F.linear(F.max_pool2d(ref, 2).flatten(1), _t(w2), _t(b2)), 1)[0].numpy()
    assert rel_error(got, ref) <= TOL[fp16]


@FP16
def test_fan_out_with_split_binaryop_eltwise_and_constant(fp16, tmp_path, rng):
    """Split feeding a conv, a sigmoid and an Eltwise; BinaryOp broadcasting a MemoryData
    constant (C,1,1) — squeeze-and-excitation style."""
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4, 1, 1)).astype(np.float32) * 0.5
    scale = rng.standard_normal((4, 1, 1)).astype(np.float32)
    b = NetBuilder()
    h = b.input("in0", x.shape)
    s0, s1, s2 = b.layer("Split", [h], outputs=3, name="split")
    a = b.layer("Convolution", [s0], num_output=4, kernel_w=1,
                weight_data_size=w.size, weights={"weight_data": w})
    g = b.layer("Sigmoid", [s1])
    m = b.layer("BinaryOp", [a, g], op_type=BinaryOpType.MUL)
    c = b.layer("MemoryData", [], w=1, h=1, c=4, weights={"data": scale})
    m = b.layer("BinaryOp", [m, c], op_type=BinaryOpType.SUB)
    b.layer("Eltwise", [m, s2], name="out0", op_type=EltwiseOp.SUM, coeffs=[2.0, -0.5])
    (got,) = run(*b.write(tmp_path, fp16=fp16), {"in0": x}, ["out0"])
    xt = _t(x)[None]
    ref = (2 * (F.conv2d(xt, _t(w)) * torch.sigmoid(xt) - _t(scale)) - 0.5 * xt)[0].numpy()
    assert rel_error(got, ref) <= TOL[fp16]


def test_concat_slice_and_unaryop(tmp_path, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 3, 4)).astype(np.float32)
    b = NetBuilder()
    a, c = b.input("in0", x.shape), b.input("in1", y.shape)
    cat = b.layer("Concat", [a, c], axis=0)
    p0, p1 = b.layer("Slice", [cat], outputs=["out0", "p1"], slices=[1, -233], axis=0)
    b.layer("UnaryOp", [p1], name="out1", op_type=UnaryOpType.EXP)
    got0, got1 = run(*b.write(tmp_path), {"in0": x, "in1": y}, ["out0", "out1"])
    full = np.concatenate([x, y], 0)
    assert rel_error(got0, full[:1]) <= 1e-6
    assert rel_error(got1, np.exp(full[1:])) <= 1e-6


@pytest.mark.parametrize("mode, align", [("bilinear", False), ("bilinear", True), ("nearest", False)])
def test_interp(mode, align, tmp_path, rng):
    x = rng.standard_normal((2, 5, 7)).astype(np.float32)
    b = NetBuilder()
    h = b.input("in0", x.shape)
    kind = InterpResizeType.BILINEAR if mode == "bilinear" else InterpResizeType.NEAREST
    b.layer("Interp", [h], name="out0", resize_type=kind, height_scale=2.0, width_scale=2.0, align_corner=int(align))
    (got,) = run(*b.write(tmp_path), {"in0": x}, ["out0"])
    kw = {"align_corners": align} if mode == "bilinear" else {}
    ref = F.interpolate(_t(x)[None], scale_factor=2, mode=mode, **kw)[0].numpy()
    assert rel_error(got, ref) <= 1e-5


@FP16
def test_layernorm_gelu_gemm(fp16, tmp_path, rng):
    """LayerNorm over the last dim of a (seq, embed) blob, GELU, then a Linear as Gemm with a
    constant B and C (C is a tagged weight: fp16 when asked)."""
    seq, e, n = 5, 8, 6
    x = rng.standard_normal((seq, e)).astype(np.float32)
    gamma, beta = rng.standard_normal(e).astype(np.float32), rng.standard_normal(e).astype(np.float32)
    w, bias = rng.standard_normal((n, e)).astype(np.float32) * 0.3, rng.standard_normal(n).astype(np.float32)
    b = NetBuilder()
    h = b.input("in0", x.shape)
    h = b.layer("LayerNorm", [h], affine_size=e, eps=1e-5, weights={"gamma_data": gamma, "beta_data": beta})
    h = b.layer("GELU", [h])
    b.layer("Gemm", [h], name="out0", transB=1, constantB=1, constantC=1, constantM=seq, constantN=n, constantK=e,
            constant_broadcast_type_C=4, weights={"B_data": w, "C_data": bias})
    (got,) = run(*b.write(tmp_path, fp16=fp16), {"in0": x}, ["out0"])
    ref = F.linear(F.gelu(F.layer_norm(_t(x), (e,), _t(gamma), _t(beta), 1e-5)), _t(w), _t(bias)).numpy()
    assert rel_error(got, ref) <= TOL[fp16]


@FP16
def test_multiheadattention(fp16, tmp_path, rng):
    """Self-attention: one blob split three ways into a MultiHeadAttention layer, compared with
    torch.nn.MultiheadAttention."""
    seq, e, heads = 6, 8, 2
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(e, heads, batch_first=True).eval()
    x = rng.standard_normal((seq, e)).astype(np.float32)
    in_w = mha.in_proj_weight.detach().numpy()
    in_b = mha.in_proj_bias.detach().numpy()
    weights = {}
    for k, part in enumerate("qkv"):
        weights[f"{part}_weight_data"] = in_w[k * e:(k + 1) * e]
        weights[f"{part}_bias_data"] = in_b[k * e:(k + 1) * e]
    weights["out_weight_data"] = mha.out_proj.weight.detach().numpy()
    weights["out_bias_data"] = mha.out_proj.bias.detach().numpy()
    b = NetBuilder()
    h = b.input("in0", x.shape)
    q, k, v = b.layer("Split", [h], outputs=3)
    b.layer("MultiHeadAttention", [q, k, v], name="out0", embed_dim=e, num_heads=heads, weight_data_size=e * e,
            weights=weights)
    (got,) = run(*b.write(tmp_path, fp16=fp16), {"in0": x}, ["out0"])
    with torch.no_grad():
        ref = mha(_t(x)[None], _t(x)[None], _t(x)[None], need_weights=False)[0][0].numpy()
    assert rel_error(got, ref) <= TOL[fp16]


@FP16
def test_deconvolution_and_fused_activation(fp16, tmp_path, rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32) * 0.3   # torch: (in, out, kh, kw)
    bias = rng.standard_normal(2).astype(np.float32)
    b = NetBuilder()
    h = b.input("in0", x.shape)
    b.layer("Deconvolution", [h], name="out0", num_output=2, kernel_w=3, stride_w=2, pad_left=1, output_pad_right=1,
            bias_term=1, weight_data_size=w.size, weights={"weight_data": w.transpose(1, 0, 2, 3), "bias_data": bias},
            **activation(ActivationType.CLIP, -0.5, 0.75))
    (got,) = run(*b.write(tmp_path, fp16=fp16), {"in0": x}, ["out0"])
    ref = F.conv_transpose2d(_t(x)[None], _t(w), _t(bias), stride=2, padding=1, output_padding=1)
    assert rel_error(got, ref.clamp(-0.5, 0.75)[0].numpy()) <= TOL[fp16]


def test_tricky_float_params_reach_the_runtime_exactly(tmp_path):
    """Clip bounds that need every digit (and a value pnnx's short form gets wrong through
    ncnn's double-rounding reader) clamp to exactly those float32 values."""
    lo, hi = np.float32(-1 / 3), np.float32(4.614836e8)
    x = np.array([[-5.0, 0.0, 5e9]], np.float32)
    b = NetBuilder()
    b.layer("Clip", [b.input("in0", x.shape)], name="out0", min=float(lo), max=float(hi))
    (got,) = run(*b.write(tmp_path), {"in0": x}, ["out0"])
    assert got.reshape(-1).tolist() == [lo, 0.0, hi]
