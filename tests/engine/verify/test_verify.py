"""engine.verify end to end, with real torch.export and the real ncnn runtime: a correct 20+-layer
CNN has no divergent layer; a plug-in that mis-lowers one op, or hand-edited ncnn files, get
exactly that layer blamed (and no earlier one); fp16 weights show fp16-sized errors."""
from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from engine.verify import Cancelled, VerifyError, VerifyOptions, verify  # noqa: E402
from engine.verify.result import DIVERGENT, FAILED, INHERITED, OK  # noqa: E402
from tests.engine.verify.models import (BROKEN_RELU, RELU_AS_SIGMOID, SHIFTED_CONV, SHIFTED_PADDING,  # noqa: E402
                                        ChannelsAsBatch, ModeRegions, RelPosEinsum, export, relu_as_sigmoid,
                                        write_plugin)

FP32 = VerifyOptions(fp16=False)


def _only_culprit(result, node_pattern: str):
    """The blamed layer is the first one whose ATen nodes match; every layer before it is ok;
    no other layer is blamed; the damage downstream is reported as inherited."""
    fd = result.first_divergent
    assert fd is not None, "no layer blamed"
    assert any(re.fullmatch(node_pattern, n) for n in fd.aten_nodes), (fd.layer, fd.aten_nodes)
    before = result.layers[:fd.index]
    assert all(r.status == OK and r.within_tolerance for r in before), \
        [(r.layer, r.status) for r in before if r.status != OK]
    assert [r.layer for r in result.layers if r.blamed] == [fd.layer]
    assert any(r.status == INHERITED for r in result.layers[fd.index + 1:])
    assert not result.ok and not result.outputs[0].ok
    assert result.first_beyond_tolerance is fd
    return fd


def test_correct_cnn_has_no_divergent_layer(cnn_pt2):
    r = verify(cnn_pt2, FP32)
    assert len(r.layers) >= 20
    assert r.ok and r.first_divergent is None and r.first_beyond_tolerance is None
    assert r.input_source == "sample"
    assert [x.index for x in r.layers] == list(range(len(r.layers)))
    assert [x.layer for x in r.layers] == [op.name for op in r.graph.ops]
    for rec in r.layers:
        assert rec.status == OK and rec.within_tolerance, (rec.layer, rec.status, rec.note)
        assert rec.max_rel < 1e-4 and rec.cosine > 0.99999 and rec.own is not None, rec.layer
        assert rec.aten_nodes, rec.layer
    types = {x.type for x in r.layers}
    assert {"Convolution", "Pooling", "InnerProduct", "Concat", "BinaryOp", "Split"} <= types
    # fused chains: the conv+bn+relu layer is compared with the relu's value, not the conv's
    fused = next(x for x in r.layers if x.type == "Convolution" and len(x.aten_nodes) == 3)
    assert fused.blobs[0].value == fused.aten_nodes[-1] and fused.blobs[0].how == "provenance"
    stem = next(x for x in r.layers if x.type == "Convolution")
    assert stem.module == "stem" and stem.source.split(":")[0].endswith("models.py")


def test_relu_lowered_to_sigmoid_blames_that_layer_only(cnn_pt2, tmp_path):
    plugin = write_plugin(tmp_path / "relu_as_sigmoid.py", RELU_AS_SIGMOID)
    r = verify(cnn_pt2, VerifyOptions(fp16=False, converters=[plugin]))
    fd = _only_culprit(r, BROKEN_RELU)
    assert fd.status == DIVERGENT and fd.type == "Convolution"  # sigmoid fused into block2's conv
    assert fd.module == "block2.conv1" and re.search(r"models\.py:\d+$", fd.source)
    assert fd.own.max_rel > 0.1


def test_shifted_conv_padding_blames_that_conv(cnn_pt2, tmp_path):
    plugin = write_plugin(tmp_path / "shift.py", SHIFTED_PADDING)
    r = verify(cnn_pt2, VerifyOptions(fp16=False, converters=[plugin]))
    fd = _only_culprit(r, SHIFTED_CONV.replace("conv2d", "(conv2d|convolution)"))
    assert fd.status == DIVERGENT and fd.module == "block2.conv2"
    # the layers right after it compute correctly from correct inputs: only inherited
    nxt = r.layers[fd.index + 1]
    assert nxt.status == INHERITED and nxt.own.max_rel < 1e-4 < nxt.max_rel


def _edit_param(src, dst, pattern: str, repl: str):
    text = src.read_text()
    new, n = re.subn(pattern, repl, text, count=1, flags=re.M)
    assert n == 1, pattern
    dst.write_text(new)
    return dst


