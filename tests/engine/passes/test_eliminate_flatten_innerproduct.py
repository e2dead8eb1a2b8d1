"""eliminate_flatten_innerproduct on hand-written ncnn graphs."""
import pytest

import engine.convert  # noqa: F401  (import order: engine.convert before engine.passes)
from engine.ir import Graph
from engine.passes import PassContext, PassManager, eliminate_flatten_innerproduct


def _graph(x_shape: str, *more: str) -> Graph:
    lines = [f"Input in0 0 1 x #x={x_shape}f32", "Flatten flat 1 1 x f #f=(1,48)f32 !from=flatten",
             "InnerProduct fc 1 1 f y 0=5 2=240 @weight_data=(5,48)f32 #y=(1,5)f32 !from=linear",
             "Output out 1 0 y", *more]
    return Graph.from_text("7767517\n%d 3\n" % len(lines) + "\n".join(lines) + "\n")


def _run(g):
    PassManager([eliminate_flatten_innerproduct.run], lint=True).run(g, PassContext())


@pytest.mark.parametrize("x_shape", ["(1,3,4,4)", "(1,3,2,2,4)"])
def test_flatten_dropped(x_shape):
    g = _graph(x_shape)
    _run(g)
    assert [op.type for op in g.ops] == ["Input", "InnerProduct", "Output"]
    fc = g.find_op("fc")
    assert fc.inputs[0].name == "x" and fc.provenance.nodes == ("linear", "flatten")


@pytest.mark.parametrize("x_shape,more", [
    ("(1,12,4)", ()),                          # a 2-D blob: InnerProduct would read rows
    ("(1,3,4,4)", ("Output out2 1 0 f",)),     # flattened blob is also returned
])
def test_flatten_kept(x_shape, more):
    g = _graph(x_shape, *more)
    before = g.to_text()
    _run(g)
    assert g.to_text() == before
