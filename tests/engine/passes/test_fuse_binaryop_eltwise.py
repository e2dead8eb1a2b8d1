"""fuse_binaryop_eltwise on hand-written ncnn graphs (numerics: tests/engine/converters/
test_binary.py::test_alpha and the e2e cases below)."""
import pytest
import torch

import engine.convert  # noqa: F401  (import order: engine.convert before engine.passes)
from engine.ir import Graph
from engine.ncnn.layers import param_values
from engine.passes import PassContext, PassManager, fuse_binaryop_eltwise
from tests.harness import DIALECTS, Fn, check_module

S = "(1,4,5,6)f32"


def _graph(*lines: str) -> Graph:
    lines = ("Input in0 0 1 a #a=" + S, "Input in1 0 1 b #b=" + S, "Input in2 0 1 c #c=(1,4,1,1)f32") + lines
    return Graph.from_text("7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n")


def _run(g: Graph) -> list[str]:
    PassManager([fuse_binaryop_eltwise.run], lint=True).run(g, PassContext())
    return [op.type for op in g.ops]


def _eltwise(g: Graph):
    (op,) = g.ops_of_type("Eltwise")
    return param_values("Eltwise", op.params), [i.name for i in op.inputs]


@pytest.mark.parametrize("lines,inputs,coeffs", [
    (["BinaryOp m 1 1 a a2 0=2 1=1 2=2.0 #a2=" + S, "BinaryOp s 2 1 a2 b y 0=0 #y=" + S], ["a", "b"], [2.0, 1.0]),
    (["BinaryOp m 1 1 b b2 0=2 1=1 2=0.5 #b2=" + S, "BinaryOp s 2 1 a b2 y 0=1 #y=" + S], ["a", "b"], [1.0, -0.5]),
    (["BinaryOp m 1 1 a a2 0=2 1=1 2=3.0 #a2=" + S, "BinaryOp n 1 1 b b2 0=2 1=1 2=-1.0 #b2=" + S,
      "BinaryOp s 2 1 a2 b2 y 0=1 #y=" + S], ["a", "b"], [3.0, 1.0]),
    (["BinaryOp s0 2 1 a b ab 0=0 #ab=" + S, "BinaryOp s 2 1 ab a y 0=0 #y=" + S], ["a", "b", "a"], None),
    (["BinaryOp s0 2 1 a b ab 0=1 #ab=" + S, "BinaryOp s 2 1 b ab y 0=1 #y=" + S], ["b", "a", "b"], [1.0, -1.0, 1.0]),
])
def test_weighted_sums(lines, inputs, coeffs):
    g = _graph(*lines, "Output out 1 0 y")
    assert _run(g) == ["Input", "Input", "Input", "Eltwise", "Output"]
    params, names = _eltwise(g)
    assert params["op_type"] == 1 and names == inputs and params.get("coeffs") == coeffs
    assert g.find_op("s").outputs[0].name == "y"


@pytest.mark.parametrize("lines", [
    ["BinaryOp s 2 1 a b y 0=0 #y=" + S],  # plain a + b: one layer already
    ["BinaryOp m 1 1 c c2 0=2 1=1 2=2.0 #c2=(1,4,1,1)f32", "BinaryOp s 2 1 a c2 y 0=0 #y=" + S],  # broadcast
    ["BinaryOp m 1 1 a a2 0=2 1=1 2=2.0 #a2=" + S, "BinaryOp s 2 1 a2 b y 0=0 #y=" + S,
     "Output out2 1 0 a2"],  # the scaled value is also an output
    ["BinaryOp m 1 1 a a2 0=3 1=1 2=2.0 #a2=" + S, "BinaryOp s 2 1 a2 b y 0=0 #y=" + S],  # a / 2, not a * c
    ["BinaryOp m 1 1 a a2 0=2 1=1 2=2.0 #a2=" + S, "BinaryOp s 2 1 a2 b y 0=4 #y=" + S],  # max
])
def test_not_fused(lines):
    g = _graph(*lines, "Output out 1 0 y")
    assert "Eltwise" not in _run(g)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name,fn,n_in", [
    ("alpha", lambda a, b: torch.add(a, b, alpha=2), 2),
    ("weighted", lambda a, b: a * 2 - b * 0.5, 2),
    ("three", lambda a, b, c: a + b + c, 3),
    ("nested", lambda a, b: (a + b) * 3 + a, 2),
])
def test_end_to_end(tmp_path, dialect, name, fn, n_in):
    torch.manual_seed(0)
    r = check_module(Fn(fn), [torch.randn(1, 4, 5, 6) for _ in range(n_in)], tmp_path, dialect=dialect,
                     expect_types=["Eltwise"], forbid_types=["BinaryOp"])
    assert r.result.ncnn.ops_of_type("Eltwise")[0].provenance.nodes