def test_hand_edited_layer_type_is_blamed(cnn_training_pt2, cnn_ncnn_files, tmp_path):
    param, bin_ = cnn_ncnn_files
    edited = _edit_param(param, tmp_path / "edited.param", r"^ReLU(\s+)relu_2\b", r"Sigmoid\1relu_2")
    r = verify(cnn_training_pt2, VerifyOptions(ncnn_param=edited, ncnn_bin=bin_))
    assert r.ncnn_files == (str(edited), str(bin_)) and not r.fp16  # fp32 weights found in the .bin
    fd = _only_culprit(r, "relu_2")
    assert (fd.layer, fd.type, fd.aten_nodes) == ("relu_2", "Sigmoid", ["relu_2"])


def test_hand_edited_layer_param_is_blamed(cnn_training_pt2, cnn_ncnn_files, tmp_path):
    param, bin_ = cnn_ncnn_files
    # the first max pooling becomes an average pooling (pooling_type 0=1)
    edited = _edit_param(param, tmp_path / "edited.param", r"^(Pooling\s+max_pool2d\s+1 1 \S+ \S+)", r"\1 0=1")
    r = verify(cnn_training_pt2, VerifyOptions(ncnn_param=edited, ncnn_bin=bin_))
    fd = _only_culprit(r, "max_pool2d")
    assert fd.layer == "max_pool2d" and fd.status == DIVERGENT


def test_hand_edited_output_size_is_a_failed_layer(cnn_training_pt2, cnn_ncnn_files, tmp_path):
    param, bin_ = cnn_ncnn_files
    # the stem conv loses its padding: 16x16 -> 14x14 (pad_left 4=1 -> 4=0)
    edited = _edit_param(param, tmp_path / "edited.param", r"^(Convolution\s+conv2d\s.*?) 4=1", r"\1 4=0")
    r = verify(cnn_training_pt2, VerifyOptions(ncnn_param=edited, ncnn_bin=bin_))
    fd = r.first_divergent
    assert fd.layer == "conv2d" and fd.status == FAILED and fd.index == 1
    assert "shape differs" in fd.note and fd.to_dict()["max_abs"] is None


def test_unmodified_files_verify_like_a_conversion(cnn_training_pt2, cnn_ncnn_files):
    param, bin_ = cnn_ncnn_files
    r = verify(cnn_training_pt2, VerifyOptions(ncnn_param=param, ncnn_bin=bin_))
    assert r.ok and r.first_divergent is None and all(x.status == OK for x in r.layers)


def test_fp16_weights_show_fp16_sized_errors(cnn_training_pt2):
    r32 = verify(cnn_training_pt2, FP32)
    r16 = verify(cnn_training_pt2, VerifyOptions(fp16=True))
    assert (r32.fp16, r16.fp16) == (False, True)
    assert (r32.rtol, r16.rtol) == (1e-4, 1e-2)  # the defaults follow the weights
    assert r32.ok and r16.ok and r16.first_divergent is None
    own32 = max(x.own.max_rel for x in r32.layers if x.own is not None)
    own16 = max(x.own.max_rel for x in r16.layers if x.own is not None)
    assert own32 < 1e-5
    assert 1e-4 < own16 < 5e-3  # fp16 weights: errors of ~1e-3 relative
    out32, out16 = r32.outputs[0].error.max_rel, r16.outputs[0].error.max_rel
    assert out32 < 1e-5 and 1e-5 < out16 < 5e-3 and out16 > 30 * out32
    # with the fp32 tolerance, fp16 weights are beyond tolerance and each weighted layer is blamed
    strict = verify(cnn_training_pt2, VerifyOptions(fp16=True, atol=1e-6, rtol=1e-5))
    assert not strict.ok and strict.first_divergent.type == "Convolution" and strict.first_divergent.index == 1


def test_user_inputs_and_random_inputs(cnn_training_pt2, tmp_path):
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = verify(cnn_training_pt2, VerifyOptions(fp16=False, inputs=[tmp_path / "x.npy"]))
    assert r.input_source == "user" and r.ok
    # the ncnn input is what was given, without its batch axis
    assert r.layers[0].blobs[0].ncnn_shape == (3, 16, 16) and r.layers[0].max_abs == 0.0
    np.save(tmp_path / "bad.npy", x[:, :2])
    with pytest.raises(VerifyError, match=r"bad\.npy \(input x\): dim 1 is 2, the model input needs 3"):
        verify(cnn_training_pt2, VerifyOptions(inputs=[tmp_path / "bad.npy"]))
    with pytest.raises(VerifyError, match="2 input file"):
        verify(cnn_training_pt2, VerifyOptions(inputs=[tmp_path / "x.npy"] * 2))


