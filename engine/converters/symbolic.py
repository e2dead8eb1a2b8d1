"""Symbolic shape values that ``fold_constants`` could not fold (dynamic dims).

ATen → pnnx (pnnx's spellings): ``aten.sym_size.int`` → ``Tensor.size`` (``dim``);
``aten.sym_numel.default`` → ``Tensor.numel``; Python-operator arithmetic on SymInt/SymFloat
values (``_operator.add/sub/mul/truediv/floordiv/mod/pow/neg``, ``torch.sym_max/sym_min``) →
``pnnx.Expression``; ``torch.sym_float``/``torch.sym_int`` pass their value through.

They exist so that operators reading sizes from their own output shape (a ``view`` with a
dynamic size) convert; the values are then dead and removed. ncnn cannot compute with tensor
sizes, so a value still used at the ncnn step is refused with a reason naming it.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ._expression import ExpressionBuilder

#: Python operator → expression function (None: unary)
_OPERATORS = {
    "_operator.add": "add", "_operator.sub": "sub", "_operator.mul": "mul", "_operator.truediv": "div",
    "_operator.floordiv": "floor_divide", "_operator.mod": "remainder", "_operator.pow": "pow",
    "torch.sym_max": "maximum", "torch.sym_min": "minimum", "_operator.neg": "neg",
}


def is_symbolic_scalar(opd) -> bool:
    """A SymInt/SymFloat value (from the program, or made from one by these converters)."""
    return opd.shape == [] and ("expr" in opd.meta or (opd.producer is not None
                                                       and opd.producer.type in ("Tensor.size", "Tensor.numel")))


@aten_converter("aten.sym_size.int")
def sym_size(ctx, op):
    return ctx.emit("Tensor.size", [op.inputs[0]], params={"dim": op.params["dim"]})


@aten_converter("aten.sym_numel.default")
def sym_numel(ctx, op):
    return ctx.emit("Tensor.numel", [op.inputs[0]])


def _term(ctx, op, e: ExpressionBuilder, name: str) -> str:
    opd = op.named_input(name)
    if opd is not None:
        return e.input(opd)
    v = op.params.get(name)
    if isinstance(v, (int, float)):
        return e.literal(v)
    return ctx.unsupported(f"{name}={v!r}")


@aten_converter(*_OPERATORS)
def scalar_arithmetic(ctx, op):
    e = ExpressionBuilder()
    args = [_term(ctx, op, e, "a")] + ([] if op.type == "_operator.neg" else [_term(ctx, op, e, "b")])
    if not e.inputs:
        ctx.unsupported("all operands are constants (left for constant folding)")
    return ctx.emit("pnnx.Expression", e.inputs, params={"expr": e.call(_OPERATORS[op.type], *args)})


@aten_converter("torch.sym_float", "torch.sym_int")
def sym_cast(ctx, op):
    opd = op.named_input("a")
    if opd is None:
        ctx.unsupported("constant argument (left for constant folding)")
    return opd


@ncnn_rule("Tensor.size", "Tensor.numel")
def size_value(ctx, op):
    return ctx.unsupported(f"the run-time size of {op.inputs[0].name} is used as a value; ncnn cannot compute with "
                           "tensor sizes (fix the shape with --inputshape)")
