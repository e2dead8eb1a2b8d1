"""infer_batch_axis: where the batch axis is in every operand (meta["batch_dim"]) as it moves
through permutes, squeezes, reshapes and broadcasting, and how ncnn_shape/ncnn_axis use it."""
import pytest

import engine.convert  # noqa: F401
from engine.convert.context import Unsupported
from engine.convert.shapes import batch_dim, is_batched, ncnn_axis, ncnn_shape
from engine.ir import Graph
from engine.passes import infer_batch_axis


def _graph(body: str) -> Graph:
    lines = [ln.strip() for ln in body.strip().splitlines()]
    g = Graph.from_text("7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n")
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


def test_stated_batch_out_wins():
    g = Graph.from_text("7767517\n3 0\npnnx.Input x 0 1 x #x=(1,5,7)f32\n"
                        "nn.LSTM l 1 1 x y #y=(5,1,7)f32\npnnx.Output out 1 0 y\n")
    g.find_op("l").meta["batch_out"] = [1]
    infer_batch_axis.run(g, None)
    assert batch_dim(g.operands["y"]) == 1 and ncnn_shape(g.operands["y"]) == [5, 7]


def test_legacy_flags_still_read():
    g = Graph.from_text("7767517\n2 0\npnnx.Input x 0 1 x #x=(1,5,7)f32\npnnx.Output out 1 0 x\n")
    x = g.operands["x"]
    assert batch_dim(x) == 0  # never annotated: rank >= 2 is batched at dim 0
    x.meta["batch"] = False
    assert batch_dim(x) is None and ncnn_shape(x) == [1, 5, 7]


def test_an_input_exported_with_a_batch_larger_than_one_gets_a_warning(tmp_path):
    """ncnn has no batch axis: a model exported on a batch of 4 converts to a one-sample model
    (which matches PyTorch sample by sample), and the user is told so once per input."""
    import numpy as np
    import torch
    from torch import nn

    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2
    from tests.ncnn_runtime import run

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5)).eval()
    x = torch.randn(4, 3, 16, 16)
    result = convert(str(export_pt2(model, [x], tmp_path / "m.pt2")), ConvertOptions(fp16=False))
    warnings = [d for d in result.diagnostics if d.severity == "warning"]
    assert result.ok and len(warnings) == 1
    assert "exported with a batch of 4" in warnings[0].reason and "one 3×16×16 sample" in warnings[0].reason
    param, bin_ = tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin"
    result.write(param, bin_)
    (y,) = run(param, bin_, {"in0": x[2].numpy()}, ["out0"])
    np.testing.assert_allclose(np.asarray(y), model(x)[2].detach().numpy(), rtol=1e-4, atol=1e-5)
    batch1 = convert(str(export_pt2(model, [x[:1]], tmp_path / "one.pt2")))
    assert not [d for d in batch1.diagnostics if d.severity == "warning"]
