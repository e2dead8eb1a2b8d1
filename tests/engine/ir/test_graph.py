"""IR graph: mutation keeps links consistent, lint catches broken graphs, text form round-trips."""
import numpy as np
import pytest

from engine.ir import Attribute, Graph, IRError, Provenance, format_value, parse_value


def small_graph() -> Graph:
    g = Graph()
    x = g.new_operand("x", dtype="f32", shape=[1, 3, "s0", 8])
    g.add_op("pnnx.Input", "in0", [], [x])
    y = g.new_operand("y", dtype="f32", shape=[1, 4, "s0", 8])
    w = Attribute(np.arange(48, dtype=np.float32).reshape(4, 3, 2, 2))
    g.add_op("nn.Conv2d", "conv", [x], [y], params={"kernel_size": (2, 2), "bias": False, "padding": "same"},
             attrs={"weight": w}, provenance=Provenance(("conv2d",), ("features.0",)))
    z = g.new_operand("z", dtype="f32", shape=[1, 4, "s0", 8])
    g.add_op("F.relu", "relu", [y], [z], provenance=Provenance(("relu",), ("features.1",)))
    g.add_op("pnnx.Output", "out0", [z], [])
    return g


def test_text_round_trip_is_identical():
    g = small_graph()
    g.lint()
    text = g.to_text()
    g2 = Graph.from_text(text)
    g2.lint()
    assert g2.to_text() == text
    assert g2.find_op("conv").provenance.modules == ("features.0",)
    assert g2.operands["y"].shape == [1, 4, "s0", 8]
    assert g2.find_op("conv").attrs["weight"].shape == (4, 3, 2, 2)


def test_parsed_operands_of_the_same_shape_each_have_their_own_list():
    """The parser reads a repeated shape annotation once; each operand still gets a list of its
    own (a pass may assign into one without changing the others)."""
    g2 = Graph.from_text(small_graph().to_text())
    y, z = g2.operands["y"], g2.operands["z"]
    assert y.shape == z.shape == [1, 4, "s0", 8] and y.shape is not z.shape
    y.shape[0] = 2
    assert z.shape == [1, 4, "s0", 8]


def test_values_round_trip():
    for v in [None, True, False, 0, -3, 1.5, 1e-5, -2.0, "abc", "has space", "a,b", [1, 2], [[1, 2], [3]],
              ["x", 1, 2.5], [], float("inf")]:
        back = parse_value(format_value(v))
        assert back == (list(v) if isinstance(v, tuple) else v), (v, format_value(v), back)


@pytest.mark.parametrize("value,text", [
    (7, "7"), (-1, "-1"), (True, "True"), ((5,), "(5)"), ([], "()"), ([1, -2, 3], "(1,-2,3)"),
    ([True, 1], "(True,1)"), ([1, 2.0], "(1,2.0)"), ([[1], [2, 3]], "((1),(2,3))"), (["s0", 4], "(s0,4)"),
])
def test_value_spelling(value, text):
    """Exact ints and int sequences take a fast path that must spell what the general code does
    (bools, floats and nested values still go the general way)."""
    assert format_value(value) == text


def test_remove_refuses_used_output_and_bypass_rewires():
    g = small_graph()
    with pytest.raises(IRError, match="still used"):
        g.remove_op(g.find_op("conv"))
    g.bypass(g.find_op("relu"))
    g.lint()
    assert [op.name for op in g.ops] == ["in0", "conv", "out0"]
    assert g.find_op("out0").inputs[0].name == "y"


def test_lint_detects_use_before_definition_and_duplicates():
    g = small_graph()
    g.ops = list(reversed(g.ops))
    with pytest.raises(IRError, match="used before"):
        g.lint()
    g.toposort()
    g.lint()
    assert [op.name for op in g.ops] == ["in0", "conv", "relu", "out0"]


