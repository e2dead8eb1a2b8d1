"""Boolean logic and selection with run-time operands.

ATen → pnnx (``pnnx.Expression``; the ncnn layers are :mod:`engine.converters._logic_layers`'s):

* ``aten.logical_{and,or,xor}.default``, ``aten.logical_not.default`` → ``logical_and(@0,@1)``...;
* ``aten.bitwise_{and,or,xor}.{Tensor,Scalar}``, ``aten.__{and,or,xor}__.{Tensor,Scalar}``,
  ``aten.bitwise_not.default`` of bool tensors → the same logical functions (bitwise logic of
  integer tensors is refused: ncnn has no integer arithmetic);
* ``aten.where.{self,ScalarSelf,ScalarOther,Scalar}`` with a run-time condition →
  ``where(@0,@1,@2)``; ``aten.masked_fill.{Scalar,Tensor}`` with a run-time mask →
  ``where(mask,value,self)`` (constant conditions are :mod:`engine.converters.indexing`'s, which
  precomputes the selection);
* ``aten.any.{default,dim,dims}`` / ``aten.all.*`` → ``torch.amax`` / ``torch.amin`` of the 0/1
  values (``ne(x, 0)`` first for a non-bool tensor).
"""
from __future__ import annotations

from ..convert.registry import aten_converter
from .binary import expression_of

LOGICAL = {"aten.logical_and.default": "logical_and", "aten.logical_or.default": "logical_or",
           "aten.logical_xor.default": "logical_xor"}
for _name in ("and", "or", "xor"):
    for _overload in ("Tensor", "Scalar"):
        LOGICAL[f"aten.bitwise_{_name}.{_overload}"] = f"logical_{_name}"
        LOGICAL[f"aten.__{_name}__.{_overload}"] = f"logical_{_name}"
NOT = ("aten.logical_not.default", "aten.bitwise_not.default")


def _bool_operands(op, ctx):
    """Bitwise ops are logical ops only on bool tensors."""
    if op.type.startswith(("aten.logical_",)):
        return None
    for opd in op.inputs:
        if opd.dtype != "bool":
            return f"unsupported: bitwise logic of the {opd.dtype} tensor {opd.name} (ncnn has no integer arithmetic)"
    return None


@aten_converter(*LOGICAL, validator=_bool_operands)
def logical(ctx, op):
    return expression_of(ctx, op, LOGICAL[op.type], "self", "other")


@aten_converter(*NOT, validator=_bool_operands)
def logical_not(ctx, op):
    return expression_of(ctx, op, "logical_not", "self")


def _runtime(name: str):
    def check(op, ctx):
        opd = op.named_input(name)
        if opd is not None and ctx.const_value(opd) is None:
            return None
        return f"unsupported: constant {name} (the constant-{name} rule)"
    check.__name__ = f"runtime_{name}"
    return check


@aten_converter("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar",
                validator=_runtime("condition"))
def where(ctx, op):
    return expression_of(ctx, op, "where", "condition", "self", "other")


@aten_converter("aten.masked_fill.Scalar", "aten.masked_fill.Tensor", validator=_runtime("mask"))
def masked_fill(ctx, op):
    return expression_of(ctx, op, "where", "mask", "value", "self")


#: ``any`` / ``all`` over dims: the largest / smallest 0/1 value
_ANY_ALL = {"aten.any.dim": "torch.amax", "aten.any.dims": "torch.amax", "aten.any.default": "torch.amax",
            "aten.all.dim": "torch.amin", "aten.all.dims": "torch.amin", "aten.all.default": "torch.amin"}


@aten_converter(*_ANY_ALL)
def any_all(ctx, op):
    x = op.inputs[0]
    if x.dtype != "bool":
        x = _as_bool(ctx, x)
    dim = op.params.get("dim")
    if dim is not None and not isinstance(dim, list):
        dim = [dim]
    return ctx.emit(_ANY_ALL[op.type], [x], params={"dim": dim or None, "keepdim": bool(op.params.get("keepdim"))})


def _as_bool(ctx, x):
    from ._expression import ExpressionBuilder

    e = ExpressionBuilder()
    return ctx.emit("pnnx.Expression", [x], params={"expr": e.call("ne", e.input(x), e.literal(0))}, dtype="bool",
                    shape=list(x.shape or []))
