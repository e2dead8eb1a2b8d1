"""Which rule converted which node: every operator a rule emitted carries the rules that made
it (``meta["converted_by"]``), and :func:`nodes_by_rule` maps each rule to its ATen nodes — a
plug-in's rule, the built-ins it leans on, and a decomposition's pieces."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.convert import ConvertOptions, convert  # noqa: E402
from engine.convert.plugins import nodes_by_rule  # noqa: E402
from tests.harness import Fn, export_pt2  # noqa: E402

HYPOT_RULE = '''
from engine.convert import aten_converter

@aten_converter("aten.hypot.default")
def hypot_rule(ctx, op):
    x, y = op.inputs
    return ctx.emit("pnnx.Expression", [x, y], params={"expr": "sqrt(add(mul(@0,@0),mul(@1,@1)))"})
'''

LOGIT_RULE = '''
from engine.convert import aten_converter

@aten_converter("aten.logit.default")
def logit_rule(ctx, op):
    x = op.inputs[0]
    ratio = ctx.aten("aten.div.Tensor", {"self": x, "other": ctx.aten("aten.rsub.Scalar", {"self": x, "other": 1.0},
                     shape=x.shape, dtype=x.dtype)}, shape=x.shape, dtype=x.dtype)
    return ctx.aten("aten.log.default", {"self": ratio}, shape=x.shape, dtype=x.dtype)
'''


def test_a_plugin_rule_is_recorded_on_what_it_made(tmp_path):
    pt2 = export_pt2(Fn(lambda x: torch.hypot(x, x + 1).relu()), [torch.randn(1, 3, 8)], tmp_path / "m.pt2")
    rule = tmp_path / "hypot.py"
    rule.write_text(HYPOT_RULE)
    r = convert(str(pt2), ConvertOptions(converters=[str(rule)]))
    assert r.ok, r.errors
    tag = f"{rule}::hypot_rule"
    by_rule = nodes_by_rule(r.pnnx, r.ncnn)
    hypot = [op for op in r.aten.ops if op.type == "aten.hypot.default"][0].name
    relu = [op for op in r.aten.ops if op.type == "aten.relu.default"][0].name
    assert by_rule[tag] == [hypot]
    assert relu not in by_rule[tag] and any(relu in nodes for t, nodes in by_rule.items() if t != tag)
    # the ncnn layer made from the node: the plug-in's rule first, then the built-in ncnn rule
    made = [op for op in r.ncnn.ops if tag in op.meta.get("converted_by", ())]
    assert made and all(hypot in op.provenance.nodes for op in made)
    for layer in made:
        assert layer.meta["converted_by"][0] == tag and len(layer.meta["converted_by"]) == 2
        assert layer.meta["converted_by"][1].startswith("engine.converters.")
    # without the plug-in nothing is tagged with it
    assert tag not in nodes_by_rule(convert(str(pt2)).pnnx)


def test_a_decomposing_rule_owns_the_pieces_the_builtins_converted(tmp_path):
    pt2 = export_pt2(Fn(lambda x: torch.logit(torch.sigmoid(x))), [torch.randn(1, 3, 8)], tmp_path / "m.pt2")
    rule = tmp_path / "logit.py"
    rule.write_text(LOGIT_RULE)
    r = convert(str(pt2), ConvertOptions(converters=[str(rule)]))
    assert r.ok, r.errors
    logit = [op for op in r.aten.ops if op.type == "aten.logit.default"][0].name
    made = [op for op in r.ncnn.ops if op.meta.get("converted_by", ())[:1] == (f"{rule}::logit_rule",)]
    assert len(made) >= 2 and all(logit in op.provenance.nodes for op in made)
    assert nodes_by_rule(r.ncnn)[f"{rule}::logit_rule"] == [logit]
