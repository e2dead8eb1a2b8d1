"""infer_batch_axis: which axis of every operand is ncnn's batch (meta["batch_dim"]) — seeds,
propagation through permutes, squeezes, reshapes and broadcasting, weak seeds, the conversions
inserted where operators disagree — and how ncnn_shape/ncnn_axis use it."""
import pytest

import engine.convert  # noqa: F401
from engine.convert.context import Unsupported
from engine.convert.shapes import batch_dim, is_batched, ncnn_axis, ncnn_shape
from engine.ir import Graph
from engine.passes import infer_batch_axis


def _text(body: str) -> str:
    lines = [ln.strip() for ln in body.strip().splitlines()]
    return "7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n"


def _graph(body: str) -> Graph:
    g = Graph.from_text(_text(body))
    infer_batch_axis.run(g, None)
    return g


def test_batch_moves_with_permutes_and_squeezes():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,197,2304)f32
        torch.transpose t 1 1 x t dim0=0 dim1=1 #t=(197,1,2304)f32
        Tensor.reshape u 1 1 t u shape=(197,1,3,768) #u=(197,1,3,768)f32
        torch.unsqueeze e 1 1 u e dim=0 #e=(1,197,1,3,768)f32
        torch.transpose p 1 1 e p dim0=0 dim1=-2 #p=(3,197,1,1,768)f32
        torch.squeeze s 1 1 p s dim=-2 #s=(3,197,1,768)f32
        Tensor.select q 1 1 s q dim=0 index=0 #q=(197,1,768)f32
        pnnx.Output out 1 0 q
    """)
    dims = {n: batch_dim(g.operands[n]) for n in "xtuepsq"}
    assert dims == {"x": 0, "t": 1, "u": 1, "e": 2, "p": 2, "s": 2, "q": 1}
    p = g.operands["p"]
    assert ncnn_shape(p) == [3, 197, 1, 768] and not is_batched(p)
    assert ncnn_axis(p, -1) == 3 and ncnn_axis(p, 3) == 2
    with pytest.raises(Unsupported):
        ncnn_axis(p, 2)


def test_merged_batch_comes_back_out_of_a_reshape():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,8,8,16)f32
        Tensor.reshape w 1 1 x w shape=(4,16,16) #w=(4,16,16)f32
        Tensor.reshape v 1 1 w v shape=(1,4,16,16) #v=(1,4,16,16)f32
        pnnx.Attribute m 0 1 m @data=(1,4,1,16)f32 #m=(1,4,1,16)f32
        pnnx.Expression a 2 1 v m a expr="add(@0,@1)" #a=(1,4,16,16)f32
        pnnx.Expression b 2 1 w m b expr="add(@0,@1)" #b=(1,4,16,16)f32
        pnnx.Output out 1 0 a
        pnnx.Output out2 1 0 b
    """)
    assert [batch_dim(g.operands[n]) for n in "xwvmab"] == [0, None, 0, 0, 0, 0]


def test_recurrent_layers_take_their_batch_where_torch_has_it():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(5,2,7)f32
        nn.LSTM l 1 3 x y h c input_size=7 hidden_size=4 num_layers=1 batch_first=False #y=(5,2,4)f32 #h=(1,2,4)f32 #c=(1,2,4)f32
        pnnx.Output out 1 0 y
    """)
    assert [batch_dim(g.operands[n]) for n in "xyhc"] == [1, 1, 1, 1]
    assert ncnn_shape(g.operands["y"]) == [5, 4] and ncnn_shape(g.operands["h"]) == [1, 4]


def test_plain_matrices_have_no_batch():
    g = _graph("""
        pnnx.Input a 0 1 a #a=(23,14)f32
        pnnx.Input b 0 1 b #b=(14,35)f32
        torch.matmul m 2 1 a b y #y=(23,35)f32
        pnnx.Output out 1 0 y
    """)
    assert [batch_dim(g.operands[n]) for n in "aby"] == [None, None, None]


def test_batch_is_found_backward_through_a_permute():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(2,3,5,7)f32
        Tensor.permute p 1 1 x p dims=(1,0,2,3) #p=(3,2,5,7)f32
        F.max_pool2d m 1 1 p y kernel_size=(1,1) stride=(1,1) #y=(3,2,5,7)f32
        pnnx.Output out 1 0 y
    """)
    assert [batch_dim(g.operands[n]) for n in "xpy"] == [1, 0, 0]
    assert not [op for op in g.ops if op.meta.get("layout_conversion")]


