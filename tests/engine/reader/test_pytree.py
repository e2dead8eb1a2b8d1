"""Unit tests of engine.reader.pytree and engine.reader.symexpr."""
from __future__ import annotations

import json

import pytest

from engine.errors import PT2FormatError
from engine.reader.pytree import PyTree, parse_treespec
from engine.reader.symexpr import pretty, symbols_in

LEAF = {"type": None, "context": None, "children_spec": []}


def spec(node) -> str:
    return json.dumps([1, node])


def node(t, ctx, *kids):
    return {"type": t, "context": ctx, "children_spec": list(kids)}


def test_containers_namedtuples_and_dataclasses():
    tree = parse_treespec(spec(node("builtins.tuple", "null",
                                    node("builtins.tuple", "null", LEAF, node("builtins.list", "null", LEAF)),
                                    node("builtins.dict", '["mask", 3]', LEAF, LEAF),
                                    node("collections.namedtuple", "m.Pair", LEAF, LEAF),
                                    node("m.Box", '[["w", "tag"], ["none"]]', LEAF, LEAF),
                                    node("collections.OrderedDict", '["k"]', LEAF))),
                          "where", {"m.Pair": ["a", "b"]})
    assert tree.type == "tuple" and len(tree.leaves()) == 9
    kinds = [c.type for c in tree.children]
    assert kinds == ["tuple", "dict", "namedtuple:m.Pair", "dataclass:m.Box", "OrderedDict"]
    assert tree.children[1].context == ["mask", 3]
    assert tree.children[2].context == ["a", "b"] and tree.children[3].context == ["w", "tag"]
    for i, leaf in enumerate(tree.leaves()):
        leaf.name = f"v{i}"
    assert str(tree) == ("((v0, [v1]), {'mask': v2, 3: v3}, Pair(a=v4, b=v5), Box(w=v6, tag=v7), "
                         "OrderedDict({'k': v8}))")
    assert str(PyTree("tuple", None, [PyTree(None)])) == "(*,)"


@pytest.mark.parametrize("text, needle", [("[2, {}]", "treespec version"), ("{}", r"expected \[version, tree\]"),
                                          (spec(node(5, None)), "type: expected a string"),
                                          (spec({"type": None, "context": None, "children_spec": [LEAF]}),
                                           "leaf with children"), ("not json", "invalid JSON")])
def test_bad_treespecs(text, needle):
    with pytest.raises(PT2FormatError, match=needle):
        parse_treespec(text, "m.json: in_spec")


def test_deep_treespec_is_bounded():
    n = LEAF
    for _ in range(150):
        n = node("builtins.list", "null", n)
    with pytest.raises(PT2FormatError, match="nested more than"):
        parse_treespec(spec(n), "w")


@pytest.mark.parametrize("expr, text", [
    ("Symbol('s17', positive=True, integer=True)", "s17"),
    ("Mul(Integer(2), Symbol('s0', integer=True))", "2*s0"),
    ("Add(Symbol('s0'), Mul(Integer(-1), Symbol('s1')))", "s0 - s1"),
    ("FloorDiv(Add(Symbol('s0'), Integer(1)), Integer(2))", "(s0 + 1)//2"),
    ("Mul(Integer(3), Add(Symbol('a'), Integer(1)))", "3*(a + 1)"),
    ("Pow(Symbol('s0'), Integer(-1))", "1/s0"),
    ("Max(Integer(1), Symbol('s0'))", "max(1, s0)"),
    ("not (an expression", "not (an expression"),
])
def test_pretty_symbolic_expressions(expr, text):
    assert pretty(expr) == text


def test_symbols_in():
    assert symbols_in("Add(Symbol('s1'), Mul(Symbol('s0'), Symbol('s1')))") == ["s1", "s0"]
