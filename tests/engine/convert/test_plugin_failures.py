"""A broken converter plug-in gives one clear message naming its file and line (and the rule),
never a traceback, and never crashes the conversion: a plug-in that cannot load is one
PluginError (the CLI's one-line error); a validator or rule that fails, or a rule returning
something that is not an operand, leaves its node unconverted with that reason."""
from __future__ import annotations

import textwrap

import pytest

from engine.convert import ATEN, ConversionContext
from engine.convert.lowering import lower_graph
from engine.convert.plugins import load_plugin, plugin_files, plugin_scope
from engine.errors import PluginError
from engine.ir import Graph

GRAPH = """7767517
4 4
pnnx.Input x 0 1 x #x=(1,4)f32
aten.test_op.default t 1 1 x t #t=(1,4)f32 !from=t
aten.other_op.default o 1 1 t o #o=(1,4)f32 !from=o
pnnx.Output out 1 0 o
"""


def lower_with(plugin_text: str, tmp_path, name: str = "rules.py"):
    """Lower the two-op graph with the plug-in; returns (graph, {node: diagnostic}, path)."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(plugin_text).lstrip())
    with plugin_scope([path]):
        g = Graph.from_text(GRAPH)
        for op in g.ops[1:3]:
            op.meta["target"] = "torch.ops." + op.type
        ctx = ConversionContext(g)
        lower_graph(g, ATEN, ctx, skip=lambda op: "target" not in op.meta)
    g.lint()
    return g, {d.node: d for d in ctx.diagnostics}, path


HEADER = """
    from engine.convert import aten_converter

    @aten_converter("aten.other_op.default")
    def fine(ctx, op):
        return ctx.emit("F.fine", [op.inputs[0]])
"""


def test_validator_exception_names_file_line_and_rule(tmp_path):
    g, diags, path = lower_with(HEADER + """
    def picky(op, ctx):
        return op.inputs[0].shape[9]

    @aten_converter("aten.test_op.default", validator=picky)
    def rule(ctx, op):
        return ctx.emit("F.x", [op.inputs[0]])
    """, tmp_path)
    d = diags["t"]
    assert d.reason == f"validator picky ({path}:8) failed: IndexError: list index out of range"
    assert d.plugin == f"{path}:8"
    assert g.find_op("t").type == "aten.test_op.default" and g.find_op("o").type == "F.fine"


def test_rule_body_exception_names_file_line_and_rule(tmp_path):
    g, diags, path = lower_with(HEADER + """
    @aten_converter("aten.test_op.default")
    def crashes(ctx, op):
        ctx.emit("F.half", [op.inputs[0]])
        return 1 / 0
    """, tmp_path)
    d = diags["t"]
    assert d.reason == f"plug-in rule crashes ({path}:10) failed: ZeroDivisionError: division by zero"
    assert d.plugin == f"{path}:10"
    assert [op.type for op in g.ops] == ["pnnx.Input", "aten.test_op.default", "F.fine", "pnnx.Output"]


@pytest.mark.parametrize("returned", ['"t"', "42", "{'out': op.inputs[0]}", "[op.inputs[0], 'x']"])
def test_a_wrong_return_type_is_a_diagnostic_not_a_crash(tmp_path, returned):
    g, diags, path = lower_with(HEADER + f"""
    @aten_converter("aten.test_op.default")
    def wrong(ctx, op):
        ctx.emit("F.x", [op.inputs[0]])
        return {returned}
    """, tmp_path)
    d = diags["t"]
    assert d.reason.startswith(f"plug-in rule wrong ({path}:7) returned "), d.reason
    assert "a rule returns the operand replacing the output" in d.reason or "outputs for 1" in d.reason
    assert d.plugin == f"{path}:7"
    assert g.find_op("t").type == "aten.test_op.default" and g.find_op("o").type == "F.fine"


def test_a_refusal_points_at_the_plugin_line(tmp_path):
    _, diags, path = lower_with(HEADER + """
    @aten_converter("aten.test_op.default")
    def later(ctx, op):
        ctx.unsupported("write me")
    """, tmp_path)
    assert diags["t"].reason == "unsupported: write me" and diags["t"].plugin == f"{path}:9"


@pytest.mark.parametrize("text, line, reason", [
    ("x = 1\ndef broken(:\n    pass\n", 2, "syntax error: "),
    ("import engine\n\nraise RuntimeError('no GPU here')\n", 3, "RuntimeError while loading the plug-in: no GPU here"),
    ("import not_a_module_anywhere\n", 1, "ModuleNotFoundError while loading the plug-in: "),
    ("from engine.convert import aten_converter\n\n@aten_converter('aten.relu')\ndef f(ctx, op):\n    pass\n", 3,
     "names no overload"),
    ("def helper():\n    return {}['k']\n\nhelper()\n", 2, "KeyError while loading the plug-in"),
])
def test_a_plugin_that_cannot_load_is_one_error_with_file_and_line(tmp_path, text, line, reason):
    path = tmp_path / "bad.py"
    path.write_text(text)
    with pytest.raises(PluginError) as info:
        load_plugin(path)
    e = info.value
    assert (e.path, e.line) == (str(path), line) and reason in e.reason
    assert str(e).startswith(f"{path}:{line}: ")


def test_the_cli_reports_a_broken_plugin_in_one_line(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from engine.cli.main import main

    pt2 = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(torch.nn.ReLU(), (torch.randn(1, 4),)), str(pt2))
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a_ok.py").write_text("X = 1\n")
    (rules / "b_bad.py").write_text("def f(:\n")
    assert main(["convert", str(pt2), "--converters", str(rules), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {rules / 'b_bad.py'}:1: syntax error: invalid syntax\n"
    assert not list(tmp_path.glob("*.ncnn.*"))


def test_plugin_files_of_a_folder(tmp_path):
    for name in ("b.py", "a.py", "notes.txt", "c.pyc"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.py").write_text("")
    one = tmp_path / "sub" / "d.py"
    assert plugin_files([tmp_path, one]) == [tmp_path / "a.py", tmp_path / "b.py", one]
    with pytest.raises(PluginError, match="file or folder not found"):
        plugin_files([tmp_path / "missing"])


def test_plugin_layout_rules_are_scoped(tmp_path):
    from engine.convert.layout import has_rule

    path = tmp_path / "p.py"
    path.write_text("from engine.convert import OpLayout, layout_rule\n\n"
                    "@layout_rule('pnnx.ScopedThing')\ndef lay(op):\n    return OpLayout()\n")
    with plugin_scope([path]):
        assert has_rule("pnnx.ScopedThing")
    assert not has_rule("pnnx.ScopedThing")
