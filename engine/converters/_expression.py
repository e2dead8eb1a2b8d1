"""The ``pnnx.Expression`` mini-language: build, parse and evaluate expression strings.

pnnx writes elementwise arithmetic as one operator ``pnnx.Expression`` whose ``expr`` param is
a prefix expression over its inputs ``@0, @1, ...`` and literals, e.g. ``add(@0,mul(@1,2))``
or ``sub(1,@0)``. This module holds the builder the ATen→pnnx converters use
(:class:`ExpressionBuilder`), the parser the pnnx→ncnn rule uses (:func:`parse`) and a
numeric evaluator for literal sub-expressions (:func:`evaluate`).

A parsed expression is a tree of :class:`Call` (``name``, ``args``), :class:`Arg` (input index)
and plain Python numbers (literals).
"""
from __future__ import annotations

import functools
import math
import re
from typing import Any, Sequence, Union

from ..records import record

#: unary functions of the language, with their Python evaluation
UNARY_FUNCS = {
    "abs": abs, "neg": lambda x: -x, "sqrt": math.sqrt, "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "exp": math.exp, "log": math.log, "reciprocal": lambda x: 1.0 / x, "square": lambda x: x * x,
    "floor": math.floor, "ceil": math.ceil, "round": round, "trunc": math.trunc,
    "sign": lambda x: float((x > 0) - (x < 0)), "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "asin": math.asin, "acos": math.acos, "atan": math.atan, "sinh": math.sinh, "cosh": math.cosh,
    "tanh": math.tanh, "asinh": math.asinh, "acosh": math.acosh, "atanh": math.atanh,
    "log10": math.log10, "log1p": math.log1p, "expm1": math.expm1, "erf": math.erf,
    "logical_not": lambda x: float(not x),
}

#: binary functions of the language, with their Python evaluation
BINARY_FUNCS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b, "maximum": max, "minimum": min,
    "max": max, "min": min, "atan2": math.atan2, "fmod": math.fmod,
    "floor_divide": lambda a, b: math.floor(a / b), "remainder": lambda a, b: a - math.floor(a / b) * b,
    "logaddexp": lambda a, b: max(a, b) + math.log1p(math.exp(-abs(a - b))),
    # comparisons and boolean logic give 1.0 / 0.0 (a bool tensor is 0/1 floats in ncnn)
    "eq": lambda a, b: float(a == b), "ne": lambda a, b: float(a != b), "lt": lambda a, b: float(a < b),
    "le": lambda a, b: float(a <= b), "gt": lambda a, b: float(a > b), "ge": lambda a, b: float(a >= b),
    "logical_and": lambda a, b: float(bool(a) and bool(b)), "logical_or": lambda a, b: float(bool(a) or bool(b)),
    "logical_xor": lambda a, b: float(bool(a) != bool(b)),
}

#: functions of three arguments: ``where(condition, a, b)``
TERNARY_FUNCS = {"where": lambda c, a, b: a if c else b}


@record(frozen=True)
class Arg:
    """An expression input ``@index``."""

    index: int


@record(frozen=True)
class Call:
    """A function application ``name(args...)``."""

    name: str
    args: tuple["Node", ...]


Node = Union[Call, Arg, int, float]


class ExpressionError(ValueError):
    """A malformed expression or one with functions this module does not know."""


def format_literal(v: Any) -> str:
    """A number as an expression literal (ints stay ints; floats round-trip exactly)."""
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    f = float(v)
    if math.isnan(f):
        raise ExpressionError(f"literal {f} cannot be written in an expression")
    return repr(f)  # ``inf`` / ``-inf`` parse back


class ExpressionBuilder:
    """Collects the tensor inputs of an expression while its text is built::

        e = ExpressionBuilder()
        text = e.call("add", e.input(x), e.call("mul", e.input(y), e.literal(2)))
        ctx.emit("pnnx.Expression", e.inputs, params={"expr": text})
    """

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def input(self, operand: Any) -> str:
        for i, x in enumerate(self.inputs):
            if x is operand:
                return f"@{i}"
        self.inputs.append(operand)
        return f"@{len(self.inputs) - 1}"

    @staticmethod
    def literal(v: Any) -> str:
        return format_literal(v)

    @staticmethod
    def call(name: str, *args: str) -> str:
        return f"{name}({','.join(args)})"


_TOKEN = re.compile(r"\s*(?:(?P<arg>@\d+)|(?P<num>[-+]?(?:inf\b|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[(),]))")


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Node:
    """Parse an expression string into a tree; raises :class:`ExpressionError`. Trees are
    immutable, so a model's repeated expressions (every residual ``add(@0,@1)``) share one."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ExpressionError(f"cannot parse expression {text!r} at {text[pos:]!r}")
        tokens.append((m.lastgroup or "", m.group(m.lastgroup)))
        pos = m.end()
    node, i = _parse_node(tokens, 0, text)
    if i != len(tokens):
        raise ExpressionError(f"trailing text in expression {text!r}")
    return node


def _parse_node(tokens: Sequence[tuple[str, str]], i: int, text: str) -> tuple[Node, int]:
    if i >= len(tokens):
        raise ExpressionError(f"expression {text!r} ends early")
    kind, tok = tokens[i]
    if kind == "arg":
        return Arg(int(tok[1:])), i + 1
    if kind == "num":
        return (float(tok) if any(c in tok for c in ".eEn") else int(tok)), i + 1
    if kind == "name":
        if tok in ("True", "False"):
            return int(tok == "True"), i + 1
        if i + 1 >= len(tokens) or tokens[i + 1][1] != "(":
            raise ExpressionError(f"{tok!r} in expression {text!r} is not a call")
        i += 2
        args: list[Node] = []
        while True:
            arg, i = _parse_node(tokens, i, text)
            args.append(arg)
            if i >= len(tokens):
                raise ExpressionError(f"unclosed call {tok}( in expression {text!r}")
            if tokens[i][1] == ",":
                i += 1
                continue
            if tokens[i][1] == ")":
                return Call(tok, tuple(args)), i + 1
            raise ExpressionError(f"unexpected {tokens[i][1]!r} in expression {text!r}")
    raise ExpressionError(f"unexpected {tok!r} in expression {text!r}")


def is_literal(node: Node) -> bool:
    return isinstance(node, (int, float)) and not isinstance(node, bool)


def evaluate(name: str, args: Sequence[float]) -> float:
    """Value of function ``name`` on literal arguments."""
    if len(args) == 1 and name in UNARY_FUNCS:
        return UNARY_FUNCS[name](args[0])
    if len(args) == 2 and name in BINARY_FUNCS:
        return BINARY_FUNCS[name](args[0], args[1])
    if len(args) == 3 and name in TERNARY_FUNCS:
        return TERNARY_FUNCS[name](*args)
    raise ExpressionError(f"unknown function {name} with {len(args)} arguments")
