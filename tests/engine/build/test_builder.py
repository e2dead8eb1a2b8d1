"""build_graph on real torch.export output, both dialects: op order, inputs/params conventions,
defaults, multi-output and in-place ops, symbolic shapes, attributes, provenance, text form."""
from __future__ import annotations


import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

from engine.build import build_graph
from engine.ir import Graph
from tests.engine.build.models import Deep

DIALECTS = ("training", "core")


class Net(nn.Module):
    """Conv without bias, a bare F.conv2d with 2 args, BN, in-place ops, cat/stack, pool, linear."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.Hardtanh(0.0, 6.0, inplace=True)
        self.w2 = nn.Parameter(torch.randn(8, 8, 1, 1))
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, 4)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        z = nn.functional.conv2d(y, self.w2)
        z.add_(y)
        torch.relu_(z)
        c = torch.cat([y, z], 1)
        s = torch.stack([y, z], 0).sum(0)
        p = self.pool(c).mean((2, 3))
        return self.fc(p), s


def node_types(ep) -> list[tuple[str, str]]:
    return [(n.name, n.op) for n in ep.nodes]


@pytest.fixture(scope="module", params=DIALECTS)
def net(request, export):
    torch.manual_seed(0)
    module = Net().eval()
    ep, tep = export(module, (torch.randn(1, 3, 8, 8),), dialect=request.param)
    return request.param, module, ep, tep, build_graph(ep)


def test_lint_and_op_order_follow_the_exported_graph(net):
    dialect, module, ep, tep, g = net
    g.lint()
    assert g.meta["dialect"] == ("TRAINING" if dialect == "training" else "ATEN")
    kinds = [op.type for op in g.ops]
    n_attr = len(ep.signature.inputs) - 1
    assert kinds[:n_attr] == ["pnnx.Attribute"] * n_attr
    assert kinds[n_attr] == "pnnx.Input" and g.ops[n_attr].name == "x"
    body = g.ops[n_attr + 1:-2]
    assert [(op.name, op.type) for op in body] == node_types(ep)
    assert [op.meta["target"] for op in body] == [n.target for n in ep.nodes]
    # the torch graph (the source of truth) has the same call_function nodes in the same order
    fx_nodes = [n.name for n in tep.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)]
    assert [op.name for op in body] == fx_nodes
    assert [op.type for op in g.ops[-2:]] == ["pnnx.Output", "pnnx.Output"]
    assert [op.inputs[0].name for op in g.output_ops()] == [o.name for o in ep.signature.outputs]


def test_attributes_are_lazy_and_equal_the_state_dict(net):
    _, module, ep, _, g = net
    attrs = g.ops_of_type("pnnx.Attribute")
    assert all(not op.attrs["data"].loaded for op in attrs), "building must not read weights"
    state = module.state_dict()
    assert {op.params["target"] for op in attrs} == set(state)
    for op in attrs:
        fqn = op.params["target"]
        expected = state[fqn].numpy()
        assert op.params["kind"] == ("parameter" if fqn in dict(module.named_parameters()) else "buffer")
        if op.params["kind"] == "buffer":
            assert op.params["persistent"] is True
        assert op.attrs["data"].shape == expected.shape
        assert op.outputs[0].shape == list(expected.shape)
        np.testing.assert_array_equal(op.attrs["data"].data, expected)
    assert g.find_op("p_conv_weight").attrs["data"].dtype == "f32"
    assert g.find_op("b_bn_num_batches_tracked").outputs[0].dtype == "i64"


def test_conv_defaults_and_absent_optional_bias(net):
    dialect, *_, g = net
    if dialect == "training":
        conv = g.find_op("conv2d")  # nn.Conv2d(bias=False): bias passed explicitly as None
        assert conv.type == "aten.conv2d.default"
        assert conv.input_names == ["input", "weight"]
        assert conv.params == {"bias": None, "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1}
        bare = g.find_op("conv2d_1")  # F.conv2d(y, w2): only two arguments in the node
        assert bare.input_names == ["input", "weight"]
        assert bare.meta["defaulted"] == ["bias", "stride", "padding", "dilation", "groups"]
        assert bare.params == {"bias": None, "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}
    else:
        convs = g.ops_of_type("aten.convolution.default")
        assert len(convs) == 2 and all(c.input_names == ["input", "weight"] for c in convs)
        assert list(convs[1].params) == ["bias", "stride", "padding", "dilation", "transposed", "output_padding",
                                         "groups"]
        assert convs[1].params["bias"] is None and convs[1].params["transposed"] is False


def test_tensor_list_arguments(net):
    _, _, ep, _, g = net
    cat = g.ops_of_type("aten.cat.default")[0]
    assert cat.input_names == ["tensors.0", "tensors.1"]
    assert "tensors" not in cat.params and cat.params["dim"] == 1
    stack = g.ops_of_type("aten.stack.default", "aten.cat.default")[-1]
    assert stack.input_names[:2] == ["tensors.0", "tensors.1"]


def test_multi_output_nodes(net):
    dialect, _, ep, _, g = net
    if dialect == "training":  # multi-output forms appear after run_decompositions()
        assert len(g.ops_of_type("aten.max_pool2d.default")[0].outputs) == 1
        return
    bn = g.ops_of_type("aten._native_batch_norm_legit_no_training.default")[0]
    node = next(n for n in ep.nodes if n.name == bn.name)
    assert [o.name for o in bn.outputs] == node.output_names() and len(bn.outputs) == 3
    assert bn.outputs[0].shape == [1, 8, 8, 8] and bn.outputs[0].dtype == "f32"
    pool = g.ops_of_type("aten.max_pool2d_with_indices.default")[0]
    assert [o.dtype for o in pool.outputs] == ["f32", "i64"]
    assert pool.params["stride"] == [2, 2]


def test_inplace_ops_are_made_functional(net):
    dialect, *_, g = net
    if dialect == "core":
        assert not [op for op in g.ops if op.type.endswith("_.default") or op.type.endswith("_.Tensor")]
        return
    relu_ = g.ops_of_type("aten.relu_.default")[0]
    add_ = g.ops_of_type("aten.add_.Tensor")[0]
    assert add_.meta["inplace"] == {"self": "conv2d_1"} and relu_.meta["inplace"] == {"self": add_.outputs[0].name}
    # torch still calls the mutated tensor `conv2d_1` after add_/relu_; the IR reads relu_'s output
    cat = g.ops_of_type("aten.cat.default")[0]
    assert cat.inputs[1] is relu_.outputs[0]
    hardtanh_ = g.ops_of_type("aten.hardtanh_.default")[0]
    assert hardtanh_.params == {"min_val": 0.0, "max_val": 6.0}
    assert g.find_op("conv2d_1").inputs[0] is hardtanh_.outputs[0]


def test_provenance_and_source(net):
    _, _, _, _, g = net
    conv = next(op for op in g.ops if op.type in ("aten.conv2d.default", "aten.convolution.default"))
    assert conv.provenance.nodes == (conv.name,)
    assert conv.provenance.modules == ("conv",)
    assert [f.path for f in conv.meta["module_stack"]] == ["", "conv"]
    fc = g.ops[-3]
    assert fc.provenance.modules == ("fc",)
    relu = next(op for op in g.ops if op.type in ("aten.relu_.default", "aten.relu.default"))
    assert relu.provenance.modules == ("",)
    assert relu.meta["source"].file.endswith("test_builder.py")
    assert g.find_op("p_fc_weight").provenance.modules == ("fc",)


def test_text_form_is_deterministic_and_round_trips(net, export):
    dialect, module, ep, _, g = net
    text = g.to_text()
    assert build_graph(ep).to_text() == text
    back = Graph.from_text(text)
    back.lint()
    assert back.to_text() == text


class Dynamic(nn.Module):
    def forward(self, x):
        n, c, h, w = x.shape
        y = x.view(n, c, h * w // 2, -1)
        return y * (h / 2), torch.cat([x, -x], 2)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dynamic_shapes(export, dialect):
    ep, tep = export(Dynamic(), (torch.randn(2, 3, 10, 4),), dialect=dialect,
                     dynamic_shapes={"x": {0: Dim("batch", min=1, max=8), 2: Dim("h", min=2, max=64)}})
    g = build_graph(ep)
    g.lint()
    x = g.find_op("x").outputs[0]
    sb, sh = x.shape[0], x.shape[2]
    assert isinstance(sb, str) and isinstance(sh, str) and x.shape[1:4:2] == [3, 4]
    assert x.meta["shape_hint"] == [2, 3, 10, 4]
    assert g.meta["symbols"][sb] == {"min": 1, "max": 8, "hint": 2}
    assert g.meta["symbols"][sh] == {"min": 2, "max": 64, "hint": 10}
    sizes = g.ops_of_type("aten.sym_size.int")
    assert sorted(op.params["dim"] for op in sizes) == [0, 2]
    assert all(op.outputs[0].dtype == "i64" and op.outputs[0].shape == [] for op in sizes)
    view = g.ops_of_type("aten.view.default")[0]
    size = view.params["size"]
    assert size[1] == 3 and size[3] == -1 and all(isinstance(s, str) and s.startswith("%") for s in size[::2])
    assert view.input_names == ["self", "size.0", "size.2"]
    assert [f"%{i.name}" for i in view.inputs[1:]] == size[::2]
    assert view.outputs[0].shape == [sb, 3, f"2*{sh}", 2]
    assert view.outputs[0].meta["shape_hint"] == [2, 3, 20, 2]
    arith = [op for op in g.ops if op.type.startswith("_operator.")]
    assert {op.type for op in arith} >= {"_operator.mul", "_operator.floordiv", "_operator.truediv"}
    div = g.ops_of_type("_operator.truediv")[0]
    assert div.outputs[0].dtype == "f32" and div.outputs[0].meta["hint"] == 5.0
    mul = g.ops_of_type("aten.mul.Tensor")[0]
    assert mul.input_names == ["self", "other"] and mul.params["other"] == "%" + div.outputs[0].name
    assert g.ops_of_type("aten.cat.default")[0].outputs[0].shape == [sb, 3, f"2*{sh}", 4]
    text = g.to_text()
    assert Graph.from_text(text).to_text() == text


def test_text_round_trip_with_an_operand_used_twice(export):
    class Twice(nn.Module):
        def forward(self, x):
            return torch.cat([x, x], 1)

    ep, _ = export(Twice(), (torch.randn(1, 2),))
    g = build_graph(ep)
    assert g.ops_of_type("aten.cat.default")[0].input_names == ["tensors.0", "tensors.1"]
    text = g.to_text()
    assert Graph.from_text(text).to_text() == text


class TrainBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("scale", torch.full((4,), 2.0), persistent=False)

    def forward(self, x, k: float):
        return self.bn(x) * self.scale * k


@pytest.mark.parametrize("dialect", DIALECTS)
def test_buffer_mutations_and_constant_inputs(export, dialect):
    ep, _ = export(TrainBN().train(), (torch.randn(3, 4), 3.0), dialect=dialect)
    g = build_graph(ep)
    g.lint()
    assert g.meta["constant_inputs"] == {"k": 3.0}
    assert g.find_op("b_scale").params == {"target": "scale", "kind": "buffer", "persistent": False}
    targets = {m["target"]: m for m in g.meta["mutations"]}
    assert "bn.num_batches_tracked" in targets
    m = targets["bn.num_batches_tracked"]
    assert m["kind"] == "buffer_mutation"
    assert g.find_op(m["node"]).meta["mutation"] is m
    assert len(g.output_ops()) == 1  # mutations are not user outputs


class Branchy(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))


def test_higher_order_op_is_kept_and_marked(export):
    ep, _ = export(Branchy(), (torch.randn(3),))
    g = build_graph(ep)
    g.lint()
    cond = g.ops_of_type("higher_order.cond")[0]
    assert "not supported yet" in cond.meta["unsupported_reason"]
    assert set(cond.meta["subgraphs"]) == {"arg1", "arg2"}
    assert cond.params == {"arg1": "true_graph_0", "arg2": "false_graph_0"}
    assert cond.input_names == ["arg0", "arg3.0"]


def test_large_graph_builds_and_lints(export):
    """A 1,500-node graph builds into a consistent IR (how fast is a benchmark question:
    tests/benchmarks/bench_build.py)."""
    ep, _ = export(Deep(300).eval(), (torch.randn(1, 8, 4, 4),))
    assert len(ep.nodes) >= 1500
    g = build_graph(ep)
    g.lint()
    assert sum(1 for op in g.ops if "target" in op.meta) == len(ep.nodes)


@torch.library.custom_op("pt2ncnn_test::scale", mutates_args=())
def _scale(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * k


@_scale.register_fake
def _(x, k):
    return torch.empty_like(x)


class CustomAndViewMutation(nn.Module):
    def forward(self, x):
        y = x.view(-1)
        y.mul_(2)  # mutates x through a view
        return _scale(x, 3.0)


def test_custom_op_without_schema_and_inplace_on_a_view(export):
    ep, _ = export(CustomAndViewMutation(), (torch.randn(2, 2),))
    g = build_graph(ep)
    g.lint()
    custom = g.ops_of_type("pt2ncnn_test.scale.default")[0]
    assert custom.meta["no_schema"] is True
    assert custom.input_names == ["x"] and custom.params == {"k": 3.0}
    mul_ = g.ops_of_type("aten.mul_.Tensor")[0]
    assert mul_.meta["inplace_on_view"] == "view" and mul_.meta["inplace"] == {"self": "view"}


class HalfLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3).to(torch.bfloat16)

    def forward(self, x):
        return self.fc(x)


def test_half_weights_keep_their_dtype_unless_float32_is_asked(export):
    module = HalfLinear()
    ep, _ = export(module, (torch.randn(2, 4, dtype=torch.bfloat16),))
    stored = build_graph(ep).find_op("p_fc_weight")
    assert stored.attrs["data"].dtype == "bf16" and stored.outputs[0].dtype == "bf16"
    assert "stored_dtype" not in stored.meta
    upcast = build_graph(ep, float32_weights=True).find_op("p_fc_weight")
    assert upcast.attrs["data"].dtype == "f32" and upcast.outputs[0].dtype == "f32"
    assert upcast.meta["stored_dtype"] == "bf16"
    np.testing.assert_array_equal(upcast.attrs["data"].data, module.fc.weight.float().detach().numpy())


def test_a_use_before_definition_is_a_typed_error(export):
    from engine.errors import PT2FormatError

    ep, _ = export(Dynamic(), (torch.randn(2, 3, 10, 4),))
    nodes = ep.graph.nodes
    last = nodes[-1]
    assert last.op == "aten.cat.default"
    nodes.insert(0, nodes.pop())  # a corrupted file: cat before the neg it reads
    try:
        with pytest.raises(PT2FormatError, match=rf"node {last.name}: uses 'neg', which is not defined before it"):
            build_graph(ep)
    finally:
        nodes.append(nodes.pop(0))


def test_filled_defaults_are_private_copies(net):
    _, _, ep, _, _ = net
    filled = [(op, k) for op in build_graph(ep).ops for k in op.meta.get("defaulted", ())
              if isinstance(op.params[k], list)]
    assert filled, "expected an operator with a defaulted list argument"
    op, key = filled[0]
    op.params[key].append(99)  # a converter editing params in place ...
    from engine.build import schemas

    assert 99 not in schemas.get(op.type).argument(key).default  # ... leaves the table alone
