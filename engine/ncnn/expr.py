"""A tiny, safe evaluator for the expressions in the ncnn layer table.

Weight sizes, load conditions and computed defaults are written as small Python expressions
over a layer's param names (``"weight_data_size"``, ``"bias_term and not dynamic_weight"``,
``"embed_dim * (weight_data_size // embed_dim)"``). Only names, int/float literals, arithmetic
(``+ - * / // %``), comparisons, ``and``/``or``/``not``, ``x if c else y``, tuples (for
``in``) and the functions ``sqrt``/``min``/``max`` are allowed.
"""
from __future__ import annotations

import ast
import math
import operator
from functools import lru_cache
from typing import Any, Mapping

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_FUNCS = {"sqrt": math.sqrt, "min": min, "max": max}


class ExprError(ValueError):
    """An expression is malformed or refers to an unknown name."""


@lru_cache(maxsize=None)
def _parse(text: str) -> ast.AST:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise ExprError(f"bad expression {text!r}: {e.msg}") from None


def names(text: str) -> set[str]:
    """The variable names an expression reads (function names excluded)."""
    out: set[str] = set()
    for node in ast.walk(_parse(text)):
        if isinstance(node, ast.Name) and node.id not in _FUNCS:
            out.add(node.id)
    return out


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    """Evaluate ``text`` with names looked up in ``env``."""
    code = _compiled(text)
    if code is None:
        return _eval(_parse(text), env, text)
    try:
        return eval(code, _GLOBALS, env)  # noqa: S307 - only the constructs _eval allows (see _compiled)
    except NameError as e:
        raise ExprError(f"unknown name {e.name!r} in {text!r}") from None


#: the functions of compiled expressions, under names no param can have
_GLOBALS: dict[str, Any] = {"__builtins__": {}, **{f"__f_{k}": f for k, f in _FUNCS.items()}}
_PLAIN = (ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd, ast.Not, ast.BoolOp, ast.And, ast.Or,
          ast.Compare, ast.IfExp, ast.Tuple, *_BINOPS, *_CMPOPS)


class _Functions(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        node.func = ast.Name(id=f"__f_{node.func.id}", ctx=ast.Load())  # type: ignore[attr-defined]
        return node


@lru_cache(maxsize=None)
def _compiled(text: str):
    """The expression compiled to Python bytecode when every node is one :func:`_eval` accepts
    with the same meaning (int/float constants, the listed operators, calls of the listed
    functions), so evaluating it gives what ``_eval`` gives, only faster; None otherwise
    (``_eval`` then reports what it does not accept)."""
    tree = _parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                return None
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords):
                return None
        elif not isinstance(node, _PLAIN):
            return None
    body = _Functions().visit(ast.parse(text, mode="eval"))
    return compile(ast.fix_missing_locations(body), "<ncnn layer table expression>", "eval")


def _eval(node: ast.AST, env: Mapping[str, Any], text: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"unknown name {node.id!r} in {text!r}")
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env, text), _eval(node.right, env, text))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env, text)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        if isinstance(node.op, ast.Not):
            return not v
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            result: Any = True
            for v in node.values:
                result = _eval(v, env, text)
                if not result:
                    return result
            return result
        result = False
        for v in node.values:
            result = _eval(v, env, text)
            if result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env, text)
            if type(op) not in _CMPOPS or not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, env, text) else node.orelse, env, text)
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, env, text) for e in node.elts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS
            and not node.keywords):
        return _FUNCS[node.func.id](*(_eval(a, env, text) for a in node.args))
    raise ExprError(f"unsupported construct {type(node).__name__} in {text!r}")
