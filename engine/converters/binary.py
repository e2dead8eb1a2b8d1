"""Elementwise arithmetic and unary math.

ATen → pnnx: every overload below becomes one ``pnnx.Expression`` (pnnx's own form), e.g.
``aten.add.Tensor(x, y, alpha=2)`` → ``expr=add(@0,mul(@1,2))``, ``aten.rsub.Scalar(x, 1)`` →
``expr=sub(1,@0)``. Scalar operands (Python numbers, 0-d / one-element constant tensors that do
not grow the result's rank) become literals.

* binary: ``add``/``sub`` (``.Tensor``/``.Scalar``, with ``alpha``), ``rsub``, ``mul``, ``div``
  (``.Tensor``/``.Scalar``/``_mode`` with ``rounding_mode`` ``trunc``/``floor``),
  ``true_divide``, ``maximum``/``minimum``/``max.other``/``min.other``, ``pow`` (all three
  overloads), ``floor_divide``, ``remainder``, ``fmod``, ``atan2``;
* unary: ``neg abs sqrt rsqrt exp log log2 log10 log1p expm1 reciprocal square floor ceil round
  trunc sign sin cos tan asin acos atan sinh cosh asinh acosh atanh erf`` (``positive`` is
  removed).

pnnx → ncnn: ``pnnx.Expression`` is expanded like pnnx's ``expand_expression``: one ``UnaryOp``
(``Erf`` for erf) or ``BinaryOp`` per call; a literal operand gives ``with_scalar=1`` (the
``R*`` op types when the literal comes first); ``pow(x, 2)`` is ``UnaryOp`` square and
``pow(x, 0.5)`` sqrt; an other integer exponent up to 16 is squarings and products (ncnn's POW is
``exp(b * log(a))``, NaN for a negative ``a``); ``remainder(a, b)`` (PyTorch's, floored) is
``a - floor_divide(a, b) * b`` because ncnn's REMAINDER op is C's ``remainderf``;
``floor_divide`` and ``div`` with a rounding mode are ``floor(a / b)`` corrected by the
remainder it leaves (ncnn's division is a reciprocal's on some builds, a few ulps low, which
floors an exact multiple one too low: :meth:`_Expander.floor_quotient`). Tensor–tensor
broadcasting is made exact by :mod:`engine.converters._broadcast`.
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..ncnn.enums import BinaryOpType, UnaryOpType
from ._broadcast import Value, align_operands, broadcast_shapes, result_value
from .symbolic import is_symbolic_scalar
from ._expression import Arg, Call, ExpressionBuilder, ExpressionError, evaluate, is_literal, parse
from ._logic_layers import EXPANSIONS

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- ATen → pnnx
#: overload → (expression function, argument names of the two operands)
BINARY = {
    "aten.add.Tensor": ("add", "self", "other"), "aten.add.Scalar": ("add", "self", "other"),
    "aten.sub.Tensor": ("sub", "self", "other"), "aten.sub.Scalar": ("sub", "self", "other"),
    "aten.rsub.Tensor": ("sub", "other", "self"), "aten.rsub.Scalar": ("sub", "other", "self"),
    "aten.mul.Tensor": ("mul", "self", "other"), "aten.mul.Scalar": ("mul", "self", "other"),
    "aten.div.Tensor": ("div", "self", "other"), "aten.div.Scalar": ("div", "self", "other"),
    "aten.div.Tensor_mode": ("div", "self", "other"), "aten.div.Scalar_mode": ("div", "self", "other"),
    "aten.true_divide.Tensor": ("div", "self", "other"),
    "aten.maximum.default": ("maximum", "self", "other"), "aten.minimum.default": ("minimum", "self", "other"),
    "aten.max.other": ("maximum", "self", "other"), "aten.min.other": ("minimum", "self", "other"),
    "aten.pow.Tensor_Tensor": ("pow", "self", "exponent"), "aten.pow.Tensor_Scalar": ("pow", "self", "exponent"),
    "aten.pow.Scalar": ("pow", "self", "exponent"),
    "aten.floor_divide.default": ("floor_divide", "self", "other"),
    "aten.floor_divide.Scalar": ("floor_divide", "self", "other"),
    "aten.remainder.Tensor": ("remainder", "self", "other"), "aten.remainder.Scalar": ("remainder", "self", "other"),
    "aten.remainder.Scalar_Tensor": ("remainder", "self", "other"),
    "aten.fmod.Tensor": ("fmod", "self", "other"), "aten.fmod.Scalar": ("fmod", "self", "other"),
    "aten.atan2.default": ("atan2", "self", "other"),
}

#: unary overload → expression function
UNARY = {f"aten.{name}.default": name for name in (
    "neg", "abs", "sqrt", "rsqrt", "exp", "log", "log10", "log1p", "expm1", "reciprocal", "square", "floor",
    "ceil", "round", "trunc", "sign", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "erf")}
UNARY["aten.round.decimals"] = "round"
UNARY["aten.fix.default"] = "trunc"

_LN2 = math.log(2.0)


def _scalar_param(ctx, op, name: str) -> Any:
    v = op.params.get(name)
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return v
    return ctx.unsupported(f"{name}={v!r} is not a number")


def _term(ctx, op, e: ExpressionBuilder, name: str, other: str | list[str] | None) -> str:
    """Expression text for argument ``name``: a tensor input, or a literal for a number or a
    one-element constant that does not change the result's shape (its rank is at most that of
    the ``other`` argument(s))."""
    if name in op.input_names:
        opd = op.inputs[op.input_names.index(name)]
        value = ctx.const_value(opd)
        if value is not None and np.size(value) == 1:
            others = [_arg_shape(op, o) for o in (other if isinstance(other, list) else [other])]
            if opd.shape is not None and others and all(o is not None for o in others) and \
                    len(opd.shape) <= max(len(o) for o in others):
                return e.literal(np.asarray(value).reshape(-1)[0].item())
        if opd.shape == [] and "expr" in opd.meta:
            ctx.unsupported(f"{name} is the symbolic scalar {opd.meta['expr']} (not a constant)")
        return e.input(opd)
    return e.literal(_scalar_param(ctx, op, name))


def _arg_shape(op, name: str | None) -> list | None:
    if name is None:
        return None
    if name in op.input_names:
        return op.inputs[op.input_names.index(name)].shape
    return []  # a scalar


def _check_alpha(ctx, op) -> Any:
    alpha = op.params.get("alpha", 1)
    if not isinstance(alpha, (int, float)):
        ctx.unsupported(f"alpha={alpha!r} is not a number")
    return alpha


def expression_of(ctx, op, fn: str, *names: str):
    """``fn(names...)`` of the op's arguments (tensors or literals) as one ``pnnx.Expression``."""
    e = ExpressionBuilder()
    terms = [_term(ctx, op, e, n, [m for m in names if m != n]) for n in names]
    return _emit_expression(ctx, op, e, e.call(fn, *terms))


