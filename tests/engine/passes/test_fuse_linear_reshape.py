"""fuse_linear_reshape on hand-written pnnx graphs."""
import pytest

import engine.convert  # noqa: F401  (import order: engine.convert before engine.passes)
from engine.ir import Graph
from engine.passes import PassContext, PassManager, fuse_linear_reshape

LINEAR = "nn.Linear fc 1 1 f y in_features=8 out_features=5 bias=False @weight=(5,8)f32 #y={mid}f32 !from=addmm"


def _graph(*more, x="(1,3,4,8)", flat="(12,8)", mid="(12,5)", back="(1,3,4,5)"):
    lines = [f"pnnx.Input x 0 1 x #x={x}f32",
             f"Tensor.reshape view 1 1 x f shape={flat} #f={flat}f32 !from=view",
             LINEAR.format(mid=mid),
             f"Tensor.reshape view_1 1 1 y z shape={back} #z={back}f32 !from=view_1",
             "pnnx.Output out 1 0 z", *more]
    return Graph.from_text("7767517\n%d 4\n" % len(lines) + "\n".join(lines) + "\n")


def _run(g):
    PassManager([fuse_linear_reshape.run], lint=True).run(g, PassContext())


def test_flatten_linear_unflatten_becomes_linear():
    g = _graph()
    _run(g)
    assert [op.type for op in g.ops] == ["pnnx.Input", "nn.Linear", "pnnx.Output"]
    fc = g.find_op("fc")
    assert fc.inputs[0].name == "x" and fc.outputs[0].shape == [1, 3, 4, 5]
    assert fc.provenance.nodes == ("addmm", "view", "view_1")


@pytest.mark.parametrize("args,more", [
    (dict(back="(12,5)"), ()),                                  # no unflatten: a real 2-D result
    (dict(flat="(3,32)"), ()),                                  # not a flatten of the leading dims
    (dict(x="(1,6,8)", flat="(6,8)", mid="(6,5)", back="(2,3,5)"), ()),   # unflatten to other dims
    (dict(), ("pnnx.Output out2 1 0 f",)),                       # flattened value read elsewhere
    (dict(), ("pnnx.Output out2 1 0 y",)),                       # linear result read elsewhere
])
def test_left_alone(args, more):
    g = _graph(*more, **args)
    before = g.to_text()
    _run(g)
    assert g.to_text() == before
