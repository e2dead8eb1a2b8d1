"""Verify compares each blob with its PyTorch value in the blob's own layout (real torch.export,
real ncnn): multi-output layers (a Slice into q, k, v), values a pass re-laid out (ConvNeXt's
channels-last MLP run channels-first, the permute moved before it), values whose batch axis is
not dim 0. Every one of these models was reported with divergent layers while correct; each
test also breaks one layer in the written .param and checks that it is the one named."""
from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from engine.cli.main import main  # noqa: E402
from engine.convert import ConvertOptions, convert  # noqa: E402
from engine.verify import VerifyOptions, verify  # noqa: E402
from engine.verify.layout import as_blob  # noqa: E402
from engine.verify.mapping import ValueRef  # noqa: E402
from engine.verify.result import DIVERGENT, INHERITED, NOT_COMPARED, OK  # noqa: E402
from tests.engine.verify.models import (BatchInside, ChannelsLastMLP, Clamped, Overwritten,  # noqa: E402
                                        PositionsFromPadding, QKVAttention, Router, TokenEncoder, TwoViews, export, relu_as_sigmoid,
                                        write_plugin)

FP32 = VerifyOptions(fp16=False)


def _pt2(tmp_path, module, *shape, name="m"):
    torch.manual_seed(0)
    module = module.eval()
    return export(module, [torch.randn(*shape)], tmp_path / f"{name}.pt2")


def _ncnn_files(pt2, tmp_path):
    result = convert(str(pt2), ConvertOptions(fp16=False))
    assert result.ok, result.errors
    param, bin_ = tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin"
    result.write(param, bin_)
    return param, bin_


def _edited(param, tmp_path, pattern, repl):
    text, n = re.subn(pattern, repl, param.read_text(), count=1, flags=re.M)
    assert n == 1, pattern
    out = tmp_path / "edited.param"
    out.write_text(text)
    return out


def _clean(r):
    """No layer blamed, every compared layer within tolerance alone and in the whole model."""
    assert r.ok and r.outputs_ok and r.first_divergent is None, [(x.layer, x.status, x.note) for x in r.layers]
    for x in r.layers:
        assert x.status in (OK, "not_compared"), (x.layer, x.status)
        if x.own is not None:
            assert x.own.max_rel < 1e-4 and x.max_rel < 1e-4, (x.layer, x.own, x.error)


def test_slice_into_q_k_v_compares_each_output_with_its_own_value(tmp_path):
    pt2 = _pt2(tmp_path, QKVAttention(), 1, 10, 32)
    r = verify(pt2, FP32)
    _clean(r)
    sl = next(x for x in r.layers if x.type == "Slice" and len(x.blobs) == 3)
    assert sl.aten_nodes == ["select", "select_1", "select_2"]
    for b in sl.blobs:  # each output is its own select's (or nothing), never a sibling's
        assert b.value is None or b.blob == b.value or b.blob.startswith(b.value + "_"), (b.blob, b.value)
    selects = {b.value for x in r.layers for b in x.blobs if b.compared} & {"select", "select_1", "select_2"}
    assert selects == {"select", "select_1", "select_2"}
    # swap two of the Slice's outputs in the .param: the layer completing q is blamed, run with it
    param, bin_ = _ncnn_files(pt2, tmp_path)
    line = next(ln for ln in param.read_text().splitlines() if ln.startswith("Slice"))
    a, b = line.split()[5:7]
    edited = _edited(param, tmp_path, rf"^(Slice\s.*) {a} {b} ", rf"\1 {b} {a} ")
    bad = verify(pt2, VerifyOptions(ncnn_param=edited, ncnn_bin=bin_))
    fd = bad.first_divergent
    assert fd is not None and fd.status == DIVERGENT and not bad.ok
    assert sl.layer in fd.isolated_with and set(fd.aten_nodes) & {"select", "select_1"}
    assert all(x.status == OK for x in bad.layers[:fd.index] if x.error is not None)


@pytest.mark.parametrize("fp16", [False, True])
def test_shifted_window_attention_block(tmp_path, fp16):
    """Swin's block (roll, window partition, qkv head split, relative position bias, shift
    mask): the converter merges the head split's permute of k into the transpose after it, so
    the Slice's k output is k in another order — it has no counterpart, and the layer is not
    blamed (it was, with cosine ~0)."""
    from tests.engine.models.test_swin_block import SwinBlock, _randomize

    pt2 = _pt2(tmp_path, _randomize(SwinBlock(shift=2)), 1, 8, 8, 16)
    r = verify(pt2, VerifyOptions(fp16=fp16))
    assert r.ok and r.first_divergent is None, [(x.layer, x.status) for x in r.layers if x.blamed]
    sl = next(x for x in r.layers if x.type == "Slice" and len(x.blobs) == 3)
    assert all(b.value is None and b.note for b in sl.blobs)  # no counterpart, and why
    assert sum(x.error is not None for x in r.layers) >= 20


