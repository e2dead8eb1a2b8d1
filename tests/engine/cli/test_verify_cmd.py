"""``pt2ncnn verify``: JSON and text reports, exit codes 0/1/2, user files, missing torch."""
from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from engine.cli.main import main  # noqa: E402
from tests.gc_watch import collections_during  # noqa: E402
from tests.engine.verify.models import BROKEN_RELU, RELU_AS_SIGMOID, deep_cnn, export, write_plugin  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> Path:
    torch.manual_seed(1)
    return export(deep_cnn(), [torch.randn(1, 3, 16, 16)], tmp_path_factory.mktemp("cli") / "cnn.pt2")


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_json_for_a_correct_model_exits_0(cnn, capsys):
    assert main(["verify", str(cnn), "--fp16", "0", "--json"]) == 0
    d = _json(capsys)
    assert d["ok"] is True and d["first_divergent"] is None and d["fp16"] is False
    assert len(d["outputs"]) == 1 and {"name", "max_abs", "max_rel"} <= set(d["outputs"][0])
    assert d["outputs"][0]["name"] == "linear_2" and d["outputs"][0]["max_rel"] < 1e-5
    layers = d["layers"]
    assert len(layers) >= 20 and [x["index"] for x in layers] == list(range(len(layers)))
    for x in layers:
        assert {"layer", "type", "aten_nodes", "max_abs", "max_rel", "cosine"} <= set(x)
        assert x["status"] == "ok" and x["max_rel"] < 1e-4
    # the layers are the ncnn model's, in its order
    assert layers[0]["type"] == "Input" and layers[-1]["layer"] == "linear_2"


def test_broken_plugin_json_names_the_layer_and_exits_1(cnn, tmp_path, capsys):
    plugin = write_plugin(tmp_path / "p.py", RELU_AS_SIGMOID)
    assert main(["verify", str(cnn), "--fp16", "0", "--converters", str(plugin), "--json"]) == 1
    d = _json(capsys)
    fd = d["first_divergent"]
    assert BROKEN_RELU in fd["aten_nodes"] and fd["status"] == "divergent"
    assert fd["module"] == "block2.conv1" and re.search(r"models\.py:\d+$", fd["source"])
    assert [x["layer"] for x in d["layers"] if x["status"] in ("divergent", "failed")] == [fd["layer"]]
    assert d["outputs"][0]["max_rel"] > 1e-3


def test_text_report_names_first_divergent_layer(cnn, tmp_path, capsys):
    plugin = write_plugin(tmp_path / "p.py", RELU_AS_SIGMOID)
    assert main(["verify", str(cnn), "--fp16", "0", "--converters", str(plugin)]) == 1
    out, err = capsys.readouterr()
    assert re.search(r"^first divergent layer: \S+ \(Convolution\), divergent$", out, re.M)
    assert f"ATen nodes: conv2d_3, batch_norm_3, {BROKEN_RELU}" in out
    assert "module: block2.conv1" in out and "BEYOND TOLERANCE" in out
    assert "layers beyond tolerance:" in out and "inherited" in out
    layer = re.search(r"^first divergent layer: (\S+) \(Convolution\)", out, re.M).group(1)
    assert err.strip().splitlines() == [f"error: {cnn}: ncnn output differs from PyTorch beyond tolerance; "
                                        f"first divergent layer {layer} (Convolution)"]


def test_edited_ncnn_files_and_npy_input(cnn, tmp_path, capsys):
    assert main(["convert", str(cnn), "--fp16", "0", "-o", str(tmp_path), "-q", "--no-pnnx"]) == 0
    param, bin_ = tmp_path / "cnn.ncnn.param", tmp_path / "cnn.ncnn.bin"
    edited = tmp_path / "edited.param"
    edited.write_text(re.sub(r"^ReLU(\s+)relu_2\b", r"Sigmoid\1relu_2", param.read_text(), count=1, flags=re.M))
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32))
    assert main(["verify", str(cnn), "--ncnn-param", str(param), "--ncnn-bin", str(bin_), "--input", str(x),
                 "--json"]) == 0
    assert _json(capsys)["inputs"] == "user"
    assert main(["verify", str(cnn), "--ncnn-param", str(edited), "--ncnn-bin", str(bin_), "--json"]) == 1
    d = _json(capsys)
    assert d["first_divergent"]["layer"] == "relu_2" and d["first_divergent"]["type"] == "Sigmoid"