def test_unique_names_and_copy_is_independent():
    g = small_graph()
    op = g.add_op("F.relu", "relu", [g.operands["z"]], [g.new_operand("z")])
    assert op.name == "relu_1" and op.outputs[0].name == "z_1"
    c = g.copy()
    c.remove_op(c.find_op("relu_1"))
    assert g.find_op("relu_1") is not None
    c.lint()
    g.lint()


def test_provenance_union_keeps_order_without_duplicates():
    a = Provenance(("conv2d", "bn"), ("m.conv",))
    b = Provenance(("bn", "relu"), ("m.bn", "m.conv"))
    u = a.union(b)
    assert u.nodes == ("conv2d", "bn", "relu")
    assert u.modules == ("m.conv", "m.bn")


def test_lazy_attribute_loads_once_and_checks_shape():
    calls = []

    def load():
        calls.append(1)
        return np.ones((2, 3), np.float32)

    a = Attribute(loader=load, shape=(2, 3), dtype="f32")
    assert not a.loaded and not calls
    assert a.data.sum() == 6 and a.data.sum() == 6
    assert len(calls) == 1
    bad = Attribute(loader=load, shape=(3, 2), dtype="f32")
    with pytest.raises(IRError, match="shape"):
        bad.data


def test_attribute_map_is_lazy_when_given_the_shape():
    calls = []

    def load():
        calls.append(1)
        return np.arange(6, dtype=np.int64).reshape(2, 3)

    src = Attribute(loader=load, shape=(2, 3), dtype="i64")
    flat = src.map(lambda a: a.astype(np.float32).reshape(-1), (6,), "f32")
    assert not calls and (flat.shape, flat.dtype) == ((6,), "f32")
    assert flat.data.tolist() == [0, 1, 2, 3, 4, 5] and flat.data.dtype == np.float32 and len(calls) == 1
    now = src.map(lambda a: a.T)  # no shape: computed at once
    assert now.loaded and now.shape == (3, 2) and now.dtype == "i64"


def test_networkx_view():
    g = small_graph()
    nxg = g.to_networkx()
    assert set(nxg.successors("conv")) == {"relu"}


def test_prune_removes_what_the_given_operands_left_unread_and_nothing_else():
    g = Graph()
    x = g.new_operand("x", dtype="f32", shape=[4])
    g.add_op("pnnx.Input", "in0", [], [x])
    ops = {}
    for name, src in (("a", "x"), ("b", "a"), ("c", "x"), ("d", "x")):
        out = g.new_operand(name, dtype="f32", shape=[4])
        ops[name] = g.add_op("F.relu", f"op_{name}", [g.operands[src]], [out])
    g.add_op("pnnx.Output", "out0", [g.operands["d"]], [])
    # b reads a, nobody reads b; c is dead too but was not touched
    assert g.prune([g.operands["b"]]) == 2
    assert [op.name for op in g.ops] == ["in0", "op_c", "op_d", "out0"]
    assert g.prune([g.operands["d"], g.operands["x"]]) == 0  # read by the output; the input stays
    g.lint()


def test_ops_is_a_list_like_view_of_the_linked_order():
    g = small_graph()
    conv, relu = g.find_op("conv"), g.find_op("relu")
    names = lambda: [op.name for op in g.ops]  # noqa: E731
    assert names() == ["in0", "conv", "relu", "out0"] and len(g.ops) == len(g) == 4
    assert g.ops[1] is conv and [op.name for op in g.ops[-2:]] == ["relu", "out0"]
    assert relu in g.ops and g.ops.index(relu) == 2 and g.ops == list(g.ops) and g.ops.copy() == list(g)
    # a pass may add and remove operators while it walks the order: the walk sees the order
    # as it was when it started
    seen = []
    for op in g.ops:
        seen.append(op.name)
        if op is conv:
            g.add_op("F.relu", "extra", [conv.outputs[0]], [g.new_operand("e")], before=relu)
    assert seen == ["in0", "conv", "relu", "out0"]
    extra = g.find_op("extra")
    assert names() == ["in0", "conv", "extra", "relu", "out0"] and g.ops.index(relu) == 3
    g.move_before(extra, conv)
    assert names() == ["in0", "extra", "conv", "relu", "out0"]
    g.move_before(extra, g.find_op("out0"))
    conv.outputs[0].consumers.remove(extra)
    extra.inputs.clear()
    g.remove_op(extra)
    assert names() == ["in0", "conv", "relu", "out0"] and extra not in g.ops and g.find_op("extra") is None
    with pytest.raises(IRError, match="not in the graph"):
        g.remove_op(extra)
    # the list methods of the list this used to be still work
    g.ops.remove(relu)
    g.ops.insert(1, relu)
    assert names() == ["in0", "relu", "conv", "out0"]
    g.ops = [g.find_op(n) for n in ("in0", "conv", "relu", "out0")]
    g.lint()


