"""``pt2ncnn scaffold``: a plug-in written for an operator pt2ncnn cannot convert loads as
written, and — filled in as an editor would, or unedited for the ``decompose`` template —
converts the real model, runs in the real ncnn runtime and matches PyTorch."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from engine.build import build_graph, schemas  # noqa: E402
from engine.cli.main import main  # noqa: E402
from engine.convert import ATEN, ConvertOptions, convert  # noqa: E402
from engine.convert.plugins import load_plugin, plugin_scope  # noqa: E402
from engine.convert.scaffold import TEMPLATES, find_node, scaffold  # noqa: E402
from engine.errors import ScaffoldError  # noqa: E402
from engine.reader.package import load  # noqa: E402
from engine.verify import VerifyOptions, verify  # noqa: E402
from tests.harness import DIALECTS, Fn, check_module, export_pt2  # noqa: E402


def node_of(pt2, op_name):
    return find_node(build_graph(load(pt2).model), op_name)


def write(folder, text, name="rule.py"):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


#: ops with no built-in rule that PyTorch's core table decomposes into ops pt2ncnn converts
DECOMPOSED = {
    "aten.logit.default": (lambda x: torch.logit(torch.sigmoid(x), eps=1e-6), 1),
    "aten.lerp.Scalar": (lambda x, y: torch.lerp(x, y, 0.3), 2),
    "aten.sinc.default": (lambda x: torch.sinc(x), 1),
}


@pytest.mark.parametrize("op_name", sorted(DECOMPOSED))
def test_decompose_template_converts_unedited(tmp_path, op_name):
    fn, n_in = DECOMPOSED[op_name]
    torch.manual_seed(0)
    inputs = [torch.randn(1, 3, 8) for _ in range(n_in)]
    pt2 = export_pt2(Fn(fn), inputs, tmp_path / "m.pt2")
    before = convert(str(pt2))
    assert [d.op for d in before.errors] == [op_name]  # the gap the plug-in closes
    text = scaffold(op_name, node=node_of(pt2, op_name), template="decompose")
    assert "ctx.aten(" in text and "write me" not in text
    checked = check_module(Fn(fn), inputs, tmp_path, converters=[write(tmp_path / "rules", text)])
    assert checked.result.ok
    # the ATen ops it emitted were lowered by the built-in rules, named after the node
    assert not any(op.type.startswith("aten.") for op in checked.result.ncnn.ops)


def test_decompose_refuses_clearly_or_says_what_is_left(tmp_path):
    pt2 = export_pt2(Fn(lambda x: torch.hypot(x, x.tanh()) + torch.special.erfinv(x.tanh())), [torch.randn(1, 4)],
                     tmp_path / "m.pt2")
    node = node_of(pt2, "aten.hypot.default")
    with pytest.raises(ScaffoldError, match="no entry for it"):
        scaffold("aten.hypot.default", node=node, template="decompose")
    with pytest.raises(ScaffoldError, match="needs a node"):
        scaffold("aten.logit.default", template="decompose")
    with pytest.raises(ScaffoldError, match="the node is aten.hypot.default, not aten.logit.default"):
        scaffold("aten.logit.default", node=node, template="decompose")
    # special_erfinv decomposes into erfinv, which nothing converts: the file says so
    text = scaffold("aten.special_erfinv.default", node=node_of(pt2, "aten.special_erfinv.default"),
                    template="decompose")
    assert "# NOTE: no rule converts aten.erfinv.default yet" in text


def test_decompose_validator_pins_the_traced_arguments(tmp_path):
    """A decomposition traced for eps=1e-6 refuses a node with another eps instead of
    computing it wrong."""
    pt2 = export_pt2(Fn(lambda x: torch.logit(x.sigmoid(), eps=1e-6) + torch.logit(x.sigmoid(), eps=0.1)),
                     [torch.randn(1, 3, 8)], tmp_path / "m.pt2")
    g = build_graph(load(pt2).model)
    first = [op for op in g.ops if op.type == "aten.logit.default"][0]
    rules = write(tmp_path / "rules", scaffold("aten.logit.default", node=first, template="decompose"))
    result = convert(str(pt2), ConvertOptions(converters=[rules]))
    [d] = result.errors
    assert d.node != first.name and "the decomposition was traced for eps=1e-06" in d.reason
    assert d.plugin.startswith(str(rules / "rule.py") + ":")


def hypot_model(x):
    return torch.hypot(x, 2 * x + 1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_pnnx_template_filled_in_by_an_editor(tmp_path, dialect):
    x = torch.randn(1, 3, 8)
    pt2 = export_pt2(Fn(hypot_model), [x], tmp_path / "m.pt2", dialect=dialect)
    text = scaffold("aten.hypot.default", node=node_of(pt2, "aten.hypot.default"), template="pnnx")
    rules = write(tmp_path / "rules", text)
    # as written it refuses the node, saying where to write the body
    [d] = convert(str(pt2), ConvertOptions(converters=[rules])).errors
    assert d.reason.startswith("unsupported: write me: the rule hypot_default in ") and str(rules) in d.reason
    assert d.plugin.startswith(str(rules / "rule.py") + ":")
    # the editor: replace the placeholder line by a body
    placeholder = next(ln for ln in text.splitlines() if "write me" in ln)
    body = '    return ctx.emit("pnnx.Expression", [x, other], params={"expr": "sqrt(add(mul(@0,@0),mul(@1,@1)))"})'
    write(tmp_path / "rules", text.replace(placeholder, body))
    check_module(Fn(hypot_model), [x], tmp_path, dialect=dialect, converters=[rules])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_ncnn_custom_template_converts_and_verifies(tmp_path, dialect):
    """The custom layer's reference stands in for it in the real ncnn runtime (verify)."""
    model = Fn(lambda x: torch.special.erfinv(torch.tanh(x) * 0.9))
    pt2 = export_pt2(model, [torch.randn(1, 3, 8)], tmp_path / "m.pt2", dialect=dialect)
    # the core dialect spells it aten.erfinv
    op_name, layer_type = {"training": ("aten.special_erfinv.default", "SpecialErfinv"),
                           "core": ("aten.erfinv.default", "Erfinv")}[dialect]
    node = node_of(pt2, op_name)
    rules = write(tmp_path / "rules", scaffold(op_name, node=node, template="ncnn_custom"))
    result = convert(str(pt2), ConvertOptions(fp16=False, converters=[rules]))
    assert result.ok, result.errors
    assert [op.type for op in result.ncnn.ops if op.type == layer_type] == [layer_type]
    report = verify(pt2, VerifyOptions(fp16=False, converters=[rules]))
    layer = report.layer(node.name)
    assert report.ok and layer.type == layer_type and layer.own.max_rel < 1e-5