def test_tolerance_options(cnn, capsys):
    # fp16 weights are within the default fp16 tolerance, not within a tight one
    assert main(["verify", str(cnn), "--json"]) == 0
    d = _json(capsys)
    assert d["fp16"] is True and d["rtol"] == 1e-2
    assert main(["verify", str(cnn), "--rtol", "1e-6", "--atol", "0", "--json"]) == 1
    assert _json(capsys)["first_divergent"]["type"] == "Convolution"


@pytest.mark.parametrize("args,message", [
    (["--ncnn-param", "x.param"], "error: --ncnn-param and --ncnn-bin go together"),
    (["--rtol", "-1"], "error: --rtol must be a finite number >= 0"),
    (["--fp16", "2"], "error: argument --fp16: invalid choice"),
])
def test_usage_errors_exit_2(cnn, capsys, args, message):
    assert main(["verify", str(cnn), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message)


def test_bad_inputs_exit_2_with_one_line(cnn, tmp_path, capsys):
    np.save(tmp_path / "small.npy", np.zeros((1, 3, 8, 8), np.float32))
    assert main(["verify", str(cnn), "--input", str(tmp_path / "small.npy")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {cnn}: {tmp_path / 'small.npy'} (input x): dim 2 is 8, the model input needs 16 "
                   f"(shape [1, 3, 16, 16])"]
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    assert main(["verify", str(cnn), "--input", str(tmp_path / "junk.npy")]) == 2
    assert "cannot read as .npy" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "missing.pt2")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'missing.pt2'}: no such file"
    (tmp_path / "bad.param").write_text("7767517\n1 1\nReLU r 1 1 nowhere out\n")
    assert main(["verify", str(cnn), "--ncnn-param", str(tmp_path / "bad.param"), "--ncnn-bin",
                 str(tmp_path / "small.npy")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.param:3" in err[0] and "not produced by an earlier layer" in err[0]


def test_without_torch_exit_2_with_a_clear_message(cnn):
    code = (f"import sys; sys.modules['torch'] = None; from engine.cli.main import main; "
            f"sys.exit(main(['verify', {str(cnn)!r}]))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        f"error: {cnn}: verify needs torch, which is not installed (install ncnn and the CPU build of torch: "
        f"pip install ncnn torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu)"]


def test_text_report_of_a_correct_model_with_all_layers(cnn, capsys):
    assert main(["verify", str(cnn), "--fp16", "0", "--all"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "no divergent layer: every compared layer is within tolerance" in out
    assert "fp32 weights" in out and "the package's sample inputs" in out
    table = out.split("\nlayers:\n", 1)[1]
    assert all(re.search(rf"^  {re.escape(name)}\s+\S+\s+ok\s", table, re.M)
               for name in ("in0", "conv2d", "max_pool2d", "cat", "linear_2"))


@pytest.mark.parametrize("command", ["verify", "convert", "coverage"])
def test_commands_run_without_collections_and_give_the_collector_back(command, cnn, tmp_path, capsys):
    """``verify``, ``convert`` and ``coverage`` run with the cyclic collector off (full walks over a big
    model's objects only cost time: 4 of them were 13–29% of verify on 10k-node graphs); a
    caller that goes on (not the console script) gets its setting back, and with it one young
    collection of what the command left."""
    argv = {"verify": ["verify", str(cnn), "--fp16", "0", "--json"],
            "convert": ["convert", str(cnn), "-o", str(tmp_path), "-q"],
            "coverage": ["coverage", str(cnn), "--json"]}[command]
    module = f"{command}_cmd.py"

    def in_command(f):  # the command's own work (not the parsing before it)
        return f.f_code.co_name == "run" and f.f_code.co_filename.endswith(module)

    was = gc.isenabled()
    gc.enable()
    gc.collect()
    try:
        with collections_during(in_command) as seen:
            assert main(argv) == 0
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    capsys.readouterr()
    assert 2 not in seen and len(seen) <= 1, seen  # at most the young collection when the collector comes back
    if command == "convert":  # what it wrote loads in ncnn and matches PyTorch (fp16/bf16 runtime options off)
        assert main(["verify", str(cnn), "--ncnn-param", str(tmp_path / "cnn.ncnn.param"),
                     "--ncnn-bin", str(tmp_path / "cnn.ncnn.bin"), "--json"]) == 0
        assert _json(capsys)["outputs_ok"] is True
