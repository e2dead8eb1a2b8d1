"""Readable text for symbolic sizes: sympy ``srepr`` strings → compact infix.

Serialized graphs spell symbolic sizes as sympy ``srepr`` text, e.g.
``Add(Mul(Integer(4), Symbol('s53', positive=True, integer=True)), Integer(-8))``. The IR
(and its one-line-per-operator text form) wants a short token with no spaces or commas, so
this module rewrites it as ``4*s53-8``. A lone symbol is its name (``s53``, which is what
``str(SymExpr)`` gives); ``FloorDiv`` is ``//``, ``Mod``/``PythonMod`` ``%``, true divisions
``/``, ``Pow`` ``**``, comparisons ``==``/``<=``..., and any other function keeps its sympy name
with arguments separated by ``;`` (``Max(1;s53-2)``) because a comma would split an IR shape.
Text that cannot be parsed falls back to the original with spaces dropped and ``,`` → ``;``.
"""
from __future__ import annotations

import functools
import re
from typing import Any

_TOKEN = re.compile(r"\s*(?:(?P<num>-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|(?P<id>[A-Za-z_][A-Za-z_0-9]*)"
                    r"|(?P<str>'[^']*')|(?P<punct>[(),=]))")

_INFIX = {"FloorDiv": ("//", 2), "Mod": ("%", 2), "PythonMod": ("%", 2), "IntTrueDiv": ("/", 2),
          "FloatTrueDiv": ("/", 2), "Pow": ("**", 3), "PowByNatural": ("**", 3), "FloatPow": ("**", 3),
          "Equality": ("==", 0), "Unequality": ("!=", 0), "StrictLessThan": ("<", 0), "LessThan": ("<=", 0),
          "StrictGreaterThan": (">", 0), "GreaterThan": (">=", 0), "Eq": ("==", 0), "Ne": ("!=", 0),
          "Lt": ("<", 0), "Le": ("<=", 0), "Gt": (">", 0), "Ge": (">=", 0)}
_CONSTANTS = {"Infinity": "oo", "NegativeInfinity": "-oo", "BooleanTrue": "True", "BooleanFalse": "False",
              "true": "True", "false": "False", "oo": "oo", "zoo": "zoo", "nan": "nan", "NaN": "nan",
              "One": "1", "Zero": "0", "NegativeOne": "-1", "Half": "1/2"}


class _Parse:
    """Parser of sympy ``srepr`` into ``(name, [args])`` trees, numbers and strings."""

    def __init__(self, text: str):
        self.toks = [(m.lastgroup, m.group(m.lastgroup)) for m in _TOKEN.finditer(text)]
        if "".join(t for _, t in self.toks) != re.sub(r"\s+", "", text):
            raise ValueError("unexpected characters")
        self.i = 0

    def take(self, value: str | None = None) -> tuple[str, str]:
        kind, tok = self.toks[self.i]
        if value is not None and tok != value:
            raise ValueError(f"expected {value!r}, got {tok!r}")
        self.i += 1
        return kind, tok

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def expr(self) -> Any:
        kind, tok = self.take()
        if kind == "num":
            return tok
        if kind == "str":
            return tok[1:-1]
        if kind != "id":
            raise ValueError(f"unexpected {tok!r}")
        if self.peek() != "(":
            return (tok, None)
        self.take("(")
        args: list[Any] = []
        while self.peek() != ")":
            if self.i + 1 < len(self.toks) and self.toks[self.i + 1][1] == "=":
                self.take()
                self.take("=")
                self.expr()  # keyword arguments (assumptions) are dropped
            else:
                args.append(self.expr())
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return (tok, args)


def _is_negative(text: str) -> bool:
    return text.startswith("-")


def _fmt(node: Any) -> tuple[str, int]:
    """Text of a parsed node and its precedence (0 relation, 1 sum, 2 product, 3 power, 4 atom)."""
    if isinstance(node, str):
        return node, (1 if _is_negative(node) else 4)
    name, args = node
    if args is None:
        return _CONSTANTS.get(name, name), 4
    if name in ("Symbol", "Dummy") and args:
        return args[0], 4
    if name in ("Integer", "Float") and args:
        return _fmt(args[0])
    if name in _CONSTANTS and not args:
        return _CONSTANTS[name], 4
    if name == "Rational" and len(args) == 2:
        return f"{args[0]}/{args[1]}", 2
    if name == "Add":
        out = ""
        for a in args:
            text, _ = _fmt(a)
            out += text if (not out or _is_negative(text)) else "+" + text
        return out, 1
    if name == "Mul":
        first, _ = _fmt(args[0])
        if len(args) > 1 and _is_negative(first) and first.lstrip("-").isdigit():
            # a negative coefficient leads: -s53, -3*s53 (a sum-level term)
            rest = "*".join(_wrap(a, 2) for a in args[1:])
            return ("-" if first == "-1" else first + "*") + rest, 1
        return "*".join(_wrap(a, 2) for a in args), 2
    if name in _INFIX and len(args) == 2:
        op, prec = _INFIX[name]
        # left-associative: the right operand needs strictly higher precedence
        return f"{_wrap(args[0], prec)}{op}{_wrap(args[1], prec + 1)}", prec
    return name + "(" + ";".join(_fmt(a)[0] for a in args) + ")", 4


def _wrap(node: Any, prec: int) -> str:
    text, p = _fmt(node)
    return text if p >= prec else f"({text})"


@functools.lru_cache(maxsize=4096)
def expr_text(expr: str) -> str | int:
    """Compact infix text of a sympy ``srepr`` expression (an int when it is a constant)."""
    try:
        parser = _Parse(expr)
        text, _ = _fmt(parser.expr())
        if parser.peek() is not None:
            raise ValueError("trailing tokens")
    except (ValueError, IndexError):
        return re.sub(r"\s+", "", expr).replace(",", ";")
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def dim(value: Any) -> int | str | None:
    """A size as the IR stores it: an int, or the expression text of a ``SymExpr``."""
    if value is None or isinstance(value, int):
        return value
    expr = getattr(value, "expr", None)
    return expr_text(expr) if isinstance(expr, str) else str(value)