def test_ncnn_custom_template_passes_scalar_arguments_as_params(tmp_path):
    model = Fn(lambda x: torch.logit(torch.sigmoid(x), eps=0.01))
    pt2 = export_pt2(model, [torch.randn(1, 3, 8)], tmp_path / "m.pt2")
    rules = write(tmp_path / "rules", scaffold("aten.logit.default", node=node_of(pt2, "aten.logit.default"),
                                               template="ncnn_custom"))
    result = convert(str(pt2), ConvertOptions(fp16=False, converters=[rules]))
    [layer] = [op for op in result.ncnn.ops if op.type == "Logit"]
    assert layer.params == {0: 0.01}
    report = verify(pt2, VerifyOptions(fp16=False, converters=[rules]))
    assert report.ok and report.layer("logit").own.max_rel < 1e-5  # eps clamps: a wrong param would show


#: overloads of every argument shape: lists of tensors, optional tensors, kwarg-only, enums
SHAPES = ["aten.cat.default", "aten.conv2d.default", "aten.native_layer_norm.default", "aten.to.dtype",
          "aten.clamp.Tensor", "aten.index.Tensor", "aten.max.dim", "aten.arange.start_step"]


@pytest.mark.parametrize("template", ["pnnx", "ncnn_custom"])
def test_every_kind_of_schema_gives_a_loadable_plugin_for_exactly_that_overload(tmp_path, template):
    """Schema only (no node): the file loads as written and registers one rule, for that
    overload — over the argument kinds above and every 40th overload of the table."""
    keys = schemas.keys()
    for key in SHAPES + keys[::40]:
        if not key.startswith("aten."):
            continue
        path = tmp_path / f"{key}.py"
        path.write_text(scaffold(key, template=template))
        with plugin_scope([]):
            rules = load_plugin(path)
            assert [r.target for r in rules if r.target.startswith("aten.")] == [key], key
            assert ATEN.candidates(key)[0].plugin_file == str(path)


