"""Pass snapshots and diffs computed from structure show exactly what the text path shows.

The text path is the reference: after every pass of the real pipeline the graph is formatted
in full (``format_graph``) and consecutive texts are diffed (``diff_snapshots``). The pass
manager's records (structural snapshots sharing unchanged operators, diffs from structure)
must give the same text and the same diff entries, on models exported with torch at test
time and the bundled samples. The last tests check the change counting itself: every way a
pass changes an operator shows in the next snapshot, and lint mode names a change made behind
the graph's back."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.ir import Graph
from engine.ir.graph import IRError, touch
from engine.ir.snapshot import take_snapshot
from engine.ir.text import format_graph
from engine.passes import PIPELINE, PassContext, PassManager, graph_pass
from engine.passes.diff import diff_snapshots, diff_states
from tests.engine.passes.reference import convert_with_reference

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[3] / "resources" / "samples"


def _assert_same(records, texts):
    assert len(records) == len(texts) == len(PIPELINE) + 1
    changed_passes = 0
    for k, (rec, text) in enumerate(zip(records, texts)):
        assert rec.snapshot == text, f"snapshot after pass {k} ({rec.name})"
        if k:
            want = diff_snapshots(texts[k - 1], text)
            assert rec.diff == want, f"diff of pass {k} ({rec.name})"
            assert rec.diff.to_text() == want.to_text()
            changed_passes += not want.empty
    assert changed_passes >= 3  # a real conversion: lowering at least


class _ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn(self.conv(x)))


class _Mixed(nn.Module):
    """Conv/BN (folded), residual, pooling, a channels-last LayerNorm MLP, concat, softmax."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.blocks = nn.Sequential(_ResBlock(8), _ResBlock(8))
        self.norm = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        y = x.permute(0, 2, 3, 1)
        y = self.fc2(nn.functional.gelu(self.fc1(self.norm(y)))).permute(0, 3, 1, 2)
        z = torch.cat([x.mean((2, 3)), y.amax((2, 3))], 1)
        return torch.softmax(self.head(z), -1)


@pytest.mark.parametrize("sample", ["tiny_cnn.pt2", "tiny_transformer.pt2"])
def test_bundled_samples(sample):
    _assert_same(*convert_with_reference(SAMPLES / sample))


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_exported_model(tmp_path, dialect):
    from tests.harness import export_pt2

    torch.manual_seed(0)
    path = export_pt2(_Mixed(), [torch.randn(1, 3, 16, 16)], tmp_path / "m.pt2", dialect=dialect)
    _assert_same(*convert_with_reference(path))


def test_unchanged_operators_are_shared_between_snapshots():
    recs, _ = convert_with_reference(SAMPLES / "tiny_cnn.pt2")
    for prev, rec in zip(recs, recs[1:]):
        if rec.diff.empty and rec.num_ops == prev.num_ops:
            assert all(a is b for a, b in zip(prev.state.states, rec.state.states)), rec.name


# ------------------------------------------------------------------------- change counting
TEXT = """7767517
4 4
pnnx.Input x 0 1 x #x=(1,4)f32
nn.Linear fc 1 1 x y bias=True in_features=4 out_features=4 @weight=(4,4)f32 #y=(1,4)f32 !from=linear
F.relu r 1 1 y z #z=(1,4)f32 !from=relu
pnnx.Output out 1 0 z
"""


def _mutations():
    def params(g):
        g.find_op("fc").params["bias"] = False

    def params_pop(g):
        g.find_op("fc").params.pop("bias")

    def params_replaced(g):
        g.find_op("fc").params = {"in_features": 4}

    def replaced_then_in_place(g):  # a plain dict assigned earlier, changed in place now
        g.find_op("fc").params["bias"] = 1

    def attr(g):
        g.find_op("fc").attrs.update(bias=g.find_op("fc").attrs["weight"])

    def retype(g):
        g.find_op("r").type = "ReLU"

    def shape(g):
        g.operands["y"].shape = [1, 2, 2]

    def dtype(g):
        g.operands["z"].dtype = "f16"

    def rename_operand(g):
        g.rename_operand(g.operands["y"], "hidden")

    def rename_op(g):
        g.rename_op(g.find_op("r"), "act")

    def rewire(g):
        g.replace_all_uses(g.operands["hidden"], g.operands["x"])

    def set_input(g):
        g.set_input(g.find_op("act"), 0, g.operands["hidden"])

    def nested_touched(g):
        op = g.find_op("fc")
        op.inputs.append(op.inputs[0])
        op.inputs[0].consumers.append(op)
        touch(op)

    return [params, params_pop, params_replaced, replaced_then_in_place, attr, retype, shape, dtype,
            rename_operand, rename_op, rewire, set_input, nested_touched]


