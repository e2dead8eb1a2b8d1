"""Unit tests of engine.reader.signature and engine.reader.modules against torch's own view."""
from __future__ import annotations

import pytest

import engine
from engine.reader.schema import InputKind, OutputKind
from tests.engine.reader.unit_models import cond_pt2, feat_pt2, io_pt2

torch = pytest.importorskip("torch")

_KIND = {"USER_INPUT": InputKind.USER_INPUT, "PARAMETER": InputKind.PARAMETER, "BUFFER": InputKind.BUFFER,
         "CONSTANT_TENSOR": InputKind.TENSOR_CONSTANT, "CUSTOM_OBJ": InputKind.CUSTOM_OBJ,
         "TOKEN": InputKind.TOKEN}


def _torch_inputs(ep):
    from torch.export.graph_signature import ConstantArgument

    out = []
    for s in ep.graph_signature.input_specs:
        kind = _KIND[s.kind.name]
        if kind is InputKind.USER_INPUT and isinstance(s.arg, ConstantArgument):
            kind = InputKind.CONSTANT_INPUT
        out.append((kind, s.arg.name, s.target, s.persistent if kind is InputKind.BUFFER else None))
    return out


@pytest.mark.parametrize("make", [feat_pt2, io_pt2, cond_pt2])
def test_classification_matches_torch_graph_signature(make):
    path, ep = make()
    with engine.load(path) as pkg:
        sig = pkg.model.signature
        assert [(i.kind, i.name, i.target, i.persistent) for i in sig.inputs] == _torch_inputs(ep)
        assert [(o.kind.name, o.name, o.target) for o in sig.outputs] == \
            [(s.kind.name, s.arg.name, s.target) for s in ep.graph_signature.output_specs]


def test_inputs_are_joined_to_payloads_and_metadata():
    path, ep = feat_pt2()
    with engine.load(path) as pkg:
        sig = pkg.model.signature
        assert [p.target for p in sig.parameters] == [s.target for s in ep.graph_signature.input_specs
                                                      if s.kind.name == "PARAMETER"]
        for info in sig.parameters + sig.buffers + sig.constants:
            assert info.payload is not None and info.payload.fqn == info.target
            assert info.meta.dtype == info.payload.meta.dtype
        scratch = next(b for b in sig.buffers if b.target == "scratch")
        assert scratch.persistent is False and scratch.payload.member.split("/")[-2] == "constants"
        assert [c.target for c in sig.constants] == ["c"] and sig.constants[0].payload.kind == "constant"
        x = sig.user_inputs[0]
        assert (x.name, x.meta.sizes, x.payload) == ("x", (2, 3, 8, 8), None)


def test_mutations_constant_inputs_pytrees_and_symbols():
    path, ep = io_pt2()
    with engine.load(path) as pkg:
        sig = pkg.model.signature
    kinds = {(o.kind, o.target) for o in sig.mutations}
    assert kinds == {(OutputKind.BUFFER_MUTATION, "count"), (OutputKind.USER_INPUT_MUTATION, "items_0")}
    k = next(i for i in sig.user_inputs if i.kind is InputKind.CONSTANT_INPUT)
    assert (k.name, k.value, k.meta) == ("k", 3, None)
    assert str(sig.in_tree) == "((Pair(a=pair_a, b=pair_b), [items_0, items_1], {'w': table_w}, k), {})"
    assert sig.in_tree.children[0].children[0].type == "namedtuple:unit.Pair"
    out = sig.out_tree
    assert out.children[0].type == "dict" and out.children[0].context == ["sum", "parts"]
    assert out.children[2].type == "dataclass:unit.Box" and out.children[2].context == ["w", "tag"]
    assert [leaf.name for leaf in out.leaves()] == [o.name for o in sig.user_outputs]
    (sym, info), = sig.symbols.items()
    assert (info.min, info.max, info.hint) == (2, 64, 4)
    assert str(info) == f"{sym} in [2, 64], hint 4"
    assert pkg.model.signature.user_inputs[0].meta.sizes[0].symbol == sym


def test_module_tree():
    path, _ = feat_pt2()
    with engine.load(path) as pkg:
        m = pkg.model
        tree = m.module_tree()
    assert tree.path == "" and tree.type.endswith("Feat")
    names = [c.path for c in tree.children]
    assert names[:3] == ["conv", "bn", "lin1"] and "lin2" in names
    conv = tree.find("conv")
    assert conv.type == "torch.nn.modules.conv.Conv2d" and conv.nodes == ["conv2d"]
    assert tree.total_nodes() == len(m.nodes)
    assert m.node("conv2d").metadata.module_path == "conv"
    assert m.node("conv2d").metadata.source.file.endswith("unit_models.py")


def test_cond_subgraph_signature():
    path, ep = cond_pt2()
    with engine.load(path) as pkg:
        m = pkg.model
        cond = next(n for n in m.nodes if n.op == "higher_order.cond")
        assert [a.arg.tag for a in cond.inputs][:3] == ["as_tensor", "as_graph", "as_graph"]
        assert m.signature.parameters[0].target == "lin.weight"
