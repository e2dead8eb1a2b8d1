"""Symbolic sizes as IR tokens: readable, no spaces or commas, and safe in the IR text form."""
from __future__ import annotations

import pytest

from engine.build.symbolic import dim, expr_text
from engine.ir import Graph
from engine.reader.schema import SymExpr

S = "Symbol('s53', positive=True, integer=True)"


@pytest.mark.parametrize("expr, text", [
    (S, "s53"),
    (f"Add(Mul(Integer(4), {S}), Integer(-8))", "4*s53-8"),
    (f"FloorDiv(Add({S}, Integer(-2)), Integer(2))", "(s53-2)//2"),
    (f"Mul(Integer(32), Max(Integer(1), Add({S}, Integer(-2))))", "32*max(1;s53-2)"),
    (f"Add(Mul(Integer(-1), {S}), Integer(5))", "-s53+5"),
    # floor divisions keep Python's meaning: (-s)//10 floors the negative size; -(s//8) negates the quotient
    (f"Add({S}, FloorDiv(Mul(Integer(-1), {S}), Integer(10)))", "s53+(-s53)//10"),
    (f"Add({S}, Mul(Integer(-1), FloorDiv({S}, Integer(8))))", "s53-(s53//8)"),
    (f"Mul(Integer(2), FloorDiv({S}, Integer(3)))", "2*(s53//3)"),
    ("Integer(7)", 7),
    ("not sympy, at all", "notsympy;atall"),
])
def test_expr_text(expr, text):
    assert expr_text(expr) == text


def test_dim_of_ints_and_symexprs():
    assert dim(3) == 3 and dim(None) is None
    assert dim(SymExpr(S, 10)) == "s53"
    assert dim(SymExpr(f"Mul(Integer(2), {S})", 20)) == "2*s53"


def test_dims_survive_the_ir_text_form():
    g = Graph()
    shape = [dim(SymExpr(S)), 3, expr_text(f"Mul(Integer(32), Max(Integer(1), Add({S}, Integer(-2))))")]
    x = g.new_operand("x", dtype="f32", shape=shape)
    g.add_op("pnnx.Input", "x", [], [x])
    text = g.to_text()
    assert Graph.from_text(text).operands["x"].shape == shape
