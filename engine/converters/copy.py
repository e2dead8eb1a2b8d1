"""Copies into a tensor: ``aten.copy.default`` (``dst.copy_(src)``; what ``x[:, 1:3] = y`` and
``x[..., 1] += 1`` leave once functionalized: ``slice`` → ``copy`` → ``slice_scatter``).

ATen → pnnx: the result is ``src`` broadcast to ``dst``'s shape (``dst``'s values are all
overwritten): ``src`` itself when the shapes match, a ``Tensor.reshape`` when they differ only
by dims of size 1, else ``Tensor.expand`` to ``dst``'s shape. A copy between a floating and an
integer or boolean dtype is refused (ncnn computes in float: the rounding would be lost).
"""
from __future__ import annotations

import math

from ..convert.registry import aten_converter

_FLOAT = ("f16", "f32", "f64", "bf16", "float16", "float32", "float64", "bfloat16")


@aten_converter("aten.copy.default")
def copy(ctx, op):
    dst, src = op.inputs[0], op.named_input("src") or op.inputs[1]
    out = op.outputs[0]
    if (dst.dtype in _FLOAT) != (src.dtype in _FLOAT):
        ctx.unsupported(f"copy of a {src.dtype} tensor into a {dst.dtype} one (ncnn computes in float)")
    if out.shape is None or src.shape is None:
        ctx.unsupported(f"copy into {dst.name}: shapes unknown")
    if list(src.shape) == list(out.shape):
        return src
    static = all(isinstance(d, int) for d in (*src.shape, *out.shape))
    if static and math.prod(src.shape) == math.prod(out.shape):
        return ctx.emit("Tensor.reshape", [src], params={"shape": list(out.shape)})
    return ctx.emit("Tensor.expand", [src], params={"sizes": list(out.shape)})