@aten_converter(*BINARY)
def binary_expression(ctx, op):
    fn, first, second = BINARY[op.type]
    e = ExpressionBuilder()
    a = _term(ctx, op, e, first, second)
    b = _term(ctx, op, e, second, first)
    if op.type.startswith(("aten.add.", "aten.sub.", "aten.rsub.")):
        alpha = _check_alpha(ctx, op)
        if alpha != 1:  # alpha scales the subtrahend / second addend (``self`` of rsub)
            b = e.call("mul", b, e.literal(alpha))
    text = e.call(fn, a, b)
    mode = op.params.get("rounding_mode")
    if op.type.startswith("aten.div.") and mode is not None:
        if mode not in ("trunc", "floor"):
            ctx.unsupported(f"rounding_mode={mode!r}")
        text = e.call(mode, text)
    return _emit_expression(ctx, op, e, text)


@aten_converter(*UNARY)
def unary_expression(ctx, op):
    if op.type == "aten.round.decimals" and op.params.get("decimals", 0) != 0:
        ctx.unsupported(f"round with decimals={op.params.get('decimals')}")
    e = ExpressionBuilder()
    return _emit_expression(ctx, op, e, e.call(UNARY[op.type], _term(ctx, op, e, "self", None)))


@aten_converter("aten.log2.default")
def log2(ctx, op):
    e = ExpressionBuilder()
    return _emit_expression(ctx, op, e, e.call("div", e.call("log", e.input(op.inputs[0])), e.literal(_LN2)))


