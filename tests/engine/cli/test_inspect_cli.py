"""Tests of ``pt2ncnn inspect`` and the CLI dispatcher (engine.cli.main)."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from engine.cli import main as cli
from tests.engine.reader.unit_models import edit_json, feat_pt2, io_pt2, tiny_pt2

ROOT = Path(__file__).resolve().parents[3]


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_inspect_text(capsys):
    path, ep = io_pt2()
    code, out, err = run(capsys, "inspect", str(path))
    assert code == 0 and err == ""
    for needle in ("layout          pt2 (archive version 0)", "schema version  8.20", "dialect         ATEN",
                   f"torch version   {ep.__class__ and __import__('torch').__version__}", "inputs",
                   "pair_a", "float32", "k", "= 3", "outputs", "symbols", "in [2, 64]  (example 4)",
                   "parameters", "operators", "aten.addmm.default", "modules"):
        assert needle in out, needle
    shape = next(line for line in out.splitlines() if line.strip().startswith("pair_a"))
    assert shape.rstrip().endswith(", 3]") and "[s" in shape


def test_inspect_json_matches_torch(capsys):
    path, ep = feat_pt2()
    code, out, err = run(capsys, "inspect", str(path), "--json")
    assert code == 0 and err == ""
    info = json.loads(out)
    assert info["torch_version"] == __import__("torch").__version__
    assert (info["schema_version"], info["dialect"], info["layout"]) == ("8.20", "TRAINING", "pt2")
    calls = [n for n in ep.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)]
    assert info["num_nodes"] == len(calls)
    assert sum(info["ops"].values()) == len(calls) and info["ops"]["aten.add.Tensor"] >= 5
    assert all(not op.startswith("torch.ops.") for op in info["ops"])
    params = [s.target for s in ep.graph_signature.input_specs if s.kind.name == "PARAMETER"]
    assert info["parameters"]["count"] == len(params)  # lin2.weight is tied to lin1.weight: one input each
    sd = ep.state_dict
    nbytes = {k: v.numel() * v.element_size() for k, v in sd.items()}
    assert info["parameters"]["bytes"] == sum(nbytes[k] for k in sd if isinstance(sd[k], __import__("torch").nn.Parameter))
    assert info["constants"] == {"count": 1, "bytes": 16}
    assert info["inputs"] == [{"name": "x", "kind": "user_input", "dtype": "float32", "shape": [2, 3, 8, 8]},
                              {"name": "idx", "kind": "user_input", "dtype": "int64", "shape": [2]}]
    assert [o["name"] for o in info["outputs"]] == [s.arg.name for s in ep.graph_signature.output_specs]
    assert info["modules"]["root"]["total_nodes"] == info["num_nodes"]
    assert {c["path"] for c in info["modules"]["root"]["children"]} >= {"conv", "bn", "lin1"}


def test_inspect_json_symbolic_dims_are_strings(capsys):
    path, _ = io_pt2()
    info = json.loads(run(capsys, "inspect", str(path), "--json")[1])
    dim = info["inputs"][0]["shape"][0]
    assert isinstance(dim, str) and dim in info["symbols"]
    assert info["inputs"][-1] == {"name": "k", "kind": "constant_input", "dtype": "int", "shape": None, "value": 3}


@pytest.mark.parametrize("argv, needle", [
    (["inspect", "missing.pt2"], "error: missing.pt2: no such file"),
    (["inspect"], "error: the following arguments are required"),
    (["inspect", "x.pt2", "--bogus"], "error: unrecognized arguments: --bogus"),
    (["frobnicate"], "error: argument COMMAND: invalid choice"),
    (["model.pt2", "inputshape=[1,3,224,224]"], "error: 'convert' is not available"),
])
def test_usage_and_input_errors_exit_2_with_one_line(capsys, monkeypatch, argv, needle):
    monkeypatch.setattr(cli, "COMMANDS", ["engine.cli.inspect_cmd"])
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(needle), err


def test_bad_package_names_the_file_and_the_member(capsys, tmp_path):
    path, _ = tiny_pt2()

    def fn(doc):
        doc["graph_module"]["graph"]["nodes"][1]["target"] = 17
    bad = edit_json(path, tmp_path / "bad.pt2", fn)
    code, out, err = run(capsys, "inspect", str(bad))
    assert code == 2
    assert err.startswith(f"error: {bad}: ") and "models/model.json: graph.nodes[1].target: " in err
    assert "expected a string, got a number" in err and len(err.splitlines()) == 1


def test_no_traceback_unless_debug(tmp_path):
    bad = tmp_path / "junk.pt2"
    bad.write_bytes(b"not a zip at all, sorry")
    cmd = [sys.executable, "-m", "engine.cli.main", "inspect", str(bad)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == f"error: {bad}: not a zip archive\n" and r.stdout == ""
    r = subprocess.run(cmd + ["--debug"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Traceback" in r.stderr and "PT2FormatError" in r.stderr


def test_shorthand_routes_to_convert_when_registered(capsys, monkeypatch):
    seen = {}
    mod = types.ModuleType("fake_convert_cmd")
    mod.NAME, mod.HELP = "convert", "fake"
    mod.add_arguments = lambda p: (p.add_argument("model"), p.add_argument("options", nargs="*"))
    mod.run = lambda args: seen.update(model=args.model, options=args.options) or 0
    monkeypatch.setitem(sys.modules, "fake_convert_cmd", mod)
    monkeypatch.setattr(cli, "COMMANDS", ["engine.cli.inspect_cmd", "fake_convert_cmd"])
    code, out, err = run(capsys, "m.pt2", "inputshape=[1,3,8,8]", "fp16=1")
    assert code == 0 and seen == {"model": "m.pt2", "options": ["inputshape=[1,3,8,8]", "fp16=1"]}


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    assert "inspect" in capsys.readouterr().out


def test_a_run_builds_the_arguments_of_its_command_alone(capsys, monkeypatch):
    built = []

    def fake(name):
        mod = types.ModuleType(f"fake_{name}_cmd")
        mod.NAME, mod.HELP = name, f"the {name} command"
        mod.add_arguments = lambda p: built.append(name) or p.add_argument("model")
        mod.run = lambda args: 0
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
        return mod.__name__

    monkeypatch.setattr(cli, "COMMANDS", [fake("inspect"), fake("convert")])
    for argv in (["--debug", "convert", "m.pt2"], ["m.pt2"]):  # also the shorthand
        built.clear()
        assert run(capsys, *argv)[0] == 0 and built == ["convert"]
    built.clear()
    code, out, err = run(capsys, "inspect")  # its own arguments' error
    assert code == 2 and err.startswith("error: the following arguments are required: model") and built == ["inspect"]
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "the inspect command" in out and "the convert command" in out
