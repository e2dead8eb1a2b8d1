"""fuse_padding_convolution on hand-written ncnn graphs."""
import pytest

import engine.convert  # noqa: F401  (import order: engine.convert before engine.passes)
from engine.ir import Graph
from engine.ncnn.layers import resolve_params
from engine.passes import PassContext, PassManager, fuse_padding_convolution

CONV = "Convolution conv 1 1 p y 0=4 1=3 6=108{extra} @weight_data=(4,3,3,3)f32 !from=conv"


def _graph(pad: str, conv: str, *more: str) -> Graph:
    lines = ["Input in0 0 1 x", pad + " !from=pad", conv, "Output out 1 0 y", *more]
    return Graph.from_text("7767517\n%d 3\n" % len(lines) + "\n".join(lines) + "\n")


def _run(g):
    PassManager([fuse_padding_convolution.run], lint=True).run(g, PassContext())


def _pads(op):
    p = resolve_params(op.type, op.params)
    return tuple(p[k] for k in ("pad_left", "pad_right", "pad_top", "pad_bottom")) + (p["pad_value"],)


@pytest.mark.parametrize("pad,extra,want", [
    ("Padding pad 1 1 x p 0=1 1=2 2=3 3=4", "", (3, 4, 1, 2, 0.0)),             # asymmetric into unpadded conv
    ("Padding pad 1 1 x p 0=0 1=1 2=0 3=1", " 4=1", (1, 2, 1, 2, 0.0)),         # added to the conv's own pads
    ("Padding pad 1 1 x p 0=1 1=1 2=1 3=1 5=2.5", "", (1, 1, 1, 1, 2.5)),       # value kept when conv had no pads
])
def test_padding_fused(pad, extra, want):
    g = _graph(pad, CONV.format(extra=extra))
    _run(g)
    assert [op.type for op in g.ops] == ["Input", "Convolution", "Output"]
    conv = g.find_op("conv")
    assert conv.inputs[0].name == "x"
    assert _pads(conv) == want
    assert conv.provenance.nodes == ("conv", "pad")


def test_conv1d_takes_left_right_only():
    g = _graph("Padding pad 1 1 x p 2=2 3=1", "Convolution1D conv 1 1 p y 0=4 1=3 6=36 @weight_data=(4,3,3)f32")
    _run(g)
    p = resolve_params("Convolution1D", g.find_op("conv").params)
    assert len(g.ops) == 3 and (p["pad_left"], p["pad_right"]) == (2, 1)
    g = _graph("Padding pad 1 1 x p 0=1 2=2", "Convolution1D conv 1 1 p y 0=4 1=3 6=36 @weight_data=(4,3,3)f32")
    _run(g)
    assert len(g.ops) == 4


@pytest.mark.parametrize("pad,extra,more", [
    ("Padding pad 1 1 x p 0=1 4=1", "", ()),                     # replicate
    ("Padding pad 1 1 x p 0=1 4=2", "", ()),                     # reflect
    ("Padding pad 1 1 x p 0=-1", "", ()),                        # crop
    ("Padding pad 1 1 x p 7=1", "", ()),                         # channel padding
    ("Padding pad 1 1 x p 0=1 5=1.0", " 4=1", ()),               # value differs from conv's own padding
    ("Padding pad 1 1 x p 0=1", " 4=-233", ()),                  # conv pads SAME
    ("Padding pad 1 1 x p 0=1", "", ("Output out2 1 0 p",)),     # padded blob read elsewhere
])
def test_padding_not_fused(pad, extra, more):
    g = _graph(pad, CONV.format(extra=extra), *more)
    before = g.to_text()
    _run(g)
    assert g.to_text() == before
