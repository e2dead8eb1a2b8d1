"""The ncnn layer table against the real runtime: every type exists, and for every layer with
weights (and the variants that change which weights are loaded) a model written from the table
loads, while the same .bin short by 4 bytes does not — so the table's weight sizes are exactly
what the runtime reads (a checked last weight after it catches a table listing too much or
too little). Also the builder API (make_params & co)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from engine.ncnn import layers as L
from engine.ncnn.layers import LayerSpecError, expected_weights, make_params

ncnn = pytest.importorskip("ncnn")

from tests.engine.writers.ncnn_graphs import NetBuilder, load_net  # noqa: E402

# (layer type, params, number of input blobs)
SAMPLES = [
    ("BatchNorm", dict(channels=3), 1),
    ("Bias", dict(bias_data_size=3), 1),
    ("Convolution", dict(num_output=2, kernel_w=3, weight_data_size=54, bias_term=1), 1),
    ("Convolution", dict(num_output=2, kernel_w=3, weight_data_size=54, bias_term=1, int8_scale_term=1), 1),
    ("Convolution", dict(num_output=2, kernel_w=3, weight_data_size=54, int8_scale_term=101), 1),
    ("Convolution", dict(num_output=2, kernel_w=3, weight_data_size=54, bias_term=1, dynamic_weight=1), 2),
    ("Convolution1D", dict(num_output=2, kernel_w=3, weight_data_size=18, bias_term=1), 1),
    ("Convolution3D", dict(num_output=2, kernel_w=1, weight_data_size=6, bias_term=1), 1),
    ("ConvolutionDepthWise", dict(num_output=4, group=4, kernel_w=3, weight_data_size=36, bias_term=1), 1),
    ("ConvolutionDepthWise", dict(num_output=4, group=4, kernel_w=3, weight_data_size=36, int8_scale_term=1), 1),
    ("ConvolutionDepthWise", dict(num_output=4, group=4, kernel_w=3, weight_data_size=36, int8_scale_term=102), 1),
    ("ConvolutionDepthWise1D", dict(num_output=4, group=4, kernel_w=3, weight_data_size=12, bias_term=1), 1),
    ("ConvolutionDepthWise3D", dict(num_output=4, group=4, kernel_w=1, weight_data_size=4, bias_term=1), 1),
    ("Deconvolution", dict(num_output=2, kernel_w=3, weight_data_size=54, bias_term=1), 1),
    ("Deconvolution1D", dict(num_output=2, kernel_w=3, weight_data_size=18, bias_term=1), 1),
    ("Deconvolution3D", dict(num_output=2, kernel_w=1, weight_data_size=6, bias_term=1), 1),
    ("DeconvolutionDepthWise", dict(num_output=4, group=4, kernel_w=3, weight_data_size=36, bias_term=1), 1),
    ("DeconvolutionDepthWise1D", dict(num_output=4, group=4, kernel_w=3, weight_data_size=12, bias_term=1), 1),
    ("DeconvolutionDepthWise3D", dict(num_output=4, group=4, kernel_w=1, weight_data_size=4, bias_term=1), 1),
    ("DeformableConv2D", dict(num_output=2, kernel_w=3, weight_data_size=54, bias_term=1), 2),
    ("Dequantize", dict(scale_data_size=3, bias_data_size=3), 1),
    ("Embed", dict(num_output=4, input_dim=5, bias_term=1, weight_data_size=20), 1),
    ("Embed", dict(num_output=4, input_dim=5, weight_data_size=20, int8_scale_term=1), 1),
    ("Gemm", dict(transB=1, constantB=1, constantC=1, constantM=2, constantN=3, constantK=4,
                  constant_broadcast_type_C=4), 1),
    *[("Gemm", dict(constantB=1, constantC=1, constantM=2, constantN=3, constantK=4, constant_broadcast_type_C=t), 1)
      for t in (0, 1, 2, 3, -1)],
    ("Gemm", dict(constantA=1, constantM=2, constantK=4), 1),
    ("GroupNorm", dict(group=1, channels=3), 1),
    ("GroupNorm", dict(group=1, channels=3, affine=0), 1),
    ("GRU", dict(num_output=4, weight_data_size=36), 1),
    ("GRU", dict(num_output=4, weight_data_size=72, direction=2), 1),
    ("GRU", dict(num_output=4, weight_data_size=36, int8_scale_term=1), 1),
    ("InnerProduct", dict(num_output=2, bias_term=1, weight_data_size=24), 1),
    ("InnerProduct", dict(num_output=2, bias_term=1, weight_data_size=24, int8_scale_term=1), 1),
    ("InstanceNorm", dict(channels=3), 1),
    ("InstanceNorm", dict(channels=3, affine=0), 1),
    ("LayerNorm", dict(affine_size=4), 1),
    ("LayerNorm", dict(affine_size=4, affine=0), 1),
    ("LSTM", dict(num_output=4, weight_data_size=48), 1),
    ("LSTM", dict(num_output=4, hidden_size=5, weight_data_size=60), 1),
    ("LSTM", dict(num_output=4, hidden_size=5, weight_data_size=120, direction=2), 1),
    ("LSTM", dict(num_output=4, weight_data_size=48, int8_scale_term=1), 1),
    ("MemoryData", dict(w=3), 0),
    ("MemoryData", dict(w=3, h=2, c=2), 0),
    ("MemoryData", dict(w=2, h=2, d=2, c=2), 0),
    ("MemoryData", dict(w=3, h=2, load_type=0), 0),
    ("MultiHeadAttention", dict(embed_dim=8, num_heads=2, weight_data_size=64), 3),
    ("MultiHeadAttention", dict(embed_dim=8, num_heads=2, weight_data_size=96, kdim=6, vdim=5), 3),
    ("MultiHeadAttention", dict(embed_dim=8, num_heads=2, weight_data_size=64, quantize_term=1), 3),
    ("Normalize", dict(scale_data_size=3), 1),
    ("Padding", dict(top=1, per_channel_pad_data_size=3), 1),
    ("PReLU", dict(num_slope=3), 1),
    ("Quantize", dict(scale_data_size=1), 1),
    ("Requantize", dict(scale_in_data_size=1, scale_out_data_size=1, bias_data_size=3), 1),
    ("RMSNorm", dict(affine_size=4), 1),
    ("RMSNorm", dict(affine_size=4, affine=0), 1),
    ("RNN", dict(num_output=4, weight_data_size=12), 1),
    ("RNN", dict(num_output=4, weight_data_size=24, direction=2), 1),
    ("RNN", dict(num_output=4, weight_data_size=12, int8_scale_term=1), 1),
    ("Scale", dict(scale_data_size=3, bias_term=1), 1),
    ("Scale", dict(scale_data_size=-233), 2),
]


def _sample_id(s):
    layer, params, _ = s
    return layer + "-" + "-".join(f"{k}{v}" for k, v in params.items() if k not in ("weight_data_size",))[:60]


def _build(layer: str, params: dict, n_in: int) -> NetBuilder:
    b = NetBuilder()
    ins = [b.input(f"in{k}", (3, 4, 4)) for k in range(n_in)]
    p = make_params(layer, **params)
    rng = np.random.default_rng(0)
    weights = {w.name: rng.standard_normal(w.size).astype(np.float32) for w in expected_weights(layer, p)}
    b.layer(layer, ins, name="layer", raw_params=p, weights=weights)
    # a last layer whose (checked) load takes the last 4 bytes: if the table listed more than
    # the layer reads, the file short by 4 bytes still loads; if less, the full file does not
    b.layer("Bias", [b.input("sentinel_in", (1, 1, 1))], name="sentinel", bias_data_size=1,
            weights={"bias_data": np.ones(1, np.float32)})
    return b


def test_every_layer_type_exists_in_the_runtime():
    missing = [t for t in L.layer_types() if ncnn.layer_to_index(t) < 0]
    assert not missing
    assert len(L.layer_types()) >= 110


def test_every_weighted_layer_has_a_runtime_sample():
    covered = {s[0] for s in SAMPLES}
    assert {t for t in L.layer_types() if L.weight_spec(t)} <= covered


@pytest.mark.parametrize("sample", SAMPLES, ids=_sample_id)
@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
def test_runtime_reads_exactly_the_weights_of_the_table(sample, fp16, tmp_path):
    layer, params, n_in = sample
    param, bin_ = _build(layer, params, n_in).write(tmp_path, fp16=fp16)
    net, rp, rb = load_net(param, bin_)
    assert (rp, rb) == (0, 0), f"{layer} {params}: ncnn load_param {rp}, load_model {rb}\n{param.read_text()}"
    size = bin_.stat().st_size
    short = tmp_path / "short.bin"
    shutil.copy(bin_, short)
    with open(short, "r+b") as f:
        f.truncate(size - 4)
    _, rp2, rb2 = load_net(param, short)
    assert rp2 == 0 and rb2 != 0, f"{layer} {params}: ncnn still loads a .bin 4 bytes short: the table lists too much"


# ---------------------------------------------------------------------------- builder
def test_make_params_omits_defaults_and_follows_refs():
    p = make_params("Convolution", num_output=8, kernel_w=3, kernel_h=3, stride_w=1, pad_left=1, pad_top=1,
                    pad_right=1, pad_bottom=2, bias_term=1, weight_data_size=216)
    assert p == {0: 8, 1: 3, 4: 1, 5: 1, 6: 216, 16: 2}
    assert make_params("Pooling", kernel_w=2, kernel_h=3) == {1: 2, 11: 3}


def test_make_params_coerces_kinds():
    p = make_params("Clip", min=0, max=np.float32(6))
    assert p == {0: 0.0, 1: 6.0} and all(isinstance(v, float) for v in p.values())
    assert make_params("Reshape", w=np.int64(4), h=-1) == {0: 4, 1: -1}
    assert make_params("Slice", slices=np.array([2, -233]), axis=0) == {0: [2, -233]}
    assert make_params("Eltwise", op_type=1, coeffs=[1, -1]) == {0: 1, 1: [1.0, -1.0]}
    assert make_params("Interp", resize_type=2, size_expr="0w,0h") == {0: 2, 9: "0w,0h"}


@pytest.mark.parametrize("call, match", [
    (lambda: make_params("Convolutoin"), "did you mean Convolution"),
    (lambda: make_params("Convolution", kernel=3), "kernel_w"),
    (lambda: make_params("Convolution", num_output=2.5), "expected an int"),
    (lambda: make_params("Clip", min="0"), "expected a number"),
    (lambda: make_params("Clip", min=float("nan")), "NaN"),
    (lambda: make_params("Slice", slices=3), "expected a list"),
])
def test_make_params_rejects_mistakes(call, match):
    with pytest.raises(LayerSpecError, match=match):
        call()


def test_builder_defaults_the_runtime_insists_on():
    # ncnn refuses Softmax/Reduction with an axis and without fixbug0=1 ("param is too old")
    assert make_params("Softmax", axis=1) == {0: 1, 1: 1}
    assert make_params("Reduction", operation=3, reduce_all=0, axes=[1])[5] == 1


def test_computed_default_is_omitted_only_when_equal():
    base = dict(embed_dim=16, num_heads=4, weight_data_size=256)
    assert 6 not in make_params("MultiHeadAttention", **base, scale=0.5)  # 1/sqrt(16/4)
    assert make_params("MultiHeadAttention", **base, scale=0.25)[6] == 0.25


def test_expected_weights_follow_conditions():
    names = lambda t, **p: [(w.name, w.size, w.tagged) for w in expected_weights(t, make_params(t, **p))]  # noqa: E731
    assert names("Convolution", num_output=2, weight_data_size=18) == [("weight_data", 18, True)]
    assert names("InnerProduct", num_output=2, bias_term=1, weight_data_size=8) == \
        [("weight_data", 8, True), ("bias_data", 2, False)]
    assert names("LayerNorm", affine_size=4, affine=0) == []
    assert names("LSTM", num_output=4, hidden_size=5, weight_data_size=60)[-1] == ("weight_hr_data", 20, True)
    assert names("MemoryData", w=3, h=2)[0] == ("data", 6, False)
    assert names("MemoryData", w=3, h=2, load_type=0)[0] == ("data", 6, True)
    assert names("Gemm", constantB=1, constantC=1, constantN=3, constantK=4, constantM=2,
                 constant_broadcast_type_C=3)[1] == ("C_data", 6, True)


def test_check_params_reports_unsupported_settings():
    assert L.check_params("Gemm", {18: 401}) == ["Gemm with weight block quantization (quantize_term >= 400) "
                                                 "is not supported by the writer"]
    assert "not a Convolution param" in L.check_params("Convolution", {7: 2})[0]


def test_layer_loads_is_check_params_then_expected_weights():
    """One remembered lookup for both: the problems and no weights, or no problems and the
    weights; each call hands out lists of its own."""
    params = make_params("InnerProduct", num_output=2, bias_term=1, weight_data_size=8)
    problems, weights = L.layer_loads("InnerProduct", params)
    assert problems == [] and weights == expected_weights("InnerProduct", params)
    weights.clear()
    assert L.layer_loads("InnerProduct", params)[1] == expected_weights("InnerProduct", params)
    assert L.layer_loads("Gemm", {18: 401}) == (L.check_params("Gemm", {18: 401}), [])
    with pytest.raises(LayerSpecError, match="divides by zero"):
        L.layer_loads("RNN", {0: 0, 1: 8})  # num_output 0: the weight size divides by it


def test_remembered_answers_tell_equal_values_of_other_types_apart():
    """1, 1.0 and True are one dict key: the memo keys carry each value's type, for scalar params
    (the short key) as for lists."""
    for _ in range(2):  # the second round is served from the memo
        assert L.check_params("Convolution", {0: 1}) == []
        assert L.check_params("Convolution", {0: 1.0}) == ["Convolution.num_output (int): expected an int, got 1.0"]
        assert L.check_params("ReLU", {0: 1.0}) == []
        assert L.check_params("ReLU", {0: True}) == ["ReLU.slope (float): expected a number, got True"]
        assert L.check_params("Reshape", {0: 2, 1: 3}) == L.check_params("Reshape", {1: 3, 0: 2}) == []
        assert make_params("Slice", slices=[1, -233], axis=0) == {0: [1, -233]}  # a list: the long key


def test_doc_differences_are_recorded():
    notes = L.doc_notes()
    assert any("front" in n and "runtime 0" in n for n in notes["Padding"])
    assert any("C_data" in n for n in notes["Gemm"])


NCNN_REPO = Path("/work/.mirror/Tencent+ncnn/repo")


@pytest.mark.skipif(not NCNN_REPO.exists(), reason="no local ncnn source mirror")
def test_generated_table_is_up_to_date():
    from engine.ncnn import gen_layer_table

    assert gen_layer_table.main(["--ncnn", str(NCNN_REPO), "--check"]) == 0
