"""engine.verify.mapping on hand-built graphs: which ATen value each ncnn blob holds."""
from __future__ import annotations

from engine.ir import Graph, Provenance
from engine.verify.mapping import map_blobs, map_by_name


def _aten() -> Graph:
    """x -> conv2d -> batch_norm -> relu -> remainder -> add(relu) -> output"""
    g = Graph()
    v = {}

    def op(type_, name, inputs, n_out=1):
        outs = [g.new_operand(name if k == 0 else f"{name}_{k}", dtype="f32", shape=[1, 4, 8, 8])
                for k in range(n_out)]
        g.add_op(type_, name, [v[i] for i in inputs], outs, provenance=Provenance((name,), ("",)), exact=True)
        for o in outs:
            v[o.name] = o

    op("pnnx.Input", "x", [])
    op("aten.conv2d.default", "conv2d", ["x"])
    op("aten.batch_norm.default", "batch_norm", ["conv2d"])
    op("aten.relu.default", "relu", ["batch_norm"])
    op("aten.remainder.Scalar", "remainder", ["relu"])
    op("aten.add.Tensor", "add", ["remainder", "relu"])
    g.add_op("pnnx.Output", "pnnx_output_0", [v["add"]], [])
    return g


def _layer(g: Graph, type_, name, inputs, outputs, nodes):
    outs = [g.new_operand(o, exact=True) for o in outputs]
    g.add_op(type_, name, [g.operands[i] for i in inputs], outs, provenance=Provenance(tuple(nodes)), exact=True)


def _ncnn() -> Graph:
    g = Graph()
    _layer(g, "Input", "in0", [], ["in0"], ["x"])
    _layer(g, "Convolution", "conv2d", ["in0"], ["conv2d"], ["conv2d", "batch_norm", "relu"])
    _layer(g, "Split", "conv2d_split", ["conv2d"], ["conv2d_split_0", "conv2d_split_1"],
           ["conv2d", "batch_norm", "relu"])
    # remainder lowered to three layers; the last one keeps the ATen value name
    _layer(g, "BinaryOp", "remainder_div", ["conv2d_split_0"], ["remainder_1"], ["remainder"])
    _layer(g, "UnaryOp", "remainder_floor", ["remainder_1"], ["remainder_2"], ["remainder"])
    _layer(g, "BinaryOp", "remainder", ["remainder_2", "conv2d_split_1"], ["remainder"], ["remainder"])
    g.add_op("Split", "remainder_split", [g.operands["remainder"]],
             [g.new_operand("remainder_split_0", exact=True)], provenance=Provenance(("remainder",)), exact=True)
    _layer(g, "BinaryOp", "add", ["remainder_split_0", "conv2d_split_1"], ["out0"], ["add"])
    g.meta["inputs"] = [{"blob": "in0", "name": "x"}]
    g.meta["outputs"] = [{"blob": "out0", "name": "add"}]
    return g


def test_map_blobs_follows_provenance_fusions_splits_and_io():
    m = map_blobs(_ncnn(), _aten())
    got = {b: (r.value, r.how) for b, r in m.refs.items()}
    assert got["in0"] == ("x", "input")
    # the fused conv+bn+relu keeps the conv's blob name but holds the relu's value
    assert got["conv2d"] == ("relu", "provenance")
    assert got["conv2d_split_0"] == got["conv2d_split_1"] == ("relu", "split")
    assert got["remainder"] == ("remainder", "name") and got["remainder_split_0"] == ("remainder", "split")
    assert got["out0"] == ("add", "output")
    assert set(m.unmapped) == {"remainder_1", "remainder_2"}
    assert "intermediate of remainder" in m.unmapped["remainder_1"]


def test_map_by_name_uses_the_reference_then_names():
    aten = _aten()
    reference = map_blobs(_ncnn(), aten)
    user = Graph()  # an edited copy: a renamed blob, an extra layer, no provenance
    _layer(user, "Input", "in0", [], ["in0"], [])
    _layer(user, "Convolution", "conv2d", ["in0"], ["conv2d"], [])
    _layer(user, "Sigmoid", "extra", ["conv2d"], ["my_blob"], [])
    _layer(user, "Split", "s", ["my_blob"], ["my_blob_split_0"], [])
    _layer(user, "ReLU", "r", ["conv2d"], ["batch_norm"], [])
    m = map_by_name(user, reference, aten)
    assert m.refs["conv2d"].value == "relu"  # known to the reference conversion
    assert m.refs["batch_norm"].value == "batch_norm"  # named after an ATen value
    assert "my_blob" in m.unmapped and "my_blob_split_0" in m.unmapped
    # without a reference: in<k>/out<k> are the program's inputs/outputs, names are values
    bare = map_by_name(user, None, aten)
    assert (bare.refs["in0"].value, bare.refs["in0"].how) == ("x", "input")
    assert bare.refs["conv2d"].value == "conv2d"


def test_input_named_otherwise_is_the_input_of_that_position():
    user = Graph()
    _layer(user, "Input", "data", [], ["data"], [])
    _layer(user, "ReLU", "r", ["data"], ["relu"], [])
    m = map_by_name(user, None, _aten())
    assert (m.refs["data"].value, m.refs["data"].how) == ("x", "input") and m.refs["relu"].value == "relu"
