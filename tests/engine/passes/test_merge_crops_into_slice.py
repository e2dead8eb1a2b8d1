"""merge_crops_into_slice: Crops that cut one blob into consecutive pieces along one axis become
one Slice (ncnn graphs written by hand, and end to end: q/k/v cut from a projection)."""
import torch

import engine.convert  # noqa: F401
from engine.ir import Graph
from engine.passes import merge_crops_into_slice
from tests.harness import Fn, check_module


def _graph(body: str) -> Graph:
    lines = [ln.strip() for ln in body.strip().splitlines()]
    g = Graph.from_text("7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n")
    g.operands["x"].meta["batch"] = False  # a (6, 10) blob
    return g


def test_tiling_crops_become_one_slice():
    g = _graph("""
        Input x 0 1 x #x=(6,10)f32
        Crop b 1 1 x b 9=(4) 10=(-233) 11=(1) #b=(6,6)f32
        Crop a 1 1 x a 9=(0) 10=(4) 11=(1) #a=(6,4)f32
        BinaryOp y 2 1 a a y #y=(6,4)f32
        Output out 1 0 b
        Output out2 1 0 y
    """)
    merge_crops_into_slice.run(g, None)
    g.lint()
    slices = g.ops_of_type("Slice")
    assert len(slices) == 1 and not g.ops_of_type("Crop")
    assert [o.name for o in slices[0].outputs] == ["a", "b"]
    assert slices[0].params == {0: [4, -233], 1: 1}


def test_gaps_overlaps_and_other_axes_are_left():
    for crops in ("9=(0) 10=(4) 11=(1)|9=(5) 10=(-233) 11=(1)", "9=(0) 10=(4) 11=(1)|9=(3) 10=(-233) 11=(1)",
                  "9=(0) 10=(4) 11=(1)|9=(4) 10=(-233) 11=(0)"):
        first, second = crops.split("|")
        g = _graph(f"""
            Input x 0 1 x #x=(6,10)f32
            Crop a 1 1 x a {first} #a=(6,4)f32
            Crop b 1 1 x b {second} #b=(6,5)f32
            Output out 1 0 a
            Output out2 1 0 b
        """)
        merge_crops_into_slice.run(g, None)
        assert len(g.ops_of_type("Crop")) == 2


def test_qkv_cut_from_a_projection(tmp_path):
    lin = torch.nn.Linear(8, 24)

    def f(x):
        q, k, v = lin(x).split(8, dim=-1)
        return q * k + v

    c = check_module(Fn(lambda x: f(x)[:, 1:] + f(x)[:, :1]), [torch.randn(1, 5, 8)], tmp_path)
    assert "Crop" not in [op.type for op in c.result.ncnn.ops if op.name.startswith("split")]
