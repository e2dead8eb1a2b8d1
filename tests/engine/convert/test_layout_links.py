"""The layout rules' links (engine.convert.layout): each Link is made once and shared between
operators and solves (frozen), while every layout still gets lists of its own to extend."""
from __future__ import annotations

import engine.convert  # noqa: F401  (the rules register with the converters)
from engine.convert.layout import Link, layout_of
from engine.ir import Graph


def _add(g: Graph, name: str, a_shape, b_shape, y_shape):
    a = g.new_operand(f"{name}_a", dtype="f32", shape=a_shape)
    b = g.new_operand(f"{name}_b", dtype="f32", shape=b_shape)
    y = g.new_operand(f"{name}_y", dtype="f32", shape=y_shape)
    g.add_op("pnnx.Input", f"{name}_in", [], [a, b])
    return g.add_op("pnnx.Expression", name, [a, b], [y], params={"expr": "add(@0,@1)"})


def test_rule_links_are_shared_and_layout_lists_are_not():
    g = Graph()
    one = _add(g, "one", [2, 3, 4], [3, 1], [2, 3, 4])
    two = _add(g, "two", [2, 3, 4], [3, 1], [2, 3, 4])
    first, again, other = layout_of(one), layout_of(one), layout_of(two)
    want = [Link(0, 0, 0, 0), Link(0, 1, 0, 1), Link(0, 2, 0, 2), Link(1, 0, 0, 1)]
    assert first.links == again.links == other.links == want
    assert all(x is y for x, y in zip(first.links, other.links))  # the same Link objects
    first.links.append(Link(1, 1, 0, 2))  # a rule extending its own layout changes no other
    assert other.links == want and layout_of(two).links == want
    assert [ln.b for ln in other.links_from(1, 0)] == [1] and other.links_to(0, 2) == [Link(0, 2, 0, 2)]