@pytest.mark.parametrize("inside", [False, True], ids=["scale_after_permute", "scale_inside"])
def test_channels_last_mlp_run_channels_first(tmp_path, inside):
    pt2 = _pt2(tmp_path, ChannelsLastMLP(inside=inside), 1, 16, 8, 8)
    r = verify(pt2, FP32)
    _clean(r)
    assert all(x.error is not None for x in r.layers), [x.layer for x in r.layers if x.error is None]
    # the MLP's blobs are channels-first, their ATen values channels-last: compared permuted
    gelu = r.layer("gelu")
    assert gelu.blobs[0].how == "layout" and gelu.blobs[0].ncnn_shape == (64, 8, 8)
    assert gelu.blobs[0].torch_shape == (1, 8, 8, 64)
    # the permute the converter moved before the MLP holds the LayerNorm's value channels-first
    moved = next(x for x in r.layers if x.type == "Permute" and x.blobs[0].blob.endswith("_nchw"))
    assert moved.blobs[0].value == "layer_norm" and moved.status == OK
    # a GELU turned Sigmoid in the .param is the one layer blamed; the CLI exits 1
    param, bin_ = _ncnn_files(pt2, tmp_path)
    edited = _edited(param, tmp_path, r"^GELU(\s+)gelu\b", r"Sigmoid\1gelu")
    bad = verify(pt2, VerifyOptions(ncnn_param=edited, ncnn_bin=bin_))
    assert bad.first_divergent.layer == "gelu" and [x.layer for x in bad.layers if x.blamed] == ["gelu"]
    assert main(["verify", str(pt2), "--ncnn-param", str(edited), "--ncnn-bin", str(bin_)]) == 1


@pytest.mark.parametrize("where", [1, 2])
def test_a_batch_moved_inside_the_model_is_computed_whole(tmp_path, where):
    """A batch of 2 moved to dim 1 or 2 inside the model: the layout solver keeps every dim of
    those values (no axis can be dropped), ncnn computes the whole batch and every layer is
    compared on PyTorch's full value — no sample dropped, no note."""
    pt2 = _pt2(tmp_path, BatchInside(where), 2, 5, 8)
    r = verify(pt2, FP32)
    _clean(r)
    assert not any("batch of" in n for n in r.notes), r.notes
    moved = [b for x in r.layers if x.status == OK for b in x.blobs
             if b.torch_shape is not None and len(b.torch_shape) == 3 and b.torch_shape[where] == 2]
    assert moved and all(b.ncnn_shape == b.torch_shape for b in moved)


def test_a_layer_wrong_by_itself_fails_even_when_the_outputs_pass(tmp_path, capsys):
    """The headline and the exit status agree: a blamed layer whose error the model masks
    (a clamp) still makes the verification fail, and says so."""
    pt2 = _pt2(tmp_path, Clamped(), 1, 3, 8, 8)
    assert main(["verify", str(pt2), "--fp16", "0"]) == 0
    assert "no divergent layer" in capsys.readouterr().out
    param, bin_ = _ncnn_files(pt2, tmp_path)
    # the relu fused into the convolution becomes a sigmoid (activation_type 1 → 4)
    edited = _edited(param, tmp_path, r"^(Convolution\s.*) 9=1\b", r"\1 9=4")
    assert main(["verify", str(pt2), "--ncnn-param", str(edited), "--ncnn-bin", str(bin_)]) == 1
    out, err = capsys.readouterr()
    assert re.search(r"^first divergent layer: conv2d \(Convolution\), divergent$", out, re.M)
    assert "masked downstream" in out and re.search(r"\bok$", out.splitlines()[4])
    assert err.strip().endswith("is wrong by itself, though the outputs are within tolerance")
    r = verify(pt2, VerifyOptions(ncnn_param=edited, ncnn_bin=bin_))
    assert r.outputs_ok and not r.ok and r.to_dict()["ok"] is False and r.to_dict()["outputs_ok"] is True


