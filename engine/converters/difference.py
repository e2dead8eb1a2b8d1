"""Differences along a dim of run-time tensors (constant ones fold in ``fold_constants``).

ATen → pnnx, ``aten.diff.default(self, n, dim, prepend, append)`` (the training dialect keeps
it; core ATen spells it out as slices and a subtraction):

* ``prepend`` / ``append`` first: ``torch.cat([prepend, self, append], dim)``;
* then ``n`` times ``x[1:] - x[:-1]`` along ``dim`` (two ``Tensor.slice`` and one
  ``pnnx.Expression``; for bools PyTorch's difference is ``!=``: ``ne``, an exact 0/1 blob).

The size along ``dim`` must be static (each step's slices have a known length).
"""
from __future__ import annotations

from ..convert.registry import aten_converter
from ..convert.shapes import normalize_dim
from ._expression import ExpressionBuilder
from .shape import INT64_MAX


def _operands(op):
    """``self``, and what is joined along the dim: ``[prepend, self, append]`` without the absent ones."""
    x = op.named_input("self") or op.inputs[0]
    return x, [p for p in (op.named_input("prepend"), x, op.named_input("append")) if p is not None]


def _check_diff(op, ctx):
    x, parts = _operands(op)
    if x.shape is None or not x.shape:
        return "unsupported: diff of a tensor of unknown shape or a 0-d tensor"
    dim = normalize_dim(op.params.get("dim", -1), len(x.shape))
    for p in parts:
        if p.shape is None or len(p.shape) != len(x.shape) or not isinstance(p.shape[dim], int):
            return (f"unsupported: diff along dim {dim} of {p.name} with shape {p.shape} (the size along it "
                    "must be static, and prepend/append of the same rank)")
    n = op.params.get("n", 1)
    if not isinstance(n, int) or n < 0:
        return f"unsupported: diff with n={n!r}"
    return None


@aten_converter("aten.diff.default", validator=_check_diff)
def diff(ctx, op):
    x, parts = _operands(op)
    dtype = op.outputs[0].dtype
    dim = normalize_dim(op.params.get("dim", -1), len(x.shape))
    cur = x
    if len(parts) > 1:
        shape = list(cur.shape)
        shape[dim] = sum(int(p.shape[dim]) for p in parts)
        cur = ctx.emit("torch.cat", parts, params={"dim": dim}, shape=shape, dtype=dtype, name=f"{ctx.name}_joined")
    for step in range(int(op.params.get("n", 1))):
        shape = list(cur.shape)
        shape[dim] = max(int(shape[dim]) - 1, 0)
        later = ctx.emit("Tensor.slice", [cur], params={"dim": dim, "start": 1, "end": INT64_MAX, "step": 1},
                         shape=shape, dtype=cur.dtype, name=f"{ctx.name}_later{step}")
        earlier = ctx.emit("Tensor.slice", [cur], params={"dim": dim, "start": 0, "end": -1, "step": 1},
                           shape=shape, dtype=cur.dtype, name=f"{ctx.name}_earlier{step}")
        e = ExpressionBuilder()
        text = e.call("ne" if dtype == "bool" else "sub", e.input(later), e.input(earlier))
        cur = ctx.emit("pnnx.Expression", e.inputs, params={"expr": text}, shape=shape, dtype=dtype,
                       name=f"{ctx.name}_step{step}")
    return cur