def test_unknown_overload_or_template(tmp_path):
    with pytest.raises(ScaffoldError, match=r"not an ATen overload .* \(its overloads: aten.logit.default"):
        scaffold("aten.logit")
    with pytest.raises(ScaffoldError, match="unknown template"):
        scaffold("aten.logit.default", template="onnx")
    assert set(TEMPLATES) == {"pnnx", "ncnn_custom", "decompose"}


# ----------------------------------------------------------------------------- the CLI
def test_cli_scaffold_then_convert_a_folder(tmp_path, capsys):
    x = torch.randn(1, 3, 8)
    pt2 = export_pt2(Fn(lambda x: torch.logit(x.sigmoid(), eps=1e-6) * torch.frac(3 * x)), [x], tmp_path / "m.pt2")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "README.txt").write_text("not a plug-in\n")  # ignored: not .py
    assert main(["convert", str(pt2), "-o", str(tmp_path / "out")]) == 1
    assert "aten.logit.default" in capsys.readouterr().err
    for op in ("aten.logit.default", "aten.frac.default"):
        assert main(["scaffold", op, str(pt2), "--template", "decompose", "-o",
                     str(rules / f"{op.split('.')[1]}.py")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["convert", str(pt2), "--converters", str(rules), "-o", str(tmp_path / "out"), "--fp16", "0"]) == 0
    assert (tmp_path / "out" / "m.ncnn.param").is_file()
    # repeated --converters: a file and a folder
    (tmp_path / "more").mkdir()
    (rules / "frac.py").rename(tmp_path / "more" / "frac.py")
    assert main(["convert", str(pt2), "--converters", str(rules / "logit.py"), "--converters",
                 str(tmp_path / "more"), "-o", str(tmp_path / "out2")]) == 0


def test_cli_scaffold_refuses_clearly(tmp_path, capsys):
    pt2 = export_pt2(Fn(lambda x: torch.logit(x.sigmoid())), [torch.randn(1, 3, 8)], tmp_path / "m.pt2")
    out = tmp_path / "r.py"
    assert main(["scaffold", "aten.logit.default", str(pt2), "-o", str(out)]) == 0
    first = out.read_text()
    capsys.readouterr()
    cases = [
        (["scaffold", "aten.logit.default", str(pt2), "-o", str(out)], "the file exists (use --force"),
        (["scaffold", "aten.erfinv.default", str(pt2), "-o", str(tmp_path / "e.py")], "has no node of this overload"),
        (["scaffold", "aten.logit.default", str(pt2), "--node", "sigmoid", "-o", str(tmp_path / "e.py")],
         "the node is aten.sigmoid.default, not aten.logit.default"),
        (["scaffold", "aten.logit.default", str(pt2), "--node", "nope", "-o", str(tmp_path / "e.py")],
         "no node of that name"),
        (["scaffold", "aten.nonexistent.default", "-o", str(tmp_path / "e.py")], "not an ATen overload"),
        (["scaffold", "aten.logit.default", "--node", "logit", "-o", str(tmp_path / "e.py")], "--node needs MODEL.pt2"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err and err.count("\n") == 1, err
    assert out.read_text() == first and not (tmp_path / "e.py").exists()
    assert main(["scaffold", "aten.logit.default", str(pt2), "--template", "ncnn_custom", "-o", str(out),
                 "--force"]) == 0
    assert "ncnn_custom_layer" in out.read_text()
    assert main(["scaffold", "aten.logit.default", str(pt2), "--node", "logit", "-o", str(tmp_path / "n.py")]) == 0
    assert "Made from node `logit` of m.pt2" in (tmp_path / "n.py").read_text()
