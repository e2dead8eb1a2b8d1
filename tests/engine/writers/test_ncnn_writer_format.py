"""The .ncnn.param / .ncnn.bin bytes, the checks that refuse unwritable graphs, and reading
models back (ours and the pnnx CLI's)."""
from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.errors import ModelFileError, WriteError
from engine.ir import Attribute
from engine.writers import check_ncnn, read_ncnn_param, write_ncnn
from engine.writers.ncnn_bin import FP16_TAG, to_fp16

from tests.engine.writers.ncnn_graphs import NetBuilder


def pnnx_cli() -> str:
    """The pnnx command line tool next to this Python, or on PATH (skip the test without)."""
    local = Path(sys.executable).with_name("pnnx")
    found = str(local) if local.exists() else shutil.which("pnnx")
    if not found:
        pytest.skip("pnnx CLI not installed")
    return found


def _conv_net(bias=True, fp_weights=None):
    w = fp_weights if fp_weights is not None else np.arange(6, dtype=np.float32).reshape(2, 3, 1, 1) / 8
    b = NetBuilder()
    h = b.input("in0", (3, 2, 2))
    weights = {"weight_data": w}
    if bias:
        weights["bias_data"] = np.array([0.5, -0.25], np.float32)
    b.layer("Convolution", [h], name="conv", num_output=2, kernel_w=1, bias_term=int(bias), weight_data_size=w.size,
            weights=weights)
    return b


def test_param_text(tmp_path):
    b = _conv_net()
    h = b.layer("Clip", [b.g.operands["conv"]], name="clip", min=-1.0, max=float("inf"))
    b.layer("Reshape", [h], name="out0", w=-1, shape_expr="0w,-1")
    b.layer("Eltwise", [b.input("in1", (4,)), b.input("in2", (4,))], name="e", op_type=1, coeffs=[1, 0.5])
    param, _ = b.write(tmp_path)
    lines = param.read_text().splitlines()
    assert lines[:2] == ["7767517", "7 7"]
    assert lines[2].split() == ["Input", "in0", "0", "1", "in0", "0=2", "1=2", "2=3"]
    assert lines[2].startswith("Input                    in0                      0 1")  # pnnx alignment
    assert lines[3].split()[4:] == ["in0", "conv", "0=2", "1=1", "5=1", "6=6"]
    assert lines[4].split()[-2:] == ["0=-1.0", "1=3.40282347e38"]  # inf clamped to FLT_MAX
    assert lines[5].split()[-2:] == ["0=-1", '6="0w,-1"']
    assert lines[8].split()[-2:] == ["0=1", "-23301=2,1.0,0.5"]


def test_bin_layout_fp32_and_fp16(tmp_path):
    w = np.array([1.0, 2.0, 3.0, -1.5, 0.1, 70000.0], np.float32).reshape(2, 3, 1, 1)
    _, bin32 = _conv_net(fp_weights=w).write(tmp_path, stem="a", fp16=False)
    raw = bin32.read_bytes()
    assert raw[:4] == b"\0\0\0\0"  # fp32 tag
    assert np.array_equal(np.frombuffer(raw[4:28], "<f4"), w.ravel())
    assert np.array_equal(np.frombuffer(raw[28:36], "<f4"), [0.5, -0.25])  # raw bias: no tag
    assert len(raw) == 36
    _, bin16 = _conv_net(fp_weights=w).write(tmp_path, stem="b", fp16=True)
    raw = bin16.read_bytes()
    assert struct.unpack("<I", raw[:4])[0] == FP16_TAG
    half = np.frombuffer(raw[4:16], "<f2")
    assert half.tolist() == [1.0, 2.0, 3.0, -1.5, np.float16(0.1), 65504.0]  # clamped, not inf
    assert np.array_equal(np.frombuffer(raw[16:24], "<f4"), [0.5, -0.25])  # bias stays fp32
    assert len(raw) == 24


def test_odd_fp16_weight_is_padded_to_4_bytes(tmp_path):
    b = NetBuilder()
    b.layer("InnerProduct", [b.input("in0", (3,))], name="fc", num_output=1, weight_data_size=3,
            weights={"weight_data": np.ones(3, np.float32)})
    b.layer("Bias", [b.input("in1", (2,))], name="bias", bias_data_size=2, weights={"bias_data": np.ones(2, np.float32)})
    _, bin_ = b.write(tmp_path, fp16=True)
    raw = bin_.read_bytes()
    assert len(raw) == 4 + 8 + 8  # tag, 3 halves + pad, 2 raw floats


def test_fp16_rounds_to_nearest():
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -10 * 0.75, -1e9, 1e-8], np.float32)
    assert to_fp16(x).tolist() == [1.0, 1 + 2 ** -9, 1 + 2 ** -10, -65504.0, np.float16(1e-8)]


def test_fp16_clamps_infinities_and_keeps_nan():
    x = np.array([np.inf, -np.inf, 65519.0, 65520.0, np.nan, 2.0], np.float32)
    h = to_fp16(x)
    assert h.dtype == np.dtype("<f2")
    assert h[:4].tolist() == [65504.0, -65504.0, 65504.0, 65504.0] and np.isnan(h[4]) and h[5] == 2.0


