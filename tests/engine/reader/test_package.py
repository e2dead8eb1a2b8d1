"""Unit tests of engine.reader.layout and engine.reader.package: layouts, refusals, the API."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import engine
from engine.reader.archive import MemberInfo
from tests.engine.reader.unit_models import (edit_json, feat_pt2, members, model_member, rewrite, tiny_pt2,
                                             write_zip)

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[3]


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _same_tensors(m, ep):
    expected = {**ep.state_dict, **ep.constants}
    assert {e.fqn for e in m.tensors.entries()} == set(expected)
    for fqn, t in expected.items():
        want = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        assert np.ascontiguousarray(m.tensor(fqn)).tobytes() == want, fqn


def test_current_layout_package_api():
    path, ep = tiny_pt2()
    with engine.load(path) as pkg:
        assert (pkg.layout, pkg.archive_version, pkg.byteorder) == ("pt2", "0", "little")
        assert pkg.path == str(path) and pkg.model_names == ["model"] and pkg.model is pkg.models["model"]
        assert dict(pkg.extra_files) == {"notes.txt": b"hello"}
        assert all(isinstance(m, MemberInfo) for m in pkg.members)
        assert {m.name.split("/", 1)[1] for m in pkg.members} >= {"archive_format", "models/model.json"}
        m = pkg.model
        assert (m.name, m.layout, str(m.schema_version), m.dialect) == ("model", "pt2", "8.20", "TRAINING")
        assert m.torch_version == torch.__version__
        assert [n.op for n in m.nodes] == ["aten.linear.default", "aten.relu.default"]
        assert m.op_histogram() == {"aten.linear.default": 1, "aten.relu.default": 1}
        assert m.value_meta("relu").sizes == (1, 2) and m.node("relu").op == "aten.relu.default"
        _same_tensors(m, ep)
        assert "ExportedProgram 'model'" in repr(m)


def test_buffer_saved_archive_root_and_dotted_names(tmp_path):
    _, ep = tiny_pt2()
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    p = tmp_path / "from_buffer.pt2"
    p.write_bytes(buf.getvalue())
    with engine.load(p) as pkg:
        assert pkg.members[0].name.startswith("archive/")
        _same_tensors(pkg.model, ep)
    p = tmp_path / "weird.name.v2.pt2"
    torch.export.save(ep, str(p))
    with engine.load(p) as pkg:
        assert pkg.members[0].name.startswith("weird.name.v2/")


def test_several_models(tmp_path):
    from torch.export.pt2_archive._package import package_pt2

    _, ep1 = tiny_pt2()
    _, ep2 = feat_pt2()
    p = tmp_path / "multi.pt2"
    package_pt2(str(p), exported_programs={"head": ep1, "model": ep2})
    with engine.load(p) as pkg:
        assert pkg.model_names == ["head", "model"] and pkg.model.name == "model"
        _same_tensors(pkg.models["head"], ep1)
        _same_tensors(pkg.models["model"], ep2)
    p2 = tmp_path / "nomain.pt2"
    package_pt2(str(p2), exported_programs={"b": ep1, "a": ep1})
    with engine.load(p2) as pkg:
        assert pkg.model.name == "a"


def _as_2_8(src: Path, dst: Path, ep) -> Path:
    """The torch 2.8 variant: torch.save dicts instead of payload configs."""
    root = model_member(src).split("/")[0]
    contents = {k: v for k, v in members(src).items() if "/data/weights/" not in k and "/data/constants/" not in k}
    contents[f"{root}/data/weights/model.pt"] = _saved(dict(ep.state_dict))
    contents[f"{root}/data/constants/model.pt"] = _saved(dict(ep.constants))
    return write_zip(dst, contents)


def test_torch_2_8_layout(tmp_path):
    path, ep = feat_pt2()
    p = _as_2_8(path, tmp_path / "l28.pt2", ep)
    with engine.load(p) as pkg:
        assert pkg.layout == "pt2-2.8"
        m = pkg.model
        _same_tensors(m, ep)
        assert np.shares_memory(m.tensor("lin1.weight"), m.tensor("lin2.weight"))
        assert np.shares_memory(m.tensor("full"), m.tensor("part"))
        assert ":" in m.tensors.get("full").member
        assert next(b for b in m.signature.buffers if b.target == "scratch").payload.kind == "buffer"


def test_legacy_flat_zip(tmp_path):
    from torch._export.serde.serialize import serialize

    path, ep = feat_pt2()
    art = serialize(ep)
    p = write_zip(tmp_path / "legacy.pt2", {
        "serialized_exported_program.json": art.exported_program, "serialized_state_dict.pt": art.state_dict,
        "serialized_constants.pt": art.constants, "serialized_example_inputs.pt": art.example_inputs,
        "extra_files/readme": b"hi", "version": b"8.20"})
    with engine.load(p) as pkg:
        assert (pkg.layout, pkg.archive_version) == ("legacy", "8.20")
        assert dict(pkg.extra_files) == {"readme": b"hi"}
        _same_tensors(pkg.model, ep)
        args, kwargs = pkg.model.sample_inputs()
        assert [a.shape for a in args] == [(2, 3, 8, 8), (2,)]


@pytest.mark.parametrize("make, needle", [
    ("torchscript", "TorchScript archive, not an ExportedProgram; use pnnx or re-export with torch.export"),
    ("checkpoint", "torch.save checkpoint"),
    ("aoti", "only AOTInductor"),
    ("no_models", "no models/*.json"),
    ("outside", "outside the archive root"),
    ("bad_format", "archive format is 'pt3'"),
    ("version", "archive version '7' is not supported"),
    ("byteorder", "unknown byte order"),
    ("no_weights_config", "missing member"),
    ("empty", "empty zip archive"),
    ("flat_junk", "not an ExportedProgram package"),
])
def test_what_is_not_a_readable_package_says_so(tmp_path, make, needle):
    path, _ = tiny_pt2()
    root = model_member(path).split("/")[0]
    out = tmp_path / "x.pt2"
    if make == "torchscript":
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(out))
    elif make == "checkpoint":
        torch.save(torch.nn.Linear(2, 2).state_dict(), str(out))
    elif make == "aoti":
        write_zip(out, {"m/archive_format": b"pt2", "m/archive_version": b"0",
                        "m/data/aotinductor/model/model.so": b"\x7fELF"})
    elif make == "no_models":
        rewrite(path, out, {f"{root}/models/model.json": None})
    elif make == "outside":
        rewrite(path, out, {"elsewhere/file": b"x"})
    elif make == "bad_format":
        rewrite(path, out, {f"{root}/archive_format": b"pt3"})
    elif make == "version":
        rewrite(path, out, {f"{root}/archive_version": b"7"})
    elif make == "byteorder":
        rewrite(path, out, {f"{root}/byteorder": b"middle"})
    elif make == "no_weights_config":
        rewrite(path, out, {f"{root}/data/weights/model_weights_config.json": None})
    elif make == "empty":
        write_zip(out, {})
    elif make == "flat_junk":
        write_zip(out, {"readme.txt": b"hello"})
    with pytest.raises(engine.PT2FormatError) as e:
        engine.load(out)
    assert needle in str(e.value)


def _config_edit(path, tmp_path, suffix, fn):
    return edit_json(path, tmp_path / "edited.pt2", fn, suffix)


def test_pickled_payloads_are_present_but_unreadable(tmp_path):
    path, ep = tiny_pt2()
    root = model_member(path).split("/")[0]

    def weights(doc):
        doc["config"]["0.bias"]["use_pickle"] = True
    p = _config_edit(path, tmp_path, "model_weights_config.json", weights)
    contents = members(p)
    contents[f"{root}/data/constants/custom_obj_0"] = b"\x80\x02cos\nsystem\n."
    cfg = json.loads(contents[f"{root}/data/constants/model_constants_config.json"])
    cfg["config"]["obj"] = {"path_name": "custom_obj_0", "is_param": False, "use_pickle": True, "tensor_meta": None}
    contents[f"{root}/data/constants/model_constants_config.json"] = json.dumps(cfg).encode()
    p = write_zip(tmp_path / "objs.pt2", contents)
    with engine.load(p) as pkg:
        m = pkg.model
        bias = m.tensors.get("0.bias")
        assert not bias.readable and "tensor-subclass" in bias.reason and bias.meta.sizes == (2,)
        with pytest.raises(engine.PT2FormatError, match="present but unreadable"):
            m.tensor("0.bias")
        assert m.tensor("0.weight").shape == (2, 4)
        (obj,) = m.tensors.objects()
        assert obj.kind == "custom_obj" and "TorchScript object" in obj.reason
        assert m.signature.parameters[1].payload is bias


def test_missing_payload_for_a_parameter(tmp_path):
    path, _ = tiny_pt2()

    def drop(doc):
        del doc["config"]["0.bias"]
    p = _config_edit(path, tmp_path, "model_weights_config.json", drop)
    with pytest.raises(engine.PT2FormatError, match="parameter '0.bias' .* has no stored payload"):
        engine.load(p)


def test_unexpected_errors_are_wrapped_at_the_api_boundary(tmp_path, monkeypatch):
    import engine.reader.package as package

    path, _ = tiny_pt2()

    def boom(*a, **k):
        raise KeyError("surprise")
    monkeypatch.setattr(package, "classify", boom)
    with pytest.raises(engine.PT2FormatError, match="internal reader error .KeyError") as e:
        engine.load(path)
    assert e.value.member == str(path) and isinstance(e.value.__cause__, KeyError)


def test_the_reader_never_imports_torch():
    """Open, read every tensor, sample inputs, module tree, summary and the CLI in a fresh
    interpreter where importing torch is impossible."""
    path, _ = feat_pt2()
    code = textwrap.dedent(f"""
        import sys
        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked in this test")
        sys.meta_path.insert(0, NoTorch())
        import engine
        from engine.reader.summary import summarize
        from engine.cli.main import main
        with engine.load({str(path)!r}) as pkg:
            ep = pkg.model
            for e in ep.tensors.entries():
                ep.tensor(e.fqn)
            ep.sample_inputs(); ep.module_tree(); summarize(pkg)
        assert main(["inspect", {str(path)!r}, "--json"]) == 0
        assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))
        print("OK")
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stderr


def test_closed_package_and_empty_path():
    path, _ = tiny_pt2()
    pkg = engine.load(path)
    arr = pkg.model.tensor("0.weight")
    pkg.close()
    assert arr.shape == (2, 4) and float(abs(arr).sum()) > 0  # arrays handed out stay valid
    with pytest.raises(engine.PT2FormatError, match="the package is closed"):
        pkg.model.tensor("0.bias")
    with pytest.raises(engine.PT2FormatError, match="closed"):
        pkg.model.sample_inputs()
    with pytest.raises(engine.PT2FormatError, match="no file name"):
        engine.load("")
