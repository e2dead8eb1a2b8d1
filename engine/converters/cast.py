"""Dtype conversions of run-time tensors.

ncnn computes in float32 (or its own fp16 storage) whatever the source dtype, holding a bool
tensor as 0.0 / 1.0 and an integer tensor as its values (exact up to 2^24), so:

ATen → pnnx, for ``aten._to_copy.default``, ``aten.to.dtype``/``dtype_layout``/``device``/
``other``, ``aten.type_as.default`` (the target is the output's dtype):

* float ↔ float, int ↔ int, int → float, bool → anything: nothing (the value is the same blob);
* float → int: ``pnnx.Expression`` ``trunc(@0)`` (PyTorch truncates toward zero);
* anything → bool: ``pnnx.Expression`` ``ne(@0,0)`` (an exact 0/1 blob, see
  :mod:`engine.converters.compare`).

Complex dtypes are refused.
"""
from __future__ import annotations

from ..convert.registry import aten_converter
from ._expression import ExpressionBuilder

_FLOATS = ("f32", "f16", "bf16", "f64")
_INTS = ("i64", "i32", "i16", "i8", "u8")
CASTS = ("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device", "aten.to.other",
         "aten.type_as.default")


def _check_cast(op, ctx):
    i, o = op.inputs[0].dtype, op.outputs[0].dtype
    known = _FLOATS + _INTS + ("bool",)
    if i not in known or o not in known:
        return f"unsupported: cast from {i} to {o} (ncnn computes with real numbers)"
    return None


@aten_converter(*CASTS, validator=_check_cast)
def cast(ctx, op):
    x = op.inputs[0]
    i, o = x.dtype, op.outputs[0].dtype
    e = ExpressionBuilder()
    if o == "bool" and i != "bool":
        return ctx.emit("pnnx.Expression", [x], params={"expr": e.call("ne", e.input(x), e.literal(0))})
    if o in _INTS and i in _FLOATS:
        return ctx.emit("pnnx.Expression", [x], params={"expr": e.call("trunc", e.input(x))})
    return x