def test_lazy_weights_and_integer_memorydata(tmp_path):
    calls = []

    def load():
        calls.append(1)
        return np.arange(4, dtype=np.int64)

    b = NetBuilder()
    b.layer("MemoryData", [], name="idx", w=4, weights={"data": Attribute(loader=load, shape=(4,), dtype="i64")})
    _, bin_ = b.write(tmp_path)
    assert calls == [1]
    assert np.frombuffer(bin_.read_bytes(), "<i4").tolist() == [0, 1, 2, 3]  # raw int32, like pnnx


# ---------------------------------------------------------------------------- refusals
def _refused(b: NetBuilder, tmp_path, match: str):
    with pytest.raises(WriteError, match=match) as e:
        b.write(tmp_path)
    assert list(tmp_path.iterdir()) == [], "nothing may be written for a refused graph"
    return e.value


def test_blob_used_twice_needs_split(tmp_path):
    b = NetBuilder()
    x = b.input("in0", (4,))
    b.layer("BinaryOp", [x, x], name="out0", op_type=0)
    e = _refused(b, tmp_path, "Split")
    assert "'in0' is consumed 2 times" in str(e) and e.path.endswith(".ncnn.param")


def test_names_must_be_unique_and_without_whitespace(tmp_path):
    b = NetBuilder()
    x = b.input("in0", (4,))
    b.layer("ReLU", [x], name="my relu")
    _refused(b, tmp_path, "whitespace")
    b = NetBuilder()
    x = b.input("in0", (4,))
    b.g.rename_op(b.g.ops[0], "in0")
    b.g.ops[0].name = "dup"
    b.layer("ReLU", [x], name="r")
    b.g.ops[-1].name = "dup"
    _refused(b, tmp_path, "'dup' is used twice")


def test_params_must_be_known_and_of_the_right_kind(tmp_path):
    b = NetBuilder()
    b.layer("ReLU", [b.input("in0", (4,))], name="r", raw_params={3: 1})
    _refused(b, tmp_path, r"param id 3 is not a ReLU param")
    b = NetBuilder()
    b.layer("Clip", [b.input("in0", (4,))], name="c", raw_params={0: "low"})
    _refused(b, tmp_path, r"Clip.min \(float\): expected a number")


def test_weights_must_match_params(tmp_path):
    b = _conv_net(bias=False)
    b.g.find_op("conv").params[5] = 1  # bias_term without a bias weight
    _refused(b, tmp_path, "loads 2 .*weight_data, bias_data")
    b = _conv_net()
    b.g.find_op("conv").params[6] = 7
    _refused(b, tmp_path, "weight 'weight_data' has 6 values .* load 7")
    b = _conv_net()
    op = b.g.find_op("conv")
    op.attrs = dict(reversed(list(op.attrs.items())))
    _refused(b, tmp_path, "load order")


def test_unknown_layer_types_and_dims(tmp_path):
    b = NetBuilder()
    x = b.input("in0", (4,))
    b.g.add_op("nn.Conv2d", "conv", [x], [b.g.new_operand("y")])
    _refused(b, tmp_path, "unknown ncnn layer type 'nn.Conv2d'.*unconverted")
    b = NetBuilder()
    b.layer("ReLU", [b.input("in0", (4,))], name="r")
    b.g.operands["r"].shape = [2, 3, 4, 5, 6]
    b.g.operands["r"].meta["batch"] = False
    _refused(b, tmp_path, "more than 4 dims")


def test_output_markers_are_not_layers(tmp_path):
    b = NetBuilder()
    y = b.layer("ReLU", [b.input("in0", (4,))], name="out0")
    b.g.add_op("Output", "output", [y], [])
    param, _ = b.write(tmp_path)
    assert param.read_text().splitlines()[1] == "2 2"


# ---------------------------------------------------------------------------- reading back
@pytest.mark.parametrize("fp16", [False, True])
def test_read_back_what_was_written(fp16, tmp_path):
    b = _conv_net()
    b.layer("Softmax", [b.g.operands["conv"]], name="out0", axis=0)
    param, bin_ = b.write(tmp_path, fp16=fp16)
    g = read_ncnn_param(param, bin_)
    assert [(op.type, op.name, op.params) for op in g.ops] == [(op.type, op.name, op.params) for op in b.g.ops]
    w = g.find_op("conv").attrs
    assert list(w) == ["weight_data", "bias_data"]
    assert w["weight_data"].dtype == ("f16" if fp16 else "f32")
    np.testing.assert_allclose(w["weight_data"].data.astype(np.float32), b.g.find_op("conv").attrs["weight_data"].data.ravel(),
                               rtol=1e-3 if fp16 else 0)
    assert check_ncnn(g) == []
    assert "has 0 weights" in check_ncnn(read_ncnn_param(param))[0]  # param file alone: no weights
    write_ncnn(g, tmp_path / "again.param", tmp_path / "again.bin", fp16=fp16)
    assert (tmp_path / "again.bin").read_bytes() == bin_.read_bytes()
    assert (tmp_path / "again.param").read_text() == param.read_text()