def test_package_without_sample_inputs_uses_seeded_random_inputs(tmp_path):
    m = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU()).eval()
    ep = torch.export.export(m, (torch.randn(1, 2, 8, 8),))
    ep._example_inputs = None
    torch.export.save(ep, str(tmp_path / "m.pt2"))
    a = verify(tmp_path / "m.pt2", VerifyOptions(fp16=False, seed=3))
    b = verify(tmp_path / "m.pt2", VerifyOptions(fp16=False, seed=3))
    assert a.input_source == "random" and a.ok
    assert a.outputs[0].error == b.outputs[0].error  # same seed, same values


def test_internal_blobs_of_one_op_lowered_to_several_layers(tmp_path):
    """remainder is lowered to several layers: their intermediate blobs have no PyTorch value;
    the layer producing the final value is run together with them."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(4, 8, 1)

        def forward(self, x):
            a, b = torch.chunk(self.c(x), 2, 1)
            return torch.remainder(a, 0.7) + torch.sigmoid(b), b * 2

    ep = torch.export.export(M().eval(), (torch.randn(1, 4, 6, 6),))
    torch.export.save(ep, str(tmp_path / "m.pt2"))
    r = verify(tmp_path / "m.pt2", FP32)
    assert r.ok and len(r.outputs) == 2 and all(o.ok for o in r.outputs)
    internal = [x for x in r.layers if x.status == "not_compared"]
    assert internal and all("remainder" in x.aten_nodes for x in internal)
    assert all(b.value is None and "intermediate of remainder" in b.note for x in internal for b in x.blobs)
    final = next(x for x in r.layers if "remainder" in x.aten_nodes and x.error is not None)
    assert set(x.layer for x in internal) <= set(final.isolated_with)
    chunk = next(x for x in r.layers if x.type == "Slice")
    assert [b.value for b in chunk.blobs] == ["getitem", "getitem_1"]


def test_progress_and_cancel(cnn_training_pt2):
    from engine.convert import ConvertOptions, convert

    conversion = convert(str(cnn_training_pt2), ConvertOptions(fp16=False))
    seen = []
    r = verify(cnn_training_pt2, FP32, conversion=conversion, progress=lambda d, t, m: seen.append((d, t, m)))
    assert r.conversion is conversion and r.ok
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and seen[-1] == (seen[-1][1], seen[-1][1], "done")
    assert any(m == f"layer {r.layers[-1].layer}" for _, _, m in seen)
    calls = []
    with pytest.raises(Cancelled):
        verify(cnn_training_pt2, FP32, conversion=conversion, cancel=lambda: calls.append(1) or len(calls) > 6)


def test_result_json_document(cnn_training_pt2):
    import json

    d = json.loads(json.dumps(verify(cnn_training_pt2, FP32).to_dict(), allow_nan=False))
    assert d["ok"] is True and d["first_divergent"] is None and d["torch_runner"] == "direct"
    assert {"name", "max_abs", "max_rel"} <= set(d["outputs"][0])
    assert all({"layer", "type", "aten_nodes", "max_abs", "max_rel", "cosine"} <= set(x) for x in d["layers"])


def test_two_inputs_batch_of_two_compares_the_first_sample(tmp_path):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.fc = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Linear(4, 5)

        def forward(self, x, y):
            z = torch.relu(self.c(x)).mean((2, 3))
            return self.fc(z) + y, z.softmax(-1)

    ep = torch.export.export(M().eval(), (torch.randn(2, 3, 8, 8), torch.randn(2, 5)))
    torch.export.save(ep, str(tmp_path / "m.pt2"))
    r = verify(tmp_path / "m.pt2", FP32)
    assert r.ok and [o.name for o in r.outputs] == ["add", "softmax"]
    assert any("batch of 2" in n and "first sample" in n for n in r.notes)
    conv = r.layer("conv2d")
    assert conv.blobs[0].ncnn_shape == (4, 8, 8) and conv.blobs[0].torch_shape == (2, 4, 8, 8)


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_an_input_batch_gathered_into_one_blob_is_fed_whole(tmp_path, dialect):
    """PatchTST-style channels as the batch axis of the input, gathered into one blob by the
    first layer: verify fed ncnn the first channel alone, that Reshape failed on it, and a
    correct model had its first layer blamed. The input batch is now fed whole."""
    torch.manual_seed(0)
    pt2 = export(ChannelsAsBatch().eval(), [torch.randn(1, 16, 3)], tmp_path / "channels.pt2", dialect)
    r = verify(pt2, FP32)
    assert r.first_divergent is None and r.ok, (r.first_divergent and r.first_divergent.layer)
    assert any("batch of 3" in n for n in r.notes)
    assert all(o.ok for o in r.outputs) and len(r.outputs) == 2
    assert sum(1 for x in r.layers for b in x.blobs if b.compared) >= 10
    # a relu broken after the gather: its blob (one channel's rows) has no batch axis verify
    # knows, so the first compared layer after it is blamed, run together with it
    broken = write_plugin(tmp_path / "broken.py", relu_as_sigmoid("relu"))
    b = verify(pt2, VerifyOptions(fp16=False, converters=[broken]))
    fd = b.first_divergent
    assert not b.ok and fd is not None and "relu" in fd.isolated_with, (fd and (fd.layer, fd.isolated_with))
    assert [x.layer for x in b.layers if x.blamed] == [fd.layer]
    assert all(x.status == OK for x in b.layers[:fd.index] if x.blobs and any(y.compared for y in x.blobs))


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_a_value_left_with_its_batch_on_another_axis_is_laid_out_so(tmp_path, dialect):
    """ViTDet's relative-position einsum: the no-op Reshape moving its batch axis back is dropped
    and the blob before it stands for the einsum; verify compared it in the wrong order and blamed
    that correct layer (cosine 0.5). The pass now records the moved axis."""
    torch.manual_seed(0)
    pt2 = export(RelPosEinsum().eval(), [torch.randn(4, 16, 8)], tmp_path / "relpos.pt2", dialect)
    r = verify(pt2, FP32)
    assert r.first_divergent is None and r.ok, (r.first_divergent and r.first_divergent.layer)
    assert sum(1 for x in r.layers for b in x.blobs if b.compared) >= 8
    broken = write_plugin(tmp_path / "broken.py", relu_as_sigmoid("relu"))
    b = verify(pt2, VerifyOptions(fp16=False, converters=[broken]))
    assert not b.ok and b.first_divergent is not None and "relu" in b.first_divergent.aten_nodes
    assert [x.layer for x in b.layers if x.blamed] == [b.first_divergent.layer]


def test_without_isolated_runs_blame_follows_input_errors(cnn_training_pt2, tmp_path):
    plugin = write_plugin(tmp_path / "relu_as_sigmoid.py", RELU_AS_SIGMOID)
    r = verify(cnn_training_pt2, VerifyOptions(fp16=False, converters=[plugin], isolate=False))
    fd = _only_culprit(r, BROKEN_RELU)
    assert fd.own is None and all(x.own is None for x in r.layers if x.type != "Input")


def test_a_dilation_wider_than_the_map_verifies_without_crashing(tmp_path):
    """DeepLabV3's ASPP on a small map: a 3×3 convolution dilated 12 over an 8×8 input. ncnn's x86
    kernel for it crashes the process when the packed layout is off, as verify ran it; verify
    now runs ncnn with its default packed layout (the command, in its own process here)."""
    import subprocess
    import sys

    from tests.engine.verify.models import export

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=12, dilation=12), torch.nn.ReLU())
    pt2 = export(m, [torch.randn(1, 8, 8, 8)], tmp_path / "aspp.pt2")
    p = subprocess.run([sys.executable, "-m", "engine.cli.main", "verify", str(pt2), "--fp16", "0"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "no divergent layer" in p.stdout


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_layers_inside_mode_regions_are_compared_and_blamed(tmp_path, dialect):
    """``torch.no_grad()`` / ``torch.autocast`` regions: the layers converted from inside them
    are compared like any other, and a broken one there is the one named."""
    torch.manual_seed(0)
    pt2 = export(ModeRegions(), [torch.randn(1, 5, 8)], tmp_path / "regions.pt2", dialect)
    r = verify(pt2, FP32)
    assert r.ok and r.first_divergent is None
    assert r.torch_runner == "direct"
    compared = {x.type for x in r.layers if x.status == OK and x.own is not None}
    assert {"ReLU", "Sigmoid", "Gemm"} <= compared, [(x.layer, x.type, x.status) for x in r.layers]
    relu = next(x for x in r.layers if x.type == "ReLU").aten_nodes[-1]
    broken = verify(pt2, VerifyOptions(fp16=False, converters=[write_plugin(tmp_path / "b.py", relu_as_sigmoid(relu))]))
    fd = broken.first_divergent
    assert fd is not None and fd.aten_nodes == [relu] and fd.type == "Sigmoid", (fd and fd.layer)
    assert [x.layer for x in broken.layers if x.blamed] == [fd.layer]
