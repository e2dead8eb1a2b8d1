"""Python source for the two kinds of expressions a pnnx graph holds.

* ``pnnx.Expression`` — the prefix mini-language of :mod:`engine.converters._expression`
  (``add(@0,mul(@1,2))``, ``size(@1,2)``) → infix PyTorch code over the inputs' variables:
  ``(v_a + (v_b * 2))``, ``v_x.size(2)``. Functions without an operator spelling become
  ``torch.<name>(...)``; literals passed where torch wants a tensor are wrapped in
  ``torch.tensor``.
* Symbolic sizes (``s77``, ``2*s77-1``, ``max(1;s77-2)``, see :mod:`engine.build.symbolic`) →
  code reading the model inputs' run-time sizes: :class:`SymbolCode` finds, for every symbol,
  an input dimension that *is* that symbol and spells the size as ``v_x.size(0)`` (or, in the
  ncnn script, ``in0.shape[0]``). A size whose symbols no input carries has no spelling (None):
  the caller then falls back to ``-1`` or the traced example size.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

from ..converters._expression import Arg, Call, ExpressionError, parse
from ..ir import Operand
from .py_source import literal

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_divide": "//", "remainder": "%", "pow": "**"}
#: binary functions whose torch form needs tensors (not Python numbers) as arguments
_TENSOR_ARGS = {"maximum": "torch.maximum", "minimum": "torch.minimum", "max": "torch.maximum",
                "min": "torch.minimum", "atan2": "torch.atan2", "logaddexp": "torch.logaddexp",
                "logical_and": "torch.logical_and", "logical_or": "torch.logical_or",
                "logical_xor": "torch.logical_xor"}
#: the same functions of Python numbers (SymInts)
_SYM_ARGS = {"maximum": "torch.sym_max", "minimum": "torch.sym_min", "max": "torch.sym_max", "min": "torch.sym_min"}


class ExpressionSourceError(ValueError):
    """An expression that cannot be written as Python."""


def expression(text: str, var: Callable[[int], str], *, numbers: bool = False) -> str:
    """Python source of a pnnx expression; ``var(i)`` spells input ``@i``. With ``numbers`` the
    inputs are Python numbers (SymInts: sizes), not tensors: ``max``/``min`` are then
    ``torch.sym_max``/``torch.sym_min``."""
    try:
        tree = parse(str(text))
    except ExpressionError as e:
        raise ExpressionSourceError(str(e)) from None
    return _node(tree, var, _SYM_ARGS if numbers else _TENSOR_ARGS)


def unparenthesized(code: str) -> str:
    """``code`` without the parentheses around the whole of it (``(a + b)`` → ``a + b``)."""
    if not (code.startswith("(") and code.endswith(")")):
        return code
    depth = 0
    for c in code[1:-1]:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return code
    return code[1:-1] if depth == 0 else code


def _is_literal(node) -> bool:
    return not isinstance(node, (Arg, Call))


def _node(node, var: Callable[[int], str], binary: dict[str, str]) -> str:
    if isinstance(node, Arg):
        return var(node.index)
    if not isinstance(node, Call):
        return literal(node)
    name, args = node.name, node.args
    if name == "size" and len(args) == 2 and isinstance(args[0], Arg) and isinstance(args[1], int):
        return f"{var(args[0].index)}.size({args[1]})"
    parts = [_node(a, var, binary) for a in args]
    if name in _INFIX and len(args) == 2:
        return f"({parts[0]} {_INFIX[name]} {parts[1]})"
    if name == "neg" and len(args) == 1:
        return f"(-{parts[0]})"
    if binary is _SYM_ARGS and name in binary:
        return f"{binary[name]}({', '.join(parts)})"
    if name in _TENSOR_ARGS or len(args) == 1:  # a literal as a tensor of its tensor partner's dtype
        like = next((p for a, p in zip(args, parts) if isinstance(a, Arg)), None)
        dtype = f", dtype={like}.dtype" if like is not None else ""
        parts = [f"torch.tensor({p}{dtype})" if _is_literal(a) else p for a, p in zip(args, parts)]
    fn = _TENSOR_ARGS.get(name, f"torch.{name}")
    return f"{fn}({', '.join(parts)})"


_DIM_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<num>\d+)|(?P<op>//|\*\*|[-+*/%(),;]))")


class SymbolCode:
    """Run-time spellings of symbolic sizes, read from the model inputs' dimensions.

    ``inputs`` pairs each input operand with its variable; ``size`` formats one dimension read
    (default ``"{var}.size({dim})"``); ``minmax`` spells ``max``/``min`` of sizes."""

    def __init__(self, inputs: Sequence[tuple[Operand, str]], size: str = "{var}.size({dim})",
                 minmax: tuple[str, str] = ("torch.sym_max", "torch.sym_min")):
        self.where: dict[str, str] = {}
        for opd, v in inputs:
            for d, s in enumerate(opd.shape or []):
                if isinstance(s, str) and s.isidentifier():
                    self.where.setdefault(s, size.format(var=v, dim=d))
        self._minmax = {"max": minmax[0], "min": minmax[1]}

    def dim(self, value) -> str | None:
        """``value`` (an int or a symbolic size) as source; None when it cannot be spelled."""
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, int):
            return str(value)
        text = str(value)
        out, pos = [], 0
        while pos < len(text):
            m = _DIM_TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                return None
            pos = m.end()
            if m.group("name"):
                name = m.group("name")
                nxt = text[pos:].lstrip()[:1]
                if nxt == "(" and name in self._minmax:
                    out.append(self._minmax[name])
                elif name in self.where:
                    out.append(self.where[name])
                else:
                    return None
            elif m.group("num"):
                out.append(m.group("num"))
            else:
                op = m.group("op")
                out.append(", " if op in ",;" else op)
        code = "".join(out)
        return f"({code})" if any(c in code for c in "+-*/% ") else code

    def dims(self, values: Sequence, *, minus_one: bool = True) -> list[str] | None:
        """A whole size list as source; a dim that cannot be spelled becomes ``-1`` when it is the
        only one (``minus_one``: a reshape infers it), otherwise the list has no spelling (None).
        With ``minus_one``, a single symbolic dim is always ``-1`` (the plainest form) — unless a
        static ``-1`` already stands for one: a reshape infers only one dim."""
        symbolic = [i for i, v in enumerate(values) if not isinstance(v, int) or isinstance(v, bool)]
        minus_one = minus_one and -1 not in [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if minus_one and len(symbolic) == 1:
            return [("-1" if i in symbolic else str(v)) for i, v in enumerate(values)]
        spelled = [self.dim(v) for v in values]
        missing = [i for i, s in enumerate(spelled) if s is None]
        if not missing:
            return spelled
        if minus_one and len(missing) == 1:
            spelled[missing[0]] = "-1"
            return spelled
        return None
