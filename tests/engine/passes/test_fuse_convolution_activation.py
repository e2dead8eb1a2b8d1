"""fuse_convolution_activation on hand-written ncnn graphs."""
import pytest

import engine.convert  # noqa: F401  (import order: engine.convert before engine.passes)
from engine.ir import Graph
from engine.ncnn.layers import param_values
from engine.passes import PassContext, PassManager, fuse_convolution_activation

CONV = "Convolution conv 1 1 x a 0=4 1=3 5=1 6=108{extra} @weight_data=(4,3,3,3)f32 @bias_data=(4)f32 !from=conv"


def _graph(producer: str, act: str, *more: str) -> Graph:
    lines = ["Input in0 0 1 x", producer, act, "Output out 1 0 b", *more]
    return Graph.from_text("7767517\n%d 3\n" % len(lines) + "\n".join(lines) + "\n")


def _run(g):
    PassManager([fuse_convolution_activation.run], lint=True).run(g, PassContext())


@pytest.mark.parametrize("act,kind,values", [
    ("ReLU relu 1 1 a b", 1, None),
    ("ReLU relu 1 1 a b 0=0.1", 2, [0.1]),
    ("Clip relu 1 1 a b 0=0.0 1=6.0", 3, [0.0, 6.0]),
    ("Clip relu 1 1 a b 1=1.5", 3, [-3.4028234663852886e+38, 1.5]),
    ("Sigmoid relu 1 1 a b", 4, None),
    ("Mish relu 1 1 a b", 5, None),
    ("HardSwish relu 1 1 a b 0=0.16666667 1=0.5", 6, [0.16666667, 0.5]),
])
def test_activation_fused(act, kind, values):
    g = _graph(CONV.format(extra=""), act + " !from=act")
    _run(g)
    assert [op.type for op in g.ops] == ["Input", "Convolution", "Output"]
    conv = g.find_op("conv")
    named = param_values("Convolution", conv.params)
    assert named["activation_type"] == kind
    assert named.get("activation_params") == values
    assert conv.provenance.nodes == ("conv", "act")
    assert g.output_ops()[0].inputs[0] is conv.outputs[0]


@pytest.mark.parametrize("producer", [
    "ConvolutionDepthWise conv 1 1 x a 0=4 1=3 6=36 7=4 @weight_data=(4,1,3,3)f32",
    "Convolution1D conv 1 1 x a 0=4 1=3 6=36 @weight_data=(4,3,3)f32",
    "Deconvolution conv 1 1 x a 0=4 1=3 6=108 @weight_data=(4,3,3,3)f32",
    "DeconvolutionDepthWise conv 1 1 x a 0=4 1=3 6=36 7=4 @weight_data=(4,1,3,3)f32",
    "InnerProduct conv 1 1 x a 0=4 2=12 @weight_data=(4,3)f32",
])
def test_every_producer_fuses(producer):
    g = _graph(producer, "ReLU relu 1 1 a b")
    _run(g)
    assert len(g.ops) == 3 and g.find_op("conv").params[9] == 1


@pytest.mark.parametrize("case", ["already_activated", "second_reader", "graph_output", "not_an_activation"])
def test_not_fused(case):
    extra, act, more = "", "ReLU relu 1 1 a b", ()
    if case == "already_activated":
        extra = " 9=4"
    elif case == "second_reader":
        more = ("ReLU other 1 1 a c", "Output out2 1 0 c")
    elif case == "graph_output":
        more = ("Output out2 1 0 a",)
    else:
        act = "TanH relu 1 1 a b"
    g = _graph(CONV.format(extra=extra), act, *more)
    before = g.to_text()
    _run(g)
    assert g.to_text() == before
