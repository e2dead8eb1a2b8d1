"""fuse_conv_batchnorm / fuse_linear_batchnorm on hand-written pnnx graphs: the folded layer
computes what conv/deconv/linear followed by BatchNorm computed (checked with torch), and
nothing is folded when the layer's output has another reader."""
import numpy as np
import pytest

import engine.convert  # noqa: F401  (import order: engine.convert before engine.passes)
from engine.ir import Attribute, Graph
from engine.passes import PassContext, PassManager, fuse_conv_batchnorm, fuse_linear_batchnorm

torch = pytest.importorskip("torch")
F = torch.nn.functional

BN = ("nn.BatchNorm{d} bn 1 1 a b num_features={c} eps=0.001 momentum=0.1 affine={affine} "
      "@running_mean=({c})f32 @running_var=({c})f32{extra} #b={shape}f32 !from=batch_norm")


def _graph(layer: str, bn_dim: str, c: int, out_shape: str, affine=True, also_output=False) -> Graph:
    extra = f" @weight=({c})f32 @bias=({c})f32" if affine else ""
    lines = ["pnnx.Input x 0 1 x", layer, BN.format(d=bn_dim, c=c, affine=affine, extra=extra, shape=out_shape),
             "pnnx.Output out 1 0 b"]
    if also_output:
        lines.append("pnnx.Output out2 1 0 a")
    return Graph.from_text("7767517\n%d %d\n" % (len(lines), 3) + "\n".join(lines) + "\n")


def _fill(g: Graph, rng) -> dict:
    arrays = {}
    for op in g.ops:
        for k, a in list(op.attrs.items()):
            arr = rng.standard_normal(a.shape).astype(np.float32)
            if k == "running_var":
                arr = np.abs(arr) + 0.5
            op.attrs[k] = Attribute(arr)
            arrays[f"{op.type}.{k}"] = torch.from_numpy(arr)
    return arrays


def _setup(layer, bn_dim, c, out_shape, x_shape, seed, **kw):
    """The graph, its weights as torch tensors, and a random input."""
    rng = np.random.default_rng(seed)
    g = _graph(layer, bn_dim, c, out_shape, **kw)
    w = _fill(g, rng)
    return g, w, torch.from_numpy(rng.standard_normal(x_shape).astype(np.float32))


def _bn(y, w, c):
    return F.batch_norm(y, w["nn.BatchNorm%s.running_mean" % c], w["nn.BatchNorm%s.running_var" % c],
                        w.get("nn.BatchNorm%s.weight" % c), w.get("nn.BatchNorm%s.bias" % c), False, 0.1, 1e-3)


def _run(g, *passes):
    PassManager(list(passes), lint=True).run(g, PassContext())


def _attr(op, k):
    return torch.from_numpy(np.asarray(op.attrs[k].data)) if k in op.attrs else None


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_conv2d_bn_folded(bias, affine):
    layer = ("nn.Conv2d conv 1 1 x a in_channels=4 out_channels=6 kernel_size=(3,3) stride=(1,1) padding=(1,1) "
             f"dilation=(1,1) groups=2 bias={bias} padding_mode=zeros @weight=(6,2,3,3)f32"
             + (" @bias=(6)f32" if bias else "") + " #a=(1,6,5,5)f32 !from=conv")
    g, w, x = _setup(layer, "2d", 6, "(1,6,5,5)", (1, 4, 5, 5), 0, affine=affine)
    want = _bn(F.conv2d(x, w["nn.Conv2d.weight"], w.get("nn.Conv2d.bias"), padding=1, groups=2), w, "2d")
    _run(g, fuse_conv_batchnorm.run)
    assert [op.type for op in g.ops] == ["pnnx.Input", "nn.Conv2d", "pnnx.Output"]
    conv = g.find_op("conv")
    assert conv.params["bias"] is True and conv.provenance.nodes == ("conv", "batch_norm")
    got = F.conv2d(x, _attr(conv, "weight"), _attr(conv, "bias"), padding=1, groups=2)
    assert torch.allclose(got, want, atol=1e-5)
    assert conv.attrs["weight"].dtype == "f32" and conv.attrs["weight"].data.dtype == np.float32


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_transpose2d_bn_folded(groups):
    layer = ("nn.ConvTranspose2d deconv 1 1 x a in_channels=4 out_channels=6 kernel_size=(3,2) stride=(2,2) "
             f"padding=(1,0) output_padding=(1,1) groups={groups} bias=True dilation=(1,1) "
             f"@weight=(4,{6 // groups},3,2)f32 @bias=(6)f32 #a=(1,6,10,11)f32")
    g, w, x = _setup(layer, "2d", 6, "(1,6,10,11)", (1, 4, 5, 5), 1)
    kw = dict(stride=2, padding=(1, 0), output_padding=1, groups=groups)
    want = _bn(F.conv_transpose2d(x, w["nn.ConvTranspose2d.weight"], w["nn.ConvTranspose2d.bias"], **kw), w, "2d")
    _run(g, fuse_conv_batchnorm.run)
    assert not g.ops_of_type("nn.BatchNorm2d")
    d = g.find_op("deconv")
    got = F.conv_transpose2d(x, _attr(d, "weight"), _attr(d, "bias"), **kw)
    assert torch.allclose(got, want, atol=1e-5)