def test_layout_of_a_value_as_its_blob():
    v = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    # the value's shape, size-1 dims aside: compared
    for shape in [(2, 3, 4), (1, 2, 3, 4), (2, 1, 3, 4)]:
        got, note, wrong = as_blob(v, ValueRef("v", "v", "name"), shape)
        assert got is not None and not wrong and np.array_equal(got.ravel(), v.ravel()), shape
    # another shape of the same size: the same elements may be in another order, so without the
    # conversion's word for it (checked) it is not compared, and not blamed
    for shape in [(6, 4), (4, 3, 2), (2, 12)]:
        got, note, wrong = as_blob(v, ValueRef("v", "v", "name"), shape)
        assert got is None and not wrong and "layout differs" in note, shape
        got, _, _ = as_blob(v, ValueRef("v", "v", "name", checked=True), shape)
        assert np.array_equal(got.ravel(), v.ravel())
    # a recorded permutation is applied; the batch axis (here dim 1 after it) is sliced at sample 0
    got, _, _ = as_blob(v, ValueRef("v", "v", "layout", dims=(2, 0, 1), batch=1, checked=True), (4, 3))
    assert np.array_equal(got, v.transpose(2, 0, 1)[:, 0, :])
    # another size: the blob cannot be this value
    got, note, wrong = as_blob(v, ValueRef("v", "v", "name"), (5, 5))
    assert got is None and wrong and "shape differs" in note


def test_a_blob_whose_shape_is_not_its_values_has_no_counterpart():
    """(4, 16, 16) is (4, 2, 16, 8) re-shaped by size but not in its order (a head split whose
    permute a pass merged into the next layer): the mapping gives it no counterpart; with a
    recorded permutation or re-shaping it has one."""
    from engine.ir import Graph, Provenance
    from engine.verify.mapping import LAYOUT_KEY, map_blobs

    aten, ncnn = Graph(), Graph()
    x = aten.new_operand("x", shape=[4, 16, 16])
    aten.add_op("pnnx.Input", "x", [], [x], provenance=Provenance(("x",)))
    s = aten.new_operand("select", shape=[4, 2, 16, 8])
    aten.add_op("aten.view.default", "select", [x], [s], provenance=Provenance(("select",)))
    aten.add_op("pnnx.Output", "out", [s], [])
    i = ncnn.new_operand("in0", shape=[4, 16, 16])
    ncnn.add_op("Input", "in0", [], [i])
    blobs = {}
    for name, meta in [("a", {}), ("b", {LAYOUT_KEY: {"value": "select", "view_of": [4, 2, 16, 8]}})]:
        blobs[name] = ncnn.new_operand(name, shape=[4, 16, 16])
        blobs[name].meta.update(meta)
        ncnn.add_op("Reshape", name, [i], [blobs[name]], provenance=Provenance(("select",)))
    ncnn.meta["inputs"] = [{"blob": "in0", "name": "x"}]
    m = map_blobs(ncnn, aten)
    assert "a" not in m.refs and "another layout" in m.unmapped["a"]
    assert m.refs["b"].value == "select" and m.refs["b"].checked


def _two_views(tmp_path):
    torch.manual_seed(0)
    return export(TwoViews(40), [torch.rand(1, 3, 12, 12), torch.rand(1, 3, 12, 12)], tmp_path / "views.pt2")


def test_a_batch_of_two_through_a_deep_encoder_is_not_blamed(tmp_path):
    """RAFT's encoder runs both images as one batch of two; ncnn extracts the first sample of
    such a blob. A layer more than 64 layers into it used to be re-run alone on that one sample,
    which ncnn refused (error -1), and was blamed as "failed" though the model and the layer
    match PyTorch. Each layer now runs alone on the whole batch, PyTorch's."""
    r = verify(_two_views(tmp_path), FP32)
    _clean(r)
    encoder = [x for x in r.layers if x.type in ("Convolution", "TanH", "ReLU") and x.status != NOT_COMPARED]
    assert len(encoder) > 80 and all(x.own is not None and len(x.isolated_with) == 1 for x in encoder), \
        [(x.layer, x.isolated_with) for x in encoder if x.own is None or len(x.isolated_with) != 1][:3]


@pytest.mark.parametrize("isolate", [True, False], ids=["alone", "whole-model-only"])
def test_a_broken_layer_inside_a_batch_of_two_is_still_blamed(tmp_path, isolate):
    """The same encoder with its relu lowered to sigmoid by a plug-in: that layer is blamed,
    no layer before it, the damage after it is inherited — also without runs alone, where a
    layer whose inputs are not compared (the reshapes moving the batch back) is judged by the
    compared blobs it computes from, not taken to have fine inputs."""
    plugin = write_plugin(tmp_path / "broken.py", relu_as_sigmoid("relu"))
    r = verify(_two_views(tmp_path), VerifyOptions(fp16=False, converters=[plugin], isolate=isolate))
    fd = r.first_divergent
    assert fd is not None and fd.aten_nodes == ["relu"] and fd.type == "Sigmoid", (fd and fd.layer)
    if isolate:
        assert fd.own is not None and fd.own.max_rel > 0.1  # wrong when run alone, on PyTorch's batch
    assert [x.layer for x in r.layers if x.blamed] == [fd.layer]
    assert all(x.status in (OK, NOT_COMPARED) for x in r.layers[:fd.index])
    assert any(x.status == INHERITED for x in r.layers[fd.index + 1:])
    assert not r.outputs_ok