def test_reducing_over_the_batch_converts_it_to_a_dim_first():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(3,4,5,6)f32
        F.max_pool2d m 1 1 x y kernel_size=(1,1) stride=(1,1) #y=(3,4,5,6)f32
        torch.sum s 1 1 y z dim=(0) keepdim=False #z=(4,5,6)f32
        pnnx.Output out 1 0 z
    """)
    (conv,) = [op for op in g.ops if op.meta.get("layout_conversion")]
    assert conv.inputs[0] is g.operands["y"] and g.find_op("s").inputs[0] is conv.outputs[0]
    assert batch_dim(g.operands["y"]) == 0 and batch_dim(conv.outputs[0]) is None and batch_dim(g.operands["z"]) is None


def test_a_constant_holds_no_batch_larger_than_one():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(3,4,5,6)f32
        F.max_pool2d m 1 1 x y kernel_size=(1,1) stride=(1,1) #y=(3,4,5,6)f32
        pnnx.Attribute w 0 1 w @data=(3,1,1,1)f32 #w=(3,1,1,1)f32
        pnnx.Expression e 2 1 y w z expr="mul(@0,@1)" #z=(3,4,5,6)f32
        pnnx.Output out 1 0 z
    """)
    assert batch_dim(g.operands["w"]) is None and batch_dim(g.operands["z"]) is None
    (conv,) = [op for op in g.ops if op.meta.get("layout_conversion")]
    assert conv.inputs[0] is g.operands["y"] and batch_dim(conv.outputs[0]) is None


def test_weak_seed_only_where_every_reader_keeps_dim0():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,3,6,6)f32
        pnnx.Input w 0 1 w #w=(1,3,3,3)f32
        F.conv2d c 2 1 x w y #y=(1,1,4,4)f32
        pnnx.Output out 1 0 y
    """)
    assert [batch_dim(g.operands[n]) for n in "xwy"] == [0, None, 0]
    assert not [op for op in g.ops if op.meta.get("layout_conversion")]


def test_legacy_flags_still_read():
    g = Graph.from_text("7767517\n2 0\npnnx.Input x 0 1 x #x=(1,5,7)f32\npnnx.Output out 1 0 x\n")
    x = g.operands["x"]
    assert batch_dim(x) == 0  # never annotated: rank >= 2 is batched at dim 0
    x.meta["batch"] = False
    assert batch_dim(x) is None and ncnn_shape(x) == [1, 5, 7]


def test_an_input_exported_with_a_batch_larger_than_one_runs_as_an_ncnn_batch(tmp_path):
    """A model exported on a batch of 4 takes the 4 samples as ncnn's batch (no warning): fed
    with ``ncnn.Mat(x, batch_index=0)`` it matches PyTorch for every sample."""
    import numpy as np
    import torch
    from torch import nn

    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2
    from tests.ncnn_runtime import run_layout

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5)).eval()
    x = torch.randn(4, 3, 16, 16)
    result = convert(str(export_pt2(model, [x], tmp_path / "m.pt2")), ConvertOptions(fp16=False))
    assert result.ok and not result.diagnostics
    assert [(d["batch_dim"], d["shape"]) for d in result.ncnn.meta["inputs"]] == [(0, [4, 3, 16, 16])]
    param, bin_ = tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin"
    result.write(param, bin_)
    (y,) = run_layout(param, bin_, [x.numpy()], result.ncnn.meta)
    np.testing.assert_allclose(y, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


_NEEDS_A_CONVERSION = """
    pnnx.Input x 0 1 x #x=(3,4,5,6)f32
    F.max_pool2d m 1 1 x y kernel_size=(1,1) stride=(1,1) #y=(3,4,5,6)f32
    torch.sum s 1 1 y z dim=(0) keepdim=False #z=(4,5,6)f32
    pnnx.Output out 1 0 z
"""


def _meta_text(g: Graph) -> str:
    return g.to_text() + repr([(o.name, o.meta.get("batch_dim")) for o in g.operands.values()])


@pytest.mark.parametrize("change_between", [False, True])
def test_the_solve_legalize_tensor_rank_hands_over_gives_what_a_fresh_solve_gives(change_between):
    """legalize_tensor_rank's last solve is reused by infer_batch_axis only while the graph is
    the one it solved; either way the graph ends as after a solve of its own."""
    from engine.passes import legalize_tensor_rank
    from engine.passes.manager import PassContext

    g = Graph.from_text(_text(_NEEDS_A_CONVERSION))
    cx = PassContext()
    legalize_tensor_rank.run(g, cx)
    assert cx.state.get(infer_batch_axis._SOLVED) is not None  # nothing to legalise: handed over
    body = _NEEDS_A_CONVERSION
    if change_between:  # the sum and its output go after the hand-over: solved again, no conversion
        for name in ("out", "s"):
            g.remove_op(g.find_op(name))
        body = "\n".join(ln for ln in body.splitlines() if not ln.strip().startswith(("torch.sum", "pnnx.Output")))
    fresh = Graph.from_text(_text(body))
    infer_batch_axis.run(fresh, None)
    infer_batch_axis.run(g, cx)
    assert infer_batch_axis._SOLVED not in cx.state
    assert bool([op for op in g.ops if op.meta.get("layout_conversion")]) != change_between
    assert _meta_text(g) == _meta_text(fresh)