def test_every_counted_change_shows_in_the_next_snapshot():
    g = Graph.from_text(TEXT)
    prev = take_snapshot(g, verify=True)
    prev_text = format_graph(g)
    for mutate in _mutations():
        mutate(g)
        snap = take_snapshot(g, verify=True)
        text = format_graph(g)
        assert text != prev_text, mutate.__name__
        assert snap.text == text, mutate.__name__
        assert diff_states(prev, snap) == diff_snapshots(prev_text, text), mutate.__name__
        prev, prev_text = snap, text


def test_a_pass_that_changes_a_list_in_place_is_named_in_lint_mode():
    @graph_pass("sneaky")
    def sneaky(g, cx):
        g.operands["y"].shape[1] = 8  # in place: not counted

    g = Graph.from_text(TEXT)
    with pytest.raises(Exception, match=r"pass sneaky failed: IRError: operator 'fc' changed without being counted"):
        PassManager([sneaky], lint=True).run(g, PassContext())


def test_verify_catches_an_uncounted_change_directly():
    g = Graph.from_text(TEXT)
    take_snapshot(g)
    g.find_op("fc").provenance.nodes  # reading changes nothing
    assert take_snapshot(g, verify=True).text == format_graph(g)
    g.find_op("fc").input_names.append("input")  # in place, not counted
    with pytest.raises(IRError, match="fc"):
        take_snapshot(g, verify=True)


# ------------------------------------------------------------------ no change: no walk at all
def test_a_snapshot_after_no_change_at_all_is_the_last_one_again():
    g = Graph.from_text(TEXT)
    first = take_snapshot(g)
    g.find_op("fc").params.get("bias"), list(g.ops), g.operands["y"].shape  # reading changes nothing
    assert take_snapshot(g) is first and take_snapshot(g) is first


def _more_mutations():
    def order(g):
        g.move_before(g.find_op("r"), g.find_op("fc"))

    def operand_added(g):  # the header's operand count only
        g.new_operand("spare")

    def operand_dropped(g):
        del g.operands["spare"]

    def op_added(g):
        g.add_op("F.sigmoid", "sig", [g.operands["x"]], [g.new_operand("s", shape=[1, 4], dtype="f32")])

    def shape(g):
        g.operands["y"].shape = [1, 2, 2]

    def dtype(g):
        g.operands["z"].dtype = "f16"

    def retype(g):
        g.find_op("r").type = "ReLU"

    def param(g):
        g.find_op("fc").params["bias"] = False

    def touched(g):
        op = g.find_op("r")
        op.inputs.append(op.inputs[0])
        op.inputs[0].consumers.append(op)
        touch(op)

    return [order, operand_added, operand_dropped, op_added, shape, dtype, retype, param, touched]


def test_every_change_after_a_reused_snapshot_shows_without_lint():
    """The reuse is decided without verify (what conversions run): after each change the next
    snapshot is exactly the graph's text, also when the previous one was reused, and also for
    a plain dict changed in place (no count at all)."""
    for mutations in (_more_mutations(), _mutations()):
        g = Graph.from_text(TEXT)
        prev = take_snapshot(g)
        for mutate in mutations:
            plain = any(type(op.params) is dict or type(op.attrs) is dict for op in g.ops)
            assert (take_snapshot(g) is prev) != plain  # nothing changed since (a plain dict: walked anyway)
            mutate(g)
            snap = take_snapshot(g)
            assert snap is not prev and snap.text == format_graph(g), mutate.__name__
            prev = take_snapshot(g)
            assert prev.text == format_graph(g), mutate.__name__


def test_a_change_in_another_graph_is_no_reason_to_reuse_or_to_differ():
    g, h = Graph.from_text(TEXT), Graph.from_text(TEXT)
    first = take_snapshot(g)
    h.find_op("fc").params["bias"] = False  # another graph's change draws a tick
    again = take_snapshot(g)  # walked (the ticks do not say whose), every state shared
    assert again.text == first.text and all(a is b for a, b in zip(first.states, again.states))
    g.find_op("fc").params["bias"] = False
    assert take_snapshot(g).text == format_graph(g) != first.text