@aten_converter("aten.positive.default")
def positive(ctx, op):
    return op.inputs[0]


def _emit_expression(ctx, op, e: ExpressionBuilder, text: str):
    if not e.inputs:
        ctx.unsupported("all operands are constants (left for constant folding)")
    return ctx.emit("pnnx.Expression", e.inputs, params={"expr": text})


# ---------------------------------------------------------------------------- pnnx → ncnn
UNARY_OP_TYPES = {
    "abs": UnaryOpType.ABS, "neg": UnaryOpType.NEG, "floor": UnaryOpType.FLOOR, "ceil": UnaryOpType.CEIL,
    "square": UnaryOpType.SQUARE, "sqrt": UnaryOpType.SQRT, "rsqrt": UnaryOpType.RSQRT, "exp": UnaryOpType.EXP,
    "log": UnaryOpType.LOG, "sin": UnaryOpType.SIN, "cos": UnaryOpType.COS, "tan": UnaryOpType.TAN,
    "asin": UnaryOpType.ASIN, "acos": UnaryOpType.ACOS, "atan": UnaryOpType.ATAN,
    "reciprocal": UnaryOpType.RECIPROCAL, "tanh": UnaryOpType.TANH, "log10": UnaryOpType.LOG10,
    "round": UnaryOpType.ROUND, "trunc": UnaryOpType.TRUNC, "sign": UnaryOpType.SIGN, "expm1": UnaryOpType.EXPM1,
    "sinh": UnaryOpType.SINH, "asinh": UnaryOpType.ASINH, "cosh": UnaryOpType.COSH, "acosh": UnaryOpType.ACOSH,
    "atanh": UnaryOpType.ATANH, "log1p": UnaryOpType.LOG1P,
}

#: function → (op type, op type when the literal/left operand is swapped)
BINARY_OP_TYPES = {
    "add": (BinaryOpType.ADD, BinaryOpType.ADD), "sub": (BinaryOpType.SUB, BinaryOpType.RSUB),
    "mul": (BinaryOpType.MUL, BinaryOpType.MUL), "div": (BinaryOpType.DIV, BinaryOpType.RDIV),
    "maximum": (BinaryOpType.MAX, BinaryOpType.MAX), "max": (BinaryOpType.MAX, BinaryOpType.MAX),
    "minimum": (BinaryOpType.MIN, BinaryOpType.MIN), "min": (BinaryOpType.MIN, BinaryOpType.MIN),
    "pow": (BinaryOpType.POW, BinaryOpType.RPOW), "atan2": (BinaryOpType.ATAN2, BinaryOpType.RATAN2),
    "fmod": (BinaryOpType.FMOD, BinaryOpType.RFMOD), "logaddexp": (BinaryOpType.LOGADDEXP, BinaryOpType.LOGADDEXP),
    "floor_divide": (BinaryOpType.FLOOR_DIVIDE, BinaryOpType.RFLOOR_DIVIDE),
}

#: ``pow(x, literal)`` exponents computed by a cheaper, exact UnaryOp
_POW_AS_UNARY = {2: UnaryOpType.SQUARE, 0.5: UnaryOpType.SQRT}  # 2 == 2.0 as a key


