"""normalize_inplace on hand-made ATen graphs: an in-place overload becomes its functional one
(the type's answer remembered), later readers of the mutated input read the result, earlier
ones keep the input; operators that are not ATen-level are left alone."""
import engine.convert  # noqa: F401  (import order: engine.convert before engine.passes)
from engine.ir import Graph
from engine.passes import PassContext, PassManager, normalize_inplace


def _aten(g: Graph, type_: str, name: str, inputs, out: str):
    op = g.add_op(type_, name, inputs, [g.new_operand(out, dtype="f32", shape=[2])])
    op.meta["target"] = "torch.ops." + type_
    return op


def test_inplace_ops_become_functional_and_later_readers_read_the_result():
    g = Graph()
    x = g.new_operand("x", dtype="f32", shape=[2])
    g.add_op("pnnx.Input", "in", [], [x])
    before = _aten(g, "aten.neg.default", "before", [x], "b")
    relu = _aten(g, "aten.relu_.default", "relu", [x], "r")
    after = _aten(g, "aten.add.Tensor", "after", [x, x], "a")
    again = _aten(g, "aten.relu_.default", "again", [after.outputs[0]], "r2")
    plain = g.add_op("aten.relu_.default", "plain", [x], [g.new_operand("p", dtype="f32", shape=[2])])  # no target
    g.add_op("pnnx.Output", "out", [before.outputs[0], relu.outputs[0], again.outputs[0], plain.outputs[0]], [])
    PassManager([normalize_inplace.run], lint=True).run(g, PassContext())
    assert (relu.type, again.type, plain.type) == ("aten.relu.default", "aten.relu.default", "aten.relu_.default")
    assert relu.meta["aten_op"] == "aten.relu_.default" and "aten_op" not in plain.meta
    assert [i.name for i in before.inputs] == ["x"] and [i.name for i in after.inputs] == ["r", "r"]
    assert [i.name for i in plain.inputs] == ["r"]  # a later reader of x, though not normalized itself
