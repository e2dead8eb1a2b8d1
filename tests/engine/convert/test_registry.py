"""Converter registry: overload keys, validators, priority, plug-ins, failures as diagnostics."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.convert import ATEN, ConversionContext, Priority, RegistryError, aten_converter
from engine.convert.lowering import lower_graph
from engine.convert.plugins import load_plugin, plugin_scope
from engine.errors import PluginError
from engine.ir import Graph

GRAPH = """7767517
4 4
pnnx.Input x 0 1 x #x=(1,4)f32
aten.test_op.default t 1 1 x t #t=(1,4)f32 !from=t
aten.other_op.default o 1 1 t o #o=(1,4)f32 !from=o !mod=blocks.0
pnnx.Output out 1 0 o
"""


def aten_graph() -> Graph:
    g = Graph.from_text(GRAPH)
    for op in g.ops[1:3]:
        op.meta["target"] = "torch.ops." + op.type
    return g


@pytest.fixture
def scoped():
    with plugin_scope([]):
        yield


def lower(g):
    ctx = ConversionContext(g)
    lower_graph(g, ATEN, ctx, skip=lambda op: "target" not in op.meta)
    return ctx


def test_key_without_overload_is_refused():
    with pytest.raises(RegistryError, match="names no overload"):
        aten_converter("aten.conv2d")
    with pytest.raises(RegistryError):
        aten_converter("conv2d")


def test_priority_then_validator_selects(scoped):
    @aten_converter("aten.test_op.default")
    def standard(ctx, op):
        return ctx.emit("F.standard", [op.inputs[0]])

    @aten_converter("aten.test_op.default", priority=Priority.HIGH, validator=lambda op, ctx: "unsupported: never")
    def picky(ctx, op):  # pragma: no cover - refused by its validator
        return ctx.emit("F.picky", [op.inputs[0]])

    @aten_converter("aten.other_op.default")
    def other(ctx, op):
        return ctx.emit("F.other", [op.inputs[0]])

    g = aten_graph()
    ctx = lower(g)
    g.lint()
    assert [op.type for op in g.ops] == ["pnnx.Input", "F.standard", "F.other", "pnnx.Output"]
    # replacement keeps the ATen name for the operator and its output, and the provenance
    conv = g.find_op("t")
    assert conv.type == "F.standard" and conv.outputs[0].name == "t"
    assert g.find_op("o").provenance.modules == ("blocks.0",)
    assert not ctx.diagnostics.items


def test_refusal_and_crash_become_diagnostics_and_keep_going(scoped):
    @aten_converter("aten.test_op.default", validator=lambda op, ctx: "unsupported: test says no")
    def never(ctx, op):  # pragma: no cover
        raise AssertionError

    @aten_converter("aten.other_op.default")
    def crashes(ctx, op):
        ctx.emit("F.partial", [op.inputs[0]])
        raise ZeroDivisionError("boom")

    g = aten_graph()
    ctx = lower(g)
    g.lint()
    assert [op.type for op in g.ops] == ["pnnx.Input", "aten.test_op.default", "aten.other_op.default", "pnnx.Output"]
    reasons = {d.node: d.reason for d in ctx.diagnostics}
    assert reasons["t"] == "unsupported: test says no"
    assert "ZeroDivisionError: boom" in reasons["o"]
    assert [d.module for d in ctx.diagnostics if d.node == "o"] == ["blocks.0"]


def test_no_value_for_a_used_output_is_rolled_back(scoped):
    @aten_converter("aten.two_out.default")
    def half(ctx, op):
        return [ctx.emit("F.half", [op.inputs[0]]), None]

    g = Graph.from_text("7767517\n4 3\npnnx.Input x 0 1 x #x=(1,4)f32\n"
                        "aten.two_out.default t 1 2 x a b #a=(1,4)f32 #b=(1,4)f32 !from=t\n"
                        "pnnx.Output out 1 0 a\npnnx.Output out2 1 0 b\n")
    g.find_op("t").meta["target"] = "torch.ops.aten.two_out.default"
    ctx = lower(g)
    g.lint()
    assert [(op.type, op.name) for op in g.ops] == [("pnnx.Input", "x"), ("aten.two_out.default", "t"),
                                                    ("pnnx.Output", "out"), ("pnnx.Output", "out2")]
    assert sorted(g.operands) == ["a", "b", "x"]
    [d] = ctx.diagnostics
    assert (d.node, d.operator) == ("t", "t") and d.reason.endswith(".half gave no value for output b, which is used")
    assert g.find_op("t").meta["unsupported"]


def test_unregistered_op_is_reported(scoped):
    g = aten_graph()
    ctx = lower(g)
    assert {d.node for d in ctx.diagnostics} == {"t", "o"}
    assert all("no aten converter registered" in d.reason for d in ctx.diagnostics)


def test_plugin_overrides_builtin_and_scope_restores(tmp_path, scoped):
    @aten_converter("aten.test_op.default")
    def builtin(ctx, op):
        return ctx.emit("F.builtin", [op.inputs[0]])

    plugin = tmp_path / "my_rules.py"
    plugin.write_text(textwrap.dedent("""
        from engine.convert import aten_converter

        @aten_converter("aten.test_op.default")
        def mine(ctx, op):
            return ctx.emit("F.mine", [op.inputs[0]])
    """))
    with plugin_scope([plugin]) as loaded:
        assert [c.origin for c in loaded] == [f"plugin:{plugin}"]
        assert ATEN.candidates("aten.test_op.default")[0].fn.__name__ == "mine"
        g = aten_graph()
        lower(g)
        assert g.find_op("t").type == "F.mine"
    assert ATEN.candidates("aten.test_op.default")[0].fn.__name__ == "builtin"


def test_a_crashing_plugin_validator_is_a_refusal_naming_the_plugin(tmp_path, scoped):
    plugin = tmp_path / "fragile.py"
    plugin.write_text(textwrap.dedent("""
        from engine.convert import aten_converter

        def needs_rank(op, ctx):
            return op.inputs[0].shape[7] == 1  # IndexError on these ranks

        @aten_converter("aten.test_op.default", validator=needs_rank)
        def fragile(ctx, op):
            return ctx.emit("F.fragile", [op.inputs[0]])
    """))
    with plugin_scope([plugin]):
        g = aten_graph()
        ctx = lower(g)
    reason = {d.node: d.reason for d in ctx.diagnostics}["t"]
    assert reason.startswith(f"validator needs_rank ({plugin}:5) failed: IndexError"), reason
    assert g.find_op("t").type == "aten.test_op.default"


def test_bad_plugins_raise_plugin_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from engine.convert import aten_converter\n@aten_converter('aten.relu')\ndef f(ctx, op): pass\n")
    with pytest.raises(PluginError, match="names no overload"):
        load_plugin(bad)
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def (:\n")
    with pytest.raises(PluginError, match=r"syntax.py:1: syntax error"):
        load_plugin(syntax)
    with pytest.raises(PluginError, match="not found"):
        load_plugin(tmp_path / "missing.py")


# ----------------------------------------------------------------------------- rules emitting ATen ops
def test_a_rule_may_emit_aten_ops_lowered_in_turn_by_the_registry(scoped):
    import engine.converters  # noqa: F401  (the built-in rules lower what the rule emits)

    @aten_converter("aten.test_op.default")
    def as_leaky_then_neg(ctx, op):
        x = op.inputs[0]
        y = ctx.aten("aten.leaky_relu.default", {"self": x}, shape=x.shape, dtype="f32")  # slope: default
        return ctx.aten("aten.mul.Tensor", {"self": y, "other": -2.0}, shape=x.shape, dtype="f32")

    @aten_converter("aten.other_op.default")
    def other(ctx, op):
        return ctx.emit("F.other", [op.inputs[0]])

    g = aten_graph()
    ctx = lower(g)
    g.lint()
    assert not ctx.diagnostics.items
    assert [op.type for op in g.ops] == ["pnnx.Input", "F.leaky_relu", "pnnx.Expression", "F.other", "pnnx.Output"]
    leaky, mul = g.ops[1], g.ops[2]
    assert leaky.params == {"negative_slope": 0.01} and mul.params["expr"] == "mul(@0,-2.0)"
    # named after the node, which keeps its output name; provenance is the node's
    assert mul.outputs[0].name == "t" and leaky.name.startswith("t")
    assert leaky.provenance.nodes == ("t",) and mul.provenance.nodes == ("t",)


def test_emitted_aten_ops_are_checked_against_the_schema(scoped):
    @aten_converter("aten.test_op.default")
    def wrong_arg(ctx, op):
        return ctx.aten("aten.relu.default", {"input": op.inputs[0]}, shape=[1, 4], dtype="f32")

    @aten_converter("aten.other_op.default")
    def missing_arg(ctx, op):
        return ctx.aten("aten.leaky_relu.default", {}, shape=[1, 4], dtype="f32")

    g = aten_graph()
    reasons = {d.node: d.reason for d in lower(g).diagnostics}
    assert reasons["t"] == "unsupported: aten.relu.default has no argument 'input' (its arguments: self)"
    assert reasons["o"] == "unsupported: aten.leaky_relu.default: argument 'self' is required"
    assert [op.type for op in g.ops][1:3] == ["aten.test_op.default", "aten.other_op.default"]


def test_an_emitted_op_that_fails_names_the_rule_that_emitted_it(scoped):
    @aten_converter("aten.test_op.default")
    def via_unknown(ctx, op):
        return ctx.aten("aten.special_airy_ai.default", {"x": op.inputs[0]}, shape=[1, 4], dtype="f32")

    g = aten_graph()
    d = next(d for d in lower(g).diagnostics if d.node == "t")
    assert d.op == "aten.special_airy_ai.default"
    assert d.reason.startswith("unsupported: no aten converter registered for aten.special_airy_ai.default "
                               "(an op emitted by converter ") and d.reason.endswith(".via_unknown for t)")


def test_a_rule_that_keeps_emitting_its_own_op_stops(scoped):
    @aten_converter("aten.special_airy_ai.default")
    def forever(ctx, op):
        return ctx.aten("aten.special_airy_ai.default", {"x": op.inputs[0]}, shape=[1, 4], dtype="f32")

    g = Graph.from_text("7767517\n3 2\npnnx.Input x 0 1 x #x=(1,4)f32\n"
                        "aten.special_airy_ai.default a 1 1 x a #a=(1,4)f32 !from=a\npnnx.Output out 1 0 a\n")
    g.find_op("a").meta["target"] = "torch.ops.aten.special_airy_ai.default"
    g.find_op("a").input_names = ["x"]
    [d] = lower(g).diagnostics
    assert "rules kept emitting ATen ops 16 levels deep" in d.reason
    g.lint()


def test_a_scope_entered_before_the_builtins_are_imported_keeps_them(tmp_path):
    """The scope's restore must not drop the built-in rules when their package is first imported
    inside it (a fresh process whose first conversion runs with a plug-in)."""
    code = textwrap.dedent("""
        import sys
        from engine.convert import ATEN, NCNN
        from engine.convert.plugins import plugin_scope
        assert "engine.converters" not in sys.modules
        with plugin_scope([]):
            import engine.converters
        print(bool(ATEN.candidates("aten.conv2d.default")), bool(NCNN.candidates("nn.Conv2d")))
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