def test_find_op_follows_renames():
    g = small_graph()
    conv = g.find_op("conv")
    assert g.rename_op(conv, "conv2") == "conv2" and g.find_op("conv2") is conv and g.find_op("conv") is None
    conv.name = "direct"  # assigned behind the graph's back: still found
    assert g.find_op("direct") is conv


def test_remove_dead_removes_whole_unused_chains():
    g = small_graph()
    x = g.operands["z"]
    a = g.add_op("F.relu", "a", [x], [g.new_operand("a")])
    b = g.add_op("F.relu", "b", [a.outputs[0]], [g.new_operand("b")])
    g.add_op("F.relu", "c", [b.outputs[0]], [g.new_operand("c")])
    assert g.remove_dead() == 3
    assert [op.name for op in g.ops] == ["in0", "conv", "relu", "out0"] and "b" not in g.operands
    g.lint()


def test_tracked_dict_counts_changes_per_dict():
    """The count starts at 0 (a class default: no __init__ of its own) and a change of one
    dict leaves the others' counts alone."""
    from engine.ir.graph import TrackedDict

    a, b = TrackedDict({"k": 1}), TrackedDict()
    assert (a.version, b.version, dict(a)) == (0, 0, {"k": 1})
    a["k"] = 2
    a.update(j=3)
    a.pop("j")
    del a["k"]
    a.setdefault("m", 4)
    a |= {"n": 5}
    assert (a.version, b.version, TrackedDict.version) == (6, 0, 0)
    assert TrackedDict(a).version == 0 and type(TrackedDict(a)) is TrackedDict


@pytest.mark.parametrize("n_inputs", [3, 7])  # a consumer scanned, and one indexed
def test_input_positions_in_consumer_order_each_once(n_inputs):
    from engine.ir.graph import InputPositions

    g = Graph()
    a, b = g.new_operand("a"), g.new_operand("b")
    g.add_op("pnnx.Input", "in", [], [a, b])
    ins = [b] * (n_inputs - 2) + [a, a]
    ins[0], ins[-1] = a, b  # a at 0 and n-2, b elsewhere
    first = g.add_op("F.relu", "first", [a], [g.new_operand("r")])
    cat = g.add_op("torch.cat", "cat", ins, [g.new_operand("y")])
    last = g.add_op("torch.add", "last", [b, a], [g.new_operand("z")])
    positions = InputPositions()
    assert positions(a) == [(first, 0), (cat, 0), (cat, n_inputs - 2), (last, 1)]
    assert positions(b) == [(cat, i) for i in range(1, n_inputs - 2)] + [(cat, n_inputs - 1), (last, 0)]
    assert positions(g.operands["y"]) == []


def test_ops_of_type_in_graph_order_for_few_and_many_types():
    g = small_graph()
    assert [op.name for op in g.ops_of_type("F.relu", "pnnx.Input")] == ["in0", "relu"]
    assert [op.name for op in g.ops_of_type("pnnx.Output", "nn.Conv2d", "pnnx.Input", "x.y")] == ["in0", "conv", "out0"]
    assert g.ops_of_type() == [] and g.ops_of_type("F.relu") == [g.find_op("relu")]