def test_user_files_of_a_batch_of_two_verify_like_the_conversion(tmp_path):
    """The same files given as the user's (``--ncnn-param``): blobs named after an ATen value
    that the conversion found to hold another layout (``cat``, a batch of two re-laid out;
    Swin's ``reshape``) are left without a counterpart, as in the conversion's own check,
    instead of being compared by name with a value of another shape and blamed."""
    pt2 = _two_views(tmp_path)
    param, bin_ = _ncnn_files(pt2, tmp_path)
    r = verify(pt2, VerifyOptions(fp16=False, ncnn_param=param, ncnn_bin=bin_))
    _clean(r)
    assert "cat" in {b.blob for x in r.layers for b in x.blobs if not b.compared}



def _overwritten(tmp_path):
    torch.manual_seed(0)
    return export(Overwritten(40), [torch.randn(1, 16, 8)], tmp_path / "overwritten.pt2")


def test_layers_after_a_whole_copy_into_a_tensor_are_compared(tmp_path):
    """MViTv2 writes its attention scores back into themselves (``attn.copy_(view)``): the copy
    holds the view's values alone. Every layer after it used to be left uncompared ("does not
    compute ... from its inputs": the scores seemed to come from before the layer's inputs too),
    and a broken layer there went unseen or another was blamed."""
    r = verify(_overwritten(tmp_path), FP32)
    _clean(r)
    body = [x for x in r.layers if x.type in ("Gemm", "TanH", "ReLU", "Softmax")]
    assert len(body) > 80 and all(x.status != NOT_COMPARED for x in body), \
        [(x.layer, x.note) for x in body if x.status == NOT_COMPARED][:3]


def test_a_broken_layer_after_a_whole_copy_is_blamed(tmp_path):
    plugin = write_plugin(tmp_path / "broken.py", relu_as_sigmoid("relu"))
    r = verify(_overwritten(tmp_path), VerifyOptions(fp16=False, converters=[plugin]))
    fd = r.first_divergent
    assert fd is not None and fd.aten_nodes == ["relu"] and fd.type == "Sigmoid", (fd and fd.layer)
    assert [x.layer for x in r.layers if x.blamed] == [fd.layer]


def test_user_files_of_a_text_model_feed_its_token_ids_as_int32(tmp_path):
    """Files read back carry no mark of which input holds token ids: one whose ids reach an
    ``Embed`` layer is fed as int32, as the conversion's own check feeds it. Fed as floats, the
    ids were garbage to ``Embed``, which verify blamed on correct files (every Hugging Face
    text model)."""
    torch.manual_seed(0)
    pt2 = export(TokenEncoder(), [torch.randint(0, 50, (1, 7))], tmp_path / "tokens.pt2")
    param, bin_ = _ncnn_files(pt2, tmp_path)
    _clean(verify(pt2, VerifyOptions(fp16=False, ncnn_param=param, ncnn_bin=bin_)))
    broken = _edited(param, tmp_path, r"^GELU   (\s+gelu_1\s)", r"Sigmoid\1")
    r = verify(pt2, VerifyOptions(fp16=False, ncnn_param=broken, ncnn_bin=bin_))
    fd = r.first_divergent
    assert fd is not None and fd.layer == "gelu_1", (fd and fd.layer)


def test_layers_after_positions_counted_from_padding_are_compared(tmp_path):
    """RoBERTa-style position ids: ``type_as(mask)`` lends only its dtype (the walk back went
    through the mask to the model input), and the token types, a gather by position the
    conversion made a constant, come from no input. Every layer after them was left uncompared
    (RoBERTa: 10 of 55)."""
    torch.manual_seed(0)
    ids = torch.tensor([[0, 5, 9, 13, 7, 1, 1]])
    r = verify(export(PositionsFromPadding(), [ids], tmp_path / "positions.pt2"), FP32)
    _clean(r)
    body = [x for x in r.layers if x.type in ("Gemm", "GELU", "InnerProduct")]
    assert len(body) >= 5 and all(x.status != NOT_COMPARED for x in body), \
        [(x.layer, x.note) for x in body if x.status == NOT_COMPARED]


def test_a_topk_written_out_by_a_pass_is_not_blamed(tmp_path):
    """A layer named after neither output of a node of several (topk's values and indices, each
    a Concat of the picks) holds one of them, and which one is not known: it is left without a
    counterpart. It was compared with the last one, the indices, and blamed on every correct
    mixture-of-experts model (Mixtral, Qwen2-MoE, Qwen3-MoE)."""
    torch.manual_seed(0)
    r = verify(export(Router(), [torch.randn(1, 6, 8)], tmp_path / "router.pt2"), FP32)
    _clean(r)
    assert sum(x.status != NOT_COMPARED for x in r.layers) > 8
