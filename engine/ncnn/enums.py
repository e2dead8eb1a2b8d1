"""Named values of ncnn's enumerated params (as the runtime's headers and code define them),
so converters never write bare numbers::

    layer("BinaryOp", [a, b], op_type=BinaryOpType.MUL)
    layer("Convolution", [x], ..., **activation(ActivationType.CLIP, 0.0, 6.0))

Where operators.md disagrees with the runtime the runtime wins (noted per enum).
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any


class BinaryOpType(IntEnum):
    """BinaryOp ``op_type``. The R* forms swap the operands (``RSUB``: b - a). ``FMOD`` is C
    ``fmodf`` (torch.fmod); ``REMAINDER`` is C ``remainderf`` — the IEEE remainder
    ``a - b * round_half_even(a / b)``, *not* torch.remainder (``a - b * floor(a / b)``)."""

    ADD = 0
    SUB = 1
    MUL = 2
    DIV = 3
    MAX = 4
    MIN = 5
    POW = 6
    RSUB = 7
    RDIV = 8
    RPOW = 9
    ATAN2 = 10
    RATAN2 = 11
    FMOD = 12
    RFMOD = 13
    LOGADDEXP = 14
    FLOOR_DIVIDE = 15
    RFLOOR_DIVIDE = 16
    REMAINDER = 17
    RREMAINDER = 18


class UnaryOpType(IntEnum):
    """UnaryOp ``op_type`` (``RSQRT`` is operators.md's "RSQ")."""

    ABS = 0
    NEG = 1
    FLOOR = 2
    CEIL = 3
    SQUARE = 4
    SQRT = 5
    RSQRT = 6
    EXP = 7
    LOG = 8
    SIN = 9
    COS = 10
    TAN = 11
    ASIN = 12
    ACOS = 13
    ATAN = 14
    RECIPROCAL = 15
    TANH = 16
    LOG10 = 17
    ROUND = 18
    TRUNC = 19
    SIGN = 20
    EXPM1 = 21
    SINH = 22
    ASINH = 23
    COSH = 24
    ACOSH = 25
    ATANH = 26
    LOG1P = 27


class ReductionOp(IntEnum):
    """Reduction ``operation``."""

    SUM = 0
    ASUM = 1
    SUMSQ = 2
    MEAN = 3
    MAX = 4
    MIN = 5
    PROD = 6
    L1 = 7
    L2 = 8
    LOGSUM = 9
    LOGSUMEXP = 10


class EltwiseOp(IntEnum):
    """Eltwise ``op_type`` (``coeffs`` apply to SUM)."""

    PROD = 0
    SUM = 1
    MAX = 2


class PoolingType(IntEnum):
    """Pooling / Pooling1D / Pooling3D / SPP ``pooling_type``."""

    MAX = 0
    AVG = 1


class PoolPadMode(IntEnum):
    """Pooling ``pad_mode``: FULL pads like caffe (ceil mode), VALID like floor mode."""

    FULL = 0
    VALID = 1
    SAME_UPPER = 2
    SAME_LOWER = 3


class PaddingType(IntEnum):
    """Padding ``type``."""

    CONSTANT = 0
    REPLICATE = 1
    REFLECT = 2


class InterpResizeType(IntEnum):
    """Interp ``resize_type``."""

    NEAREST = 1
    BILINEAR = 2
    BICUBIC = 3


class GridSampleType(IntEnum):
    """GridSample ``sample_type``. operators.md lists 1 = Nearest, 2 = Bilinear; the runtime
    (``gridsample.h``/``.cpp``) uses 1 = bilinear, 2 = nearest."""

    BILINEAR = 1
    NEAREST = 2
    BICUBIC = 3


class GridSamplePadding(IntEnum):
    """GridSample ``padding_mode``."""

    ZEROS = 1
    BORDER = 2
    REFLECTION = 3


class CastType(IntEnum):
    """Cast ``type_from``/``type_to``."""

    AUTO = 0
    FLOAT32 = 1
    FLOAT16 = 2
    INT8 = 3
    BFLOAT16 = 4


class RNNDirection(IntEnum):
    """RNN / LSTM / GRU ``direction``."""

    FORWARD = 0
    REVERSE = 1
    BIDIRECTIONAL = 2


class LRNRegion(IntEnum):
    ACROSS_CHANNELS = 0
    WITHIN_CHANNEL = 1


class NormalizeEpsMode(IntEnum):
    """Normalize ``eps_mode``."""

    CAFFE = 0       # x / sqrt(var + eps)
    PYTORCH = 1     # x / max(sqrt(var), eps)
    TENSORFLOW = 2  # x / sqrt(max(var, eps))


class PixelShuffleMode(IntEnum):
    """PixelShuffle / Reorg ``mode`` (from ``pixelshuffle.cpp``): TORCH reads input channel
    ``c * r * r + sh * r + sw`` (``torch.pixel_shuffle``); DEPTH_TO_SPACE reads
    ``(sh * r + sw) * outc + c`` (TensorFlow's depth_to_space)."""

    TORCH = 0
    DEPTH_TO_SPACE = 1


class ReshapeDim(IntEnum):
    """Special Reshape ``w/h/d/c`` values."""

    KEEP = 0        # copy from the input
    INFER = -1      # the remaining size
    DROP = -233     # this dimension does not exist (the default)


class ActivationType(IntEnum):
    """``activation_type`` of Convolution*/Deconvolution*/InnerProduct/Requantize, fused after
    the layer, with its ``activation_params``: LEAKY_RELU (slope), CLIP (min, max), HARDSWISH
    (alpha, beta); the others take none."""

    NONE = 0
    RELU = 1
    LEAKY_RELU = 2
    CLIP = 3
    SIGMOID = 4
    MISH = 5
    HARDSWISH = 6


_ACTIVATION_ARITY = {ActivationType.LEAKY_RELU: 1, ActivationType.CLIP: 2, ActivationType.HARDSWISH: 2}


def activation(kind: ActivationType | int, *params: float) -> dict[str, Any]:
    """``activation_type``/``activation_params`` keyword arguments for
    :func:`engine.ncnn.layers.make_params`, checking the number of params."""
    kind = ActivationType(kind)
    want = _ACTIVATION_ARITY.get(kind, 0)
    if len(params) != want:
        raise ValueError(f"activation {kind.name} takes {want} params, got {len(params)}")
    out: dict[str, Any] = {"activation_type": int(kind)} if kind else {}
    if params:
        out["activation_params"] = [float(p) for p in params]
    return out
