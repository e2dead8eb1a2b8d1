"""Every named enum value does in the real runtime what its name says (numpy / PyTorch as the
reference) — including where operators.md is wrong (GridSample's sample types)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine.ncnn.enums import (ActivationType, BinaryOpType, EltwiseOp, GridSampleType, PaddingType, PixelShuffleMode,
                               PoolingType, ReductionOp, UnaryOpType, activation)

from tests.engine.writers.ncnn_graphs import NetBuilder, rel_error, run

pytest.importorskip("ncnn")

RNG = np.random.default_rng(7)
A = RNG.uniform(0.2, 0.9, (2, 3, 4)).astype(np.float32)
B = RNG.uniform(0.3, 2.0, (2, 3, 4)).astype(np.float32)


def _one_layer(tmp_path, type_, inputs, **params):
    b = NetBuilder()
    blobs = [b.input(f"in{k}", x.shape) for k, x in enumerate(inputs)]
    b.layer(type_, blobs, name="out0", **params)
    return run(*b.write(tmp_path), {f"in{k}": x for k, x in enumerate(inputs)}, ["out0"])[0]


BINARY = {
    BinaryOpType.ADD: np.add, BinaryOpType.SUB: np.subtract, BinaryOpType.MUL: np.multiply,
    BinaryOpType.DIV: np.divide, BinaryOpType.MAX: np.maximum, BinaryOpType.MIN: np.minimum,
    BinaryOpType.POW: np.power, BinaryOpType.RSUB: lambda a, b: b - a, BinaryOpType.RDIV: lambda a, b: b / a,
    BinaryOpType.RPOW: lambda a, b: b ** a, BinaryOpType.ATAN2: np.arctan2,
    BinaryOpType.RATAN2: lambda a, b: np.arctan2(b, a), BinaryOpType.FMOD: np.fmod,
    BinaryOpType.RFMOD: lambda a, b: np.fmod(b, a), BinaryOpType.LOGADDEXP: np.logaddexp,
    BinaryOpType.FLOOR_DIVIDE: np.floor_divide, BinaryOpType.RFLOOR_DIVIDE: lambda a, b: np.floor_divide(b, a),
    BinaryOpType.REMAINDER: np.vectorize(math.remainder),  # IEEE remainder, not torch.remainder
    BinaryOpType.RREMAINDER: lambda a, b: np.vectorize(math.remainder)(b, a),
}


@pytest.mark.parametrize("op", list(BinaryOpType), ids=lambda o: o.name)
def test_binaryop(op, tmp_path):
    a, b = (A, B) if op in (BinaryOpType.POW, BinaryOpType.RPOW) else (A * 3 - 1, B)
    got = _one_layer(tmp_path, "BinaryOp", [a, b], op_type=op)
    assert rel_error(got, BINARY[op](a, b)) <= 1e-5


UNARY = {
    UnaryOpType.ABS: np.abs, UnaryOpType.NEG: np.negative, UnaryOpType.FLOOR: np.floor, UnaryOpType.CEIL: np.ceil,
    UnaryOpType.SQUARE: np.square, UnaryOpType.SQRT: np.sqrt, UnaryOpType.RSQRT: lambda x: 1 / np.sqrt(x),
    UnaryOpType.EXP: np.exp, UnaryOpType.LOG: np.log, UnaryOpType.SIN: np.sin, UnaryOpType.COS: np.cos,
    UnaryOpType.TAN: np.tan, UnaryOpType.ASIN: np.arcsin, UnaryOpType.ACOS: np.arccos, UnaryOpType.ATAN: np.arctan,
    UnaryOpType.RECIPROCAL: np.reciprocal, UnaryOpType.TANH: np.tanh, UnaryOpType.LOG10: np.log10,
    UnaryOpType.ROUND: np.round, UnaryOpType.TRUNC: np.trunc, UnaryOpType.SIGN: np.sign,
    UnaryOpType.EXPM1: np.expm1, UnaryOpType.SINH: np.sinh, UnaryOpType.ASINH: np.arcsinh, UnaryOpType.COSH: np.cosh,
    UnaryOpType.ACOSH: np.arccosh, UnaryOpType.ATANH: np.arctanh, UnaryOpType.LOG1P: np.log1p,
}


@pytest.mark.parametrize("op", list(UnaryOpType), ids=lambda o: o.name)
def test_unaryop(op, tmp_path):
    x = A * 4 - 2 if op in (UnaryOpType.FLOOR, UnaryOpType.CEIL, UnaryOpType.ROUND, UnaryOpType.TRUNC,
                            UnaryOpType.SIGN, UnaryOpType.NEG, UnaryOpType.ABS) else A
    if op == UnaryOpType.ACOSH:
        x = A + 1
    got = _one_layer(tmp_path, "UnaryOp", [x], op_type=op)
    assert rel_error(got, UNARY[op](x)) <= 1e-5


REDUCE = {
    ReductionOp.SUM: np.sum, ReductionOp.ASUM: lambda x: np.abs(x).sum(), ReductionOp.SUMSQ: lambda x: (x * x).sum(),
    ReductionOp.MEAN: np.mean, ReductionOp.MAX: np.max, ReductionOp.MIN: np.min, ReductionOp.PROD: np.prod,
    ReductionOp.L1: lambda x: np.abs(x).sum(), ReductionOp.L2: lambda x: np.sqrt((x * x).sum()),
    ReductionOp.LOGSUM: lambda x: np.log(x.sum()), ReductionOp.LOGSUMEXP: lambda x: np.log(np.exp(x).sum()),
}


@pytest.mark.parametrize("op", list(ReductionOp), ids=lambda o: o.name)
def test_reduction(op, tmp_path):
    x = A[0] + 0.5
    got = _one_layer(tmp_path, "Reduction", [x], operation=op, reduce_all=1)
    assert rel_error(got, np.array([REDUCE[op](x.astype(np.float64))])) <= 1e-5


@pytest.mark.parametrize("op, ref", [(EltwiseOp.PROD, np.multiply), (EltwiseOp.SUM, np.add),
                                     (EltwiseOp.MAX, np.maximum)], ids=lambda v: getattr(v, "name", ""))
def test_eltwise(op, ref, tmp_path):
    assert rel_error(_one_layer(tmp_path, "Eltwise", [A, B], op_type=op), ref(A, B)) <= 1e-6


@pytest.mark.parametrize("kind", list(PoolingType), ids=lambda o: o.name)
def test_pooling(kind, tmp_path):
    got = _one_layer(tmp_path, "Pooling", [B], pooling_type=kind, global_pooling=1)
    assert rel_error(got, B.max((1, 2)) if kind == PoolingType.MAX else B.mean((1, 2))) <= 1e-6


def _act(kind, x):
    return {
        ActivationType.NONE: x, ActivationType.RELU: np.maximum(x, 0), ActivationType.LEAKY_RELU: np.where(x > 0, x, 0.1 * x),
        ActivationType.CLIP: np.clip(x, -0.3, 0.4), ActivationType.SIGMOID: 1 / (1 + np.exp(-x)),
        ActivationType.MISH: x * np.tanh(np.log1p(np.exp(x))), ActivationType.HARDSWISH: x * np.clip(x / 6 + 0.5, 0, 1),
    }[kind]


ACT_PARAMS = {ActivationType.LEAKY_RELU: (0.1,), ActivationType.CLIP: (-0.3, 0.4), ActivationType.HARDSWISH: (1 / 6, 0.5)}


@pytest.mark.parametrize("kind", list(ActivationType), ids=lambda o: o.name)
def test_fused_activation(kind, tmp_path):
    x = (A.reshape(-1) * 6 - 3)
    w = np.eye(x.size, dtype=np.float32)
    got = _one_layer(tmp_path, "InnerProduct", [x], num_output=x.size, weight_data_size=w.size,
                     weights={"weight_data": w}, **activation(kind, *ACT_PARAMS.get(kind, ())))
    assert rel_error(got, _act(kind, x)) <= 1e-5


def test_activation_helper_checks_arity():
    with pytest.raises(ValueError, match="CLIP takes 2 params"):
        activation(ActivationType.CLIP, 1.0)
    assert activation(ActivationType.NONE) == {}


@pytest.mark.parametrize("kind, mode", [(PaddingType.CONSTANT, "constant"), (PaddingType.REPLICATE, "edge"),
                                        (PaddingType.REFLECT, "reflect")], ids=lambda v: getattr(v, "name", v))
def test_padding(kind, mode, tmp_path):
    got = _one_layer(tmp_path, "Padding", [A], top=1, bottom=2, left=2, right=1, type=kind)
    assert rel_error(got, np.pad(A, ((0, 0), (1, 2), (2, 1)), mode=mode)) == 0


def test_pixelshuffle_torch_order(tmp_path):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((8, 3, 2)).astype(np.float32)
    got = _one_layer(tmp_path, "PixelShuffle", [x], upscale_factor=2, mode=PixelShuffleMode.TORCH)
    assert rel_error(got, torch.pixel_shuffle(torch.from_numpy(x)[None], 2)[0].numpy()) == 0


@pytest.mark.parametrize("kind, mode", [(GridSampleType.BILINEAR, "bilinear"), (GridSampleType.NEAREST, "nearest"),
                                        (GridSampleType.BICUBIC, "bicubic")], ids=lambda v: getattr(v, "name", v))
def test_gridsample_types_follow_the_runtime_not_the_docs(kind, mode, tmp_path):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 5, 6)).astype(np.float32)
    grid = RNG.uniform(-0.9, 0.9, (4, 3, 2)).astype(np.float32)
    got = _one_layer(tmp_path, "GridSample", [x, grid], sample_type=kind, padding_mode=1, align_corner=0)
    ref = torch.nn.functional.grid_sample(torch.from_numpy(x)[None], torch.from_numpy(grid)[None], mode=mode,
                                          padding_mode="zeros", align_corners=False)[0].numpy()
    assert rel_error(got, ref) <= 1e-5