@pytest.mark.parametrize("text, where, match", [
    ("7767518\n1 1\nInput in0 0 1 in0\n", ":1", "magic number"),
    ("7767517\n2 1\nInput in0 0 1 in0\n", "", "header says 2 layers"),
    ("7767517\n2 2\nInput in0 0 1 in0\nReLU r 1 1 x y\n", ":4", "input blob 'x' is not produced"),
    ("7767517\n1 1\nInput in0 0 1 in0 0=\n", ":3", "has no value"),
    ("7767517\n1 1\nInput in0 0 1 in0 40=1\n", ":3", "out of range"),
    ("7767517\n1 1\nInput in0 0 1 in0 -23300=3,1,2\n", ":3", "says 3 values but has 2"),
    ("7767517\n1 1\nInput in0 0 1 in0 -23300=2,1,2.0\n", ":3", "mixes int and float"),
    ("7767517\n1 1\nInput in0 2 1 in0\n", ":3", "fewer blobs"),
])
def test_reader_reports_bad_param_files(text, where, match, tmp_path):
    p = tmp_path / "bad.param"
    p.write_text(text)
    with pytest.raises(ModelFileError, match=match) as e:
        read_ncnn_param(p)
    assert e.value.where == f"{p}{where}"


def test_reader_parses_ncnn_value_forms(tmp_path):
    p = tmp_path / "forms.param"
    p.write_text('7767517\n1 1\nInput in0 0 1 in0 0=3 1=2.5 2=1e-3 3=1,2,3 4=0.5,1 5=abc 6="x y,z" -23307=2,7,8\n')
    (op,) = read_ncnn_param(p).ops
    assert op.params == {0: 3, 1: 2.5, 2: float(np.float32(1e-3)), 3: [1, 2, 3], 4: [0.5, 1.0], 5: "abc",
                         6: "x y,z", 7: [7, 8]}


def test_reader_reports_short_bin(tmp_path):
    param, bin_ = _conv_net().write(tmp_path)
    bin_.write_bytes(bin_.read_bytes()[:-4])
    with pytest.raises(ModelFileError, match="bias_data needs 8 bytes at offset 28, the file ends at 32"):
        read_ncnn_param(param, bin_)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
def test_read_pnnx_cli_output_and_write_it_again_byte_for_byte(tmp_path):
    """The pnnx CLI converts a traced module; reading its ncnn model and writing it again gives
    the same .bin bytes (fp16, pnnx's padding) and a param file ncnn reads the same way."""
    torch = pytest.importorskip("torch")
    pnnx = pnnx_cli()
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(5 * 6 * 6, 7), torch.nn.LayerNorm(7)).eval()
    torch.jit.trace(m, torch.rand(1, 3, 6, 6)).save(str(tmp_path / "m.pt"))
    r = subprocess.run([pnnx, "m.pt", "inputshape=[1,3,6,6]"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    g = read_ncnn_param(tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin")
    write_ncnn(g, tmp_path / "r.param", tmp_path / "r.bin", fp16=True)
    assert (tmp_path / "r.bin").read_bytes() == (tmp_path / "m.ncnn.bin").read_bytes()
    again = read_ncnn_param(tmp_path / "r.param")
    assert [(op.type, op.name, op.params) for op in again.ops] == [(op.type, op.name, op.params) for op in g.ops]


def test_custom_layer_placeholders_are_written_without_params(tmp_path):
    """--partial output: an unconverted op marked ``custom_layer`` is written as a bare layer
    line for a user-registered ncnn layer (no table check, no weights)."""
    b = NetBuilder()
    x = b.input("in0", (4,))
    b.g.add_op("aten_grid_sampler_2d", "gs", [x], [b.g.new_operand("out0")], params={"x": 1},
               attrs={"w": Attribute(np.ones(2, np.float32))}).meta["custom_layer"] = True
    param, bin_ = b.write(tmp_path)
    assert param.read_text().splitlines()[-1].split() == ["aten_grid_sampler_2d", "gs", "1", "1", "in0", "out0"]
    assert bin_.read_bytes() == b""


@pytest.mark.parametrize("value,why", [(1.5, "got 1.5"), ([2, 2], r"got \[2, 2\]"), (None, "got None")])
def test_a_non_integer_for_an_int_param_is_refused_naming_the_layer(tmp_path, value, why):
    """An int param (Pooling's kernel_w, id 1) holding a float, a list or None — what a crafted
    file's arguments could carry through a converter — is a WriteError naming the layer and the
    param, never a truncated value or a raw TypeError; nothing is written."""
    from engine.errors import WriteError
    from tests.engine.writers.ncnn_graphs import NetBuilder

    b = NetBuilder()
    x = b.input("in0", (3, 8, 8))
    b.layer("Pooling", [x], name="pool", raw_params={0: 0, 1: value})
    with pytest.raises(WriteError, match=f"layer 'pool' \\(Pooling\\): Pooling.kernel_w \\(int\\): expected an int, {why}"):
        b.write(tmp_path)
    assert list(tmp_path.iterdir()) == []