class _Expander:
    """Emits the ncnn layers of one ``pnnx.Expression``."""

    def __init__(self, ctx, op):
        self.ctx, self.op = ctx, op
        self.dtype = op.outputs[0].dtype if op.outputs else None

    def expand(self, node) -> Any:
        if isinstance(node, Arg):
            if node.index >= len(self.op.inputs):
                self.ctx.unsupported(f"expression refers to @{node.index} but has {len(self.op.inputs)} inputs")
            return Value.of(self.op.inputs[node.index])
        if is_literal(node):
            return node
        if not isinstance(node, Call):
            self.ctx.unsupported(f"expression term {node!r}")
        if node.name in ("floor", "trunc") and len(node.args) == 1 and isinstance(node.args[0], Call) \
                and node.args[0].name == "div" and len(node.args[0].args) == 2:  # div(rounding_mode=...)
            a, b = (self.expand(x) for x in node.args[0].args)
            if isinstance(a, Value) or isinstance(b, Value):
                return self.floor_quotient(a, b) if node.name == "floor" else self.trunc_quotient(a, b)
        args = [self.expand(a) for a in node.args]
        if all(not isinstance(a, Value) for a in args):
            try:
                return evaluate(node.name, args)
            except (ExpressionError, ValueError, ZeroDivisionError, OverflowError) as ex:
                self.ctx.unsupported(f"cannot evaluate {node.name}{tuple(args)}: {ex}")
        if node.name in EXPANSIONS:
            try:
                return EXPANSIONS[node.name](self, *args)
            except TypeError:
                self.ctx.unsupported(f"expression function {node.name} with {len(args)} arguments")
        if len(args) == 1:
            return self.unary(node.name, args[0])
        if len(args) == 2:
            return self.binary(node.name, args[0], args[1])
        return self.ctx.unsupported(f"expression function {node.name} with {len(args)} arguments")

    def _out(self, opd, shape, batched) -> Value:
        return result_value(opd, shape, batched, self.dtype)

    def unary(self, name: str, x: Value) -> Value:
        if name == "erf":
            return self._out(self.ctx.layer("Erf", [x.operand]), x.shape, x.bdim)
        if name not in UNARY_OP_TYPES:
            self.ctx.unsupported(f"expression function {name} has no ncnn equivalent")
        return self._out(self.ctx.layer("UnaryOp", [x.operand], op_type=UNARY_OP_TYPES[name]), x.shape, x.bdim)

    def binary(self, name: str, a: Any, b: Any) -> Value:
        if name == "remainder":  # ncnn's REMAINDER is C remainderf (nearest quotient), not PyTorch's
            return self.binary("sub", a, self.binary("mul", self.binary("floor_divide", a, b), b))
        if name == "floor_divide":
            return self.floor_quotient(a, b)
        if name not in BINARY_OP_TYPES:
            self.ctx.unsupported(f"expression function {name} has no ncnn equivalent")
        forward, swapped = BINARY_OP_TYPES[name]
        if name == "pow" and not isinstance(b, Value) and b not in _POW_AS_UNARY and _small_integer(b):
            return self.integer_power(a, int(b))
        if not isinstance(b, Value):
            if name == "pow" and b in _POW_AS_UNARY:
                layer = self.ctx.layer("UnaryOp", [a.operand], op_type=_POW_AS_UNARY[b])
            else:
                layer = self.ctx.layer("BinaryOp", [a.operand], op_type=forward, with_scalar=1, b=float(b))
            return self._out(layer, a.shape, a.bdim)
        if not isinstance(a, Value):
            layer = self.ctx.layer("BinaryOp", [b.operand], op_type=swapped, with_scalar=1, b=float(a))
            return self._out(layer, b.shape, b.bdim)
        what = f"{name} of {a.operand.name} {a.shape} and {b.operand.name} {b.shape}"
        aligned = align_operands(self.ctx, a, b, what)
        return self._out(self.ctx.layer("BinaryOp", list(aligned[:2]), op_type=forward), aligned.shape,
                         aligned.batch_dim)

    def floor_quotient(self, a: Any, b: Any) -> Value:
        """``floor(a / b)``, exact: ncnn's division goes through a reciprocal on some builds (the
        x86 wheel on an AVX-512 machine gives 6 / 6 = 0.99999994 for the elements after the last
        full vector), which floors an exact multiple one too low, so the floored quotient ``q``
        is corrected by the remainder ``r = a - q·b``, which must lie in ``[0, |b|)`` once
        turned to ``b``'s sign: ``q += floor((sign(r') + sign(r' - |b|) + 1) / 2)`` with
        ``r' = r·sign(b)`` is -1 below that range, 0 in it and +1 above, from signs alone."""
        call = self._call
        q = call("floor", call("div", a, b))
        rs = self._times(call("sub", a, self._times(q, b)), call("sign", b))
        above = call("sub", rs, call("abs", b))
        votes = call("add", call("add", call("sign", rs), call("sign", above)), 1.0)
        return call("add", q, call("floor", self._times(votes, 0.5)))

    def trunc_quotient(self, a: Any, b: Any) -> Value:
        """``trunc(a / b)`` exact, as :meth:`floor_quotient` of the magnitudes, signed."""
        call = self._call
        return self._times(self.floor_quotient(call("abs", a), call("abs", b)),
                           self._times(call("sign", a), call("sign", b)))

    def _call(self, name: str, *args: Any) -> Any:
        """``name(*args)``: layers when an argument is a run-time value, else the number
        (as :meth:`expand` treats a call)."""
        if not any(isinstance(x, Value) for x in args):
            return evaluate(name, list(args))
        return self.unary(name, args[0]) if len(args) == 1 else self.binary(name, *args)

    def _times(self, x: Any, y: Any) -> Any:
        """``x * y`` without a layer for a factor of 1 (and only a negation for -1)."""
        for v, k in ((x, y), (y, x)):
            if isinstance(v, Value) and not isinstance(k, Value) and float(k) in (1.0, -1.0):
                return v if float(k) == 1.0 else self.unary("neg", v)
        return self._call("mul", x, y)

    def integer_power(self, a: Value, n: int) -> Value:
        """``a ** n`` by multiplications (ncnn's POW is ``exp(n * log(a))``: NaN for a negative
        ``a``, which an integer power is defined for)."""
        if n < 0:
            return self.unary("reciprocal", self.integer_power(a, -n))
        if n == 0:
            return self.binary("add", self.binary("mul", a, 0.0), 1.0)
        if n == 1:
            return a
        half = self.integer_power(a, n // 2)
        sq = self.unary("square", half)
        return sq if n % 2 == 0 else self.binary("mul", sq, a)


def _small_integer(v) -> bool:
    return isinstance(v, (int, float)) and float(v).is_integer() and abs(v) <= 16


def _check_expression(op, ctx):
    try:
        parse(str(op.params.get("expr", "")))
    except ExpressionError as ex:
        return f"unsupported: {ex}"
    for opd in op.inputs:
        if is_symbolic_scalar(opd):
            return (f"unsupported: expression {op.params['expr']} computes with the run-time size value {opd.name}; "
                    "ncnn cannot compute with tensor sizes (fix the shape with --inputshape)")
    return None


@ncnn_rule("pnnx.Expression", validator=_check_expression)
def expression_layers(ctx, op):
    tree = parse(str(op.params["expr"]))
    result = _Expander(ctx, op).expand(tree)
    if not isinstance(result, Value):
        ctx.unsupported(f"expression {op.params['expr']} is a constant")
    out = op.outputs[0]
    if out.shape is not None and result.shape is not None:
        broadcast_shapes(list(out.shape), result.shape, f"expression {op.params['expr']}")
    return result.operand