def test_conv1d_bn1d_folded():
    layer = ("nn.Conv1d conv 1 1 x a in_channels=3 out_channels=5 kernel_size=(3,) stride=(1,) padding=same "
             "dilation=(2,) groups=1 bias=False padding_mode=zeros @weight=(5,3,3)f32 #a=(1,5,9)f32")
    g, w, x = _setup(layer, "1d", 5, "(1,5,9)", (1, 3, 9), 2)
    want = _bn(F.conv1d(x, w["nn.Conv1d.weight"], None, padding="same", dilation=2), w, "1d")
    _run(g, fuse_conv_batchnorm.run)
    c = g.find_op("conv")
    assert not g.ops_of_type("nn.BatchNorm1d") and c.params["padding"] == "same"
    assert torch.allclose(F.conv1d(x, _attr(c, "weight"), _attr(c, "bias"), padding="same", dilation=2), want,
                          atol=1e-5)


def test_not_folded_when_conv_output_is_also_read_elsewhere():
    layer = ("nn.Conv2d conv 1 1 x a in_channels=3 out_channels=4 kernel_size=(1,1) stride=(1,1) padding=(0,0) "
             "dilation=(1,1) groups=1 bias=False padding_mode=zeros @weight=(4,3,1,1)f32 #a=(1,4,2,2)f32")
    g = _graph(layer, "2d", 4, "(1,4,2,2)", also_output=True)
    before = g.to_text()
    _run(g, fuse_conv_batchnorm.run)
    assert g.to_text() == before


def test_linear_bn1d_folded_for_2d_output_only():
    layer = ("nn.Linear fc 1 1 x a in_features=6 out_features=4 bias=True @weight=(4,6)f32 @bias=(4)f32 "
             "#a=(2,4)f32 !from=linear")
    g, w, x = _setup(layer, "1d", 4, "(2,4)", (2, 6), 3)
    want = _bn(F.linear(x, w["nn.Linear.weight"], w["nn.Linear.bias"]), w, "1d")
    _run(g, fuse_linear_batchnorm.run)
    fc = g.find_op("fc")
    assert [op.type for op in g.ops] == ["pnnx.Input", "nn.Linear", "pnnx.Output"]
    assert fc.provenance.nodes == ("linear", "batch_norm")
    assert torch.allclose(F.linear(x, _attr(fc, "weight"), _attr(fc, "bias")), want, atol=1e-5)

    # (N, C, L) output: BatchNorm1d normalizes C, not the linear features -> untouched
    g3 = _graph(layer.replace("#a=(2,4)f32", "#a=(1,4,4)f32"), "1d", 4, "(1,4,4)")
    before = g3.to_text()
    _run(g3, fuse_linear_batchnorm.run)
    assert g3.to_text() == before
