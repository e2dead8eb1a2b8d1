"""Readable text for symbolic sizes.

Symbolic sizes are serialized with sympy's ``srepr``:
``Mul(Integer(2), Symbol('s17', positive=True, integer=True))``. :func:`pretty` turns that into
``2*s17`` without sympy, and :func:`symbols_in` lists the symbols an expression mentions. Text
that does not parse is returned unchanged.
"""
from __future__ import annotations

import functools
import re

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z_0-9]*)|(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(.))")
_MAX_DEPTH = 64
_FUNCS = {"FloorDiv": "//", "Mod": "%", "PythonMod": "%"}
_PREC = {"+": 1, "*": 2, "/": 2, "//": 2, "%": 2, "**": 3}


class _Call:
    __slots__ = ("name", "args")

    def __init__(self, name: str, args: list):
        self.name = name
        self.args = args


def _parse(text: str):
    toks = []
    for m in _TOKEN.finditer(text):
        ident, num, string, other = m.groups()
        if ident:
            toks.append(("id", ident))
        elif num:
            toks.append(("num", num))
        elif string:
            toks.append(("str", string[1:-1]))
        elif other and not other.isspace():
            toks.append(("op", other))
    pos = 0

    def expr(depth: int):
        nonlocal pos
        if depth > _MAX_DEPTH or pos >= len(toks):
            raise ValueError
        kind, val = toks[pos]
        pos += 1
        if kind in ("num", "str"):
            return val
        if kind != "id":
            raise ValueError
        if pos < len(toks) and toks[pos] == ("op", "("):
            pos += 1
            args = []
            while toks[pos] != ("op", ")"):
                if toks[pos][0] == "id" and pos + 1 < len(toks) and toks[pos + 1] == ("op", "="):
                    pos += 2
                    expr(depth + 1)  # keyword argument (assumptions): dropped
                else:
                    args.append(expr(depth + 1))
                if toks[pos] == ("op", ","):
                    pos += 1
            pos += 1
            return _Call(val, args)
        return val

    tree = expr(0)
    if pos != len(toks):
        raise ValueError
    return tree


def _render(node) -> tuple[str, int]:
    """(text, precedence) of a parsed node."""
    if not isinstance(node, _Call):
        return str(node), 9
    name, args = node.name, node.args
    if name in ("Symbol", "Dummy") and args:
        return str(args[0]), 9
    if name == "Integer" and args:
        return str(args[0]), 9 if not str(args[0]).startswith("-") else 2
    if name == "Float" and args:
        return str(args[0]), 9
    if name == "Rational" and len(args) == 2:
        return f"{args[0]}/{args[1]}", 2
    if name in ("Add", "Mul") and args:
        op = " + " if name == "Add" else "*"
        prec = _PREC[op.strip()]
        parts = []
        for a in args:
            text, p = _render(a)
            if name == "Mul" and text == "-1":
                parts.append("-")
                continue
            # a floor division or remainder is a factor in parentheses: 2*(s//3), -(s//3) (2*s//3 is (2*s)//3)
            floor = name == "Mul" and isinstance(a, _Call) and a.name in _FUNCS
            parts.append(f"({text})" if p < prec or floor else text)
        out = parts[0]
        for part in parts[1:]:
            if name == "Add" and part.startswith("-"):
                out += " - " + part[1:]
            elif out == "-":
                out += part
            else:
                out += op + part
        return out, prec
    if name == "Pow" and len(args) == 2:
        base, p = _render(args[0])
        exp, _ = _render(args[1])
        base = f"({base})" if p < 9 else base
        if exp == "-1":
            return f"1/{base}", 2
        return f"{base}**{exp}", 3
    if name in _FUNCS and len(args) == 2:
        op = _FUNCS[name]
        a, pa = _render(args[0])
        b, pb = _render(args[1])
        prec = _PREC[op]
        # a negated dividend in parentheses: (-s)//7 floors the negative number, and an Add
        # turning "+ -s//7" into "- s//7" would mean -(s//7)
        left = a if pa >= prec and not a.startswith("-") else f"({a})"
        return f"{left}{op}{b if pb > prec else '(' + b + ')'}", prec
    inner = ", ".join(_render(a)[0] for a in args)
    return f"{name.lower() if name in ('Max', 'Min') else name}({inner})", 9


@functools.lru_cache(maxsize=4096)
def pretty(expr: str) -> str:
    """``Mul(Integer(2), Symbol('s17', ...))`` → ``2*s17``; unparseable text is returned as is."""
    try:
        return _render(_parse(expr))[0]
    except (ValueError, IndexError):
        return expr


def symbols_in(expr: str) -> list[str]:
    """Names of the ``Symbol(...)`` s in an expression, in order of appearance, no repeats."""
    seen: list[str] = []
    for m in re.finditer(r"Symbol\('([A-Za-z_][A-Za-z_0-9]*)'", expr):
        if m.group(1) not in seen:
            seen.append(m.group(1))
    return seen
