"""Unit tests of engine.reader.decode: program JSON → schema objects, versions, errors."""
from __future__ import annotations

import copy
import json
import math

import pytest

from engine.errors import PT2FormatError
from engine.reader import schema as S
from engine.reader.decode import decode_payload_config, decode_program
from tests.engine.reader.unit_models import cond_pt2, feat_pt2, io_pt2, members, model_member, tiny_pt2

M = "r/models/model.json"


def _doc(pt2) -> dict:
    path, _ = pt2()
    return json.loads(members(path)[model_member(path)])


def _decode(doc) -> S.Program:
    return decode_program(json.dumps(doc).encode(), M)


def _fails(doc, *needles) -> PT2FormatError:
    with pytest.raises(PT2FormatError) as e:
        decode_program(doc if isinstance(doc, bytes) else json.dumps(doc).encode(), M)
    assert e.value.member == M
    for n in needles:
        assert n in e.value.reason, e.value.reason
    return e.value


def _node(prog: S.Program, op: str) -> S.Node:
    return next(n for n in prog.graph.nodes if n.op == op)


def test_torch_made_arguments_decode_to_typed_values():
    path, ep = feat_pt2()
    prog = decode_program(members(path)[model_member(path)], M)
    assert prog.schema_version == S.SchemaVersion(8, 20)
    assert prog.dialect == "TRAINING" and prog.torch_version.startswith("2.13")
    assert [n.op for n in prog.graph.nodes][:3] == ["aten.conv2d.default", "aten.batch_norm.default",
                                                    "aten.gelu.default"]
    assert _node(prog, "aten.gelu.default").input("approximate") == S.Argument("as_string", "tanh")
    mf = _node(prog, "aten.contiguous.default").input("memory_format")
    assert mf.tag == "as_memory_format" and mf.value is S.MemoryFormat.CHANNELS_LAST
    up = _node(prog, "aten.upsample_nearest2d.vec")
    assert up.input("scale_factors") == S.Argument("as_floats", [2.0, 2.0])
    assert up.input("output_size").tag == "as_none" and up.input("output_size").value is None
    to = [n for n in prog.graph.nodes if n.op == "aten.to.dtype"]
    assert {n.input("dtype").value for n in to} >= {S.ScalarType.FLOAT, S.ScalarType.DOUBLE}
    cat = _node(prog, "aten.cat.default").input("tensors")
    assert cat.tag == "as_tensors" and all(isinstance(t, S.TensorRef) for t in cat.value)
    idx = _node(prog, "aten.index.Tensor").input("indices")
    assert idx.tag == "as_optional_tensors" and idx.value[:2] == [None, None]
    assert idx.value[2] == S.TensorRef("idx")
    zeros = _node(prog, "aten.zeros.default")
    assert zeros.input("device").value == S.Device("cpu")
    layouts = [n.input("layout") for n in prog.graph.nodes if n.input("layout") is not None]
    assert layouts and all(a.tag == "as_layout" and a.value is S.Layout.STRIDED for a in layouts)
    assert _node(prog, "aten.where.ScalarOther").input("other") == S.Argument("as_float", 0.5)
    # every node input names a value defined before it
    torch_ops = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"
                 and "getitem" not in str(n.target)]
    assert [n.target for n in prog.graph.nodes] == ["torch.ops." + t if not t.startswith("_") else t
                                                    for t in torch_ops]


def test_symbolic_sizes_and_sym_int_arguments():
    prog = _decode(_doc(io_pt2))
    x = prog.graph.tensor_values["pair_a"]
    assert isinstance(x.sizes[0], S.SymExpr) and x.sizes[0].symbol and x.sizes[0].hint == 4
    assert not x.is_static and x.sizes[1] == 3
    views = [n for n in prog.graph.nodes if n.op == "aten.view.default"]
    sym = [a for n in views for a in n.input("size").value if isinstance(a, S.SymRef)]
    assert sym and all(s.kind == "int" for s in sym)
    assert prog.range_constraints[x.sizes[0].symbol] == S.RangeConstraint(2, 64)


def test_subgraph_arguments():
    prog = _decode(_doc(cond_pt2))
    cond = _node(prog, "higher_order.cond")
    graphs = [a.arg.value for a in cond.inputs if a.arg.tag == "as_graph"]
    assert len(graphs) == 2 and all(isinstance(g.graph, S.Graph) for g in graphs)
    assert any(n.op == "aten.linear.default" for g in graphs for n in g.graph.nodes)


def _inject(doc, nodes_json):
    doc = copy.deepcopy(doc)
    doc["graph_module"]["graph"]["nodes"][1:1] = nodes_json
    return doc


def test_every_documented_argument_tag():
    doc = _doc(tiny_pt2)
    x = doc["graph_module"]["graph"]["inputs"][-1]["as_tensor"]["name"]
    producer = {"target": "test.produce", "inputs": [], "metadata": {}, "name": "produce",
                "outputs": [{"as_sym_bool": {"as_name": "sb"}}, {"as_sym_float": {"as_name": "sf"}},
                            {"as_tensor": {"name": "t2"}}]}
    args = {
        "none_new": {"as_none": True}, "none_old": {"as_none": []},
        "t": {"as_tensor": {"name": x}}, "ts": {"as_tensors": [{"name": x}, {"name": "t2"}]},
        "i": {"as_int": -3}, "is": {"as_ints": [1, 2]}, "f": {"as_float": "Infinity"},
        "fs": {"as_floats": ["-Infinity", "NaN", 1, 2.5]}, "s": {"as_string": "hi"},
        "ss": {"as_strings": ["a", "b"]}, "b": {"as_bool": True}, "bs": {"as_bools": [True, False]},
        "si": {"as_sym_int": {"as_int": 4}}, "sis": {"as_sym_ints": [{"as_int": 1}, {"as_int": 2}]},
        "sb": {"as_sym_bool": {"as_name": "sb"}}, "sbs": {"as_sym_bools": [{"as_bool": False}, {"as_name": "sb"}]},
        "sf": {"as_sym_float": {"as_name": "sf"}}, "sfs": {"as_sym_floats": [{"as_float": 1.5}, {"as_name": "sf"}]},
        "st": {"as_scalar_type": 13}, "mf": {"as_memory_format": 2}, "ly": {"as_layout": 7},
        "dv": {"as_device": {"type": "cpu", "index": 0}},
        "ot": {"as_optional_tensor": {"as_tensor": {"name": x}}}, "on": {"as_optional_tensor": {"as_none": True}},
        "ots": {"as_optional_tensors": [{"as_none": True}, {"as_tensor": {"name": x}}]},
        "op": {"as_operator": "aten.add.Tensor"}, "cx": {"as_complex": {"real": 1.0, "imag": -2}},
        "il": {"as_int_lists": [[1, 2], []]}, "fl": {"as_float_lists": [[0.5], ["Infinity"]]},
        "nt": {"as_nested_tensors": [[{"name": x}], [{"name": "t2"}, {"name": x}]]},
        "sa": {"as_string_to_argument": {"k": {"as_int": 1}, "v": {"as_tensor": {"name": x}}}},
    }
    consumer = {"target": "test.consume", "outputs": [], "metadata": {}, "name": "consume",
                "inputs": [{"name": k, "arg": v, "kind": 2} for k, v in args.items()]}
    prog = _decode(_inject(doc, [producer, consumer]))
    n = next(n for n in prog.graph.nodes if n.name == "consume")
    v = {a.name: a.arg.value for a in n.inputs}
    assert v["none_new"] is None and v["none_old"] is None
    assert v["t"] == S.TensorRef(x) and v["ts"] == [S.TensorRef(x), S.TensorRef("t2")]
    assert v["i"] == -3 and v["is"] == [1, 2] and v["f"] == math.inf
    assert v["fs"][0] == -math.inf and math.isnan(v["fs"][1]) and v["fs"][2:] == [1.0, 2.5]
    assert v["s"] == "hi" and v["ss"] == ["a", "b"] and v["b"] is True and v["bs"] == [True, False]
    assert v["si"] == 4 and v["sis"] == [1, 2]
    assert v["sb"] == S.SymRef("sb", "bool") and v["sbs"] == [False, S.SymRef("sb", "bool")]
    assert v["sf"] == S.SymRef("sf", "float") and v["sfs"] == [1.5, S.SymRef("sf", "float")]
    assert v["st"] is S.ScalarType.BFLOAT16 and v["mf"] is S.MemoryFormat.CHANNELS_LAST
    assert v["ly"] is S.Layout.STRIDED and v["dv"] == S.Device("cpu", 0)
    assert v["ot"] == S.TensorRef(x) and v["on"] is None and v["ots"] == [None, S.TensorRef(x)]
    assert v["op"] == S.OperatorRef("aten.add.Tensor") and v["cx"] == complex(1, -2)
    assert v["il"] == [[1, 2], []] and v["fl"] == [[0.5], [math.inf]]
    assert v["nt"] == [[S.TensorRef(x)], [S.TensorRef("t2"), S.TensorRef(x)]]
    assert v["sa"]["k"] == S.Argument("as_int", 1) and v["sa"]["v"].value == S.TensorRef(x)
    assert n.input_names().count(x) == 7 and n.inputs[0].kind == 2


def test_wrong_json_types_name_the_json_path():
    doc = _doc(tiny_pt2)
    x = doc["graph_module"]["graph"]["inputs"][-1]["as_tensor"]["name"]
    bad = copy.deepcopy(doc)
    bad["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = []
    e = _fails(bad, "graph.nodes[0].inputs[0].arg: expected an object, got an array")
    assert str(e).startswith(f"{M}: graph.nodes[0]")
    bad = copy.deepcopy(doc)
    bad["graph_module"]["graph"]["nodes"][0]["inputs"][1]["arg"] = {"as_tensor": {"name": 5}}
    _fails(bad, "graph.nodes[0].inputs[1].arg.as_tensor.name: expected a string, got a number")
    bad = copy.deepcopy(doc)
    bad["graph_module"]["graph"]["tensor_values"][x] = {"dtype": "float", "sizes": [], "strides": []}
    _fails(bad, f"graph.tensor_values.{x}.dtype", "expected an integer")
    bad = copy.deepcopy(doc)
    bad["graph_module"]["graph"]["tensor_values"][x]["dtype"] = 99
    _fails(bad, "unknown dtype code 99")
    bad = copy.deepcopy(doc)
    bad["graph_module"]["graph"]["nodes"] = {"not": "a list"}
    _fails(bad, "graph.nodes: expected an array, got an object")
    bad = copy.deepcopy(doc)
    bad["graph_module"]["signature"]["input_specs"][0] = {"parameter": {}, "buffer": {}}
    _fails(bad, "signature.input_specs[0]", "one-key union")
    bad = copy.deepcopy(doc)
    del bad["graph_module"]["graph"]["nodes"][0]["target"]
    _fails(bad, "graph.nodes[0]: missing key 'target'")
    bad = copy.deepcopy(doc)
    bad["range_constraints"] = {"s0": {"min_val": "two", "max_val": None}}
    _fails(bad, "range_constraints.s0.min_val")
    bad = copy.deepcopy(doc)
    bad["graph_module"]["graph"]["nodes"][0]["metadata"] = {"stack_trace": 3}
    _fails(bad, "graph.nodes[0].metadata.stack_trace: expected a string")
    _fails([1, 2], "top level")


def test_unknown_keys_are_ignored_and_unknown_tags_refused():
    doc = _doc(tiny_pt2)
    doc["future_field"] = {"x": 1}
    doc["graph_module"]["graph"]["nodes"][0]["future"] = [1]
    for tv in doc["graph_module"]["graph"]["tensor_values"].values():
        tv["future"] = None
    prog = _decode(doc)
    assert prog.graph.nodes[0].op == "aten.linear.default"
    bad = _inject(doc, [{"target": "t.x", "inputs": [{"name": "a", "arg": {"as_foo": 1}}],
                         "outputs": [], "metadata": {}}])
    _fails(bad, "unknown argument tag 'as_foo'")
    bad["schema_version"] = {"major": 8, "minor": 99}  # a newer minor may add tags: kept raw
    n = next(n for n in _decode(bad).graph.nodes if n.target == "t.x")
    assert n.inputs[0].arg == S.Argument("as_foo", 1)


@pytest.mark.parametrize("version, ok", [({"major": 9, "minor": 0}, False), ({"major": 8, "minor": 40}, True),
                                         (1, True), ({"major": 5, "minor": 1}, True), ("8.20", False)])
def test_schema_versions(version, ok):
    doc = _doc(tiny_pt2)
    doc["schema_version"] = version
    if ok:
        _decode(doc)
    else:
        _fails(doc, "schema")


def test_newer_major_message():
    doc = _doc(tiny_pt2)
    doc["schema_version"] = {"major": 9, "minor": 1}
    _fails(doc, "schema version 9.1 is newer than this reader supports")


def _to_schema_1(doc) -> dict:
    """Rewrite a current document into torch 2.1's schema 1 forms."""
    doc = copy.deepcopy(doc)
    gm = doc["graph_module"]
    g = gm["graph"]
    doc["schema_version"] = 1
    doc["dialect"] = doc.pop("verifiers")[0]
    doc.pop("torch_version")
    g["tensor_values"] = {k: {"meta": dict(v, storage_offset=v["storage_offset"]["as_int"])}
                          for k, v in g["tensor_values"].items()}
    for n in g["nodes"]:
        n.pop("name", None)
        for a in n["inputs"]:
            a.pop("kind", None)
            if "as_none" in a["arg"]:
                a["arg"] = {"as_none": []}
    sig = {"inputs_to_parameters": {}, "inputs_to_buffers": {}, "user_inputs": [], "user_outputs": [],
           "buffers_to_mutate": {}, "backward_signature": None}
    for spec in gm["signature"]["input_specs"]:
        (kind, body), = spec.items()
        if kind == "parameter":
            sig["inputs_to_parameters"][body["arg"]["name"]] = body["parameter_name"]
        elif kind == "buffer":
            sig["inputs_to_buffers"][body["arg"]["name"]] = body["buffer_name"]
        else:
            arg = body["arg"]
            sig["user_inputs"].append(arg["name"] if "name" in arg else arg["as_tensor"]["name"])
    for spec in gm["signature"]["output_specs"]:
        sig["user_outputs"].append(spec["user_output"]["arg"]["as_tensor"]["name"])
    gm["signature"] = sig
    root = gm["module_call_graph"][0]["signature"]
    gm["call_spec"] = {"in_spec": root["in_spec"], "out_spec": root["out_spec"]}
    gm["module_call_graph"] = [e for e in gm["module_call_graph"] if e["fqn"]]
    for k in ("metadata", "treespec_namedtuple_fields"):
        gm.pop(k)
    doc["range_constraints"] = {}
    doc["equality_constraints"] = []
    return doc


def test_schema_1_document_decodes_like_the_current_one():
    doc = _doc(feat_pt2)
    new = _decode(doc)
    old = _decode(_to_schema_1(doc))
    assert old.schema_version == S.SchemaVersion(1, 0) and old.torch_version is None
    assert old.dialect == new.dialect == "TRAINING"
    assert [n.op for n in old.graph.nodes] == [n.op for n in new.graph.nodes]
    assert [n.name for n in old.graph.nodes] == [n.name for n in new.graph.nodes]
    assert [(s.kind, s.name, s.target) for s in old.signature.input_specs] == \
        [(s.kind if s.kind is not S.InputKind.TENSOR_CONSTANT else S.InputKind.USER_INPUT,
          s.name, s.target if s.kind is not S.InputKind.TENSOR_CONSTANT else None)
         for s in new.signature.input_specs]
    assert old.graph.tensor_values == new.graph.tensor_values
    assert old.module_call_graph[0].fqn == "" and old.module_call_graph[0].signature.in_spec
    up_old = next(n for n in old.graph.nodes if n.op == "aten.upsample_nearest2d.vec")
    assert up_old.input("output_size").value is None


def test_schema_5_buffers_default_persistent_and_dialect():
    doc = _doc(feat_pt2)
    doc["schema_version"] = {"major": 5, "minor": 1}
    doc["dialect"] = doc.pop("verifiers")[0]
    for spec in doc["graph_module"]["signature"]["input_specs"]:
        spec.get("buffer", {}).pop("persistent", None)
    prog = _decode(doc)
    assert prog.dialect == "TRAINING"
    assert all(s.persistent is True for s in prog.signature.input_specs if s.kind is S.InputKind.BUFFER)


def test_undefined_references_are_refused_naming_the_node():
    doc = _doc(tiny_pt2)
    bad = copy.deepcopy(doc)
    bad["graph_module"]["graph"]["nodes"][1]["inputs"][0]["arg"] = {"as_tensor": {"name": "ghost"}}
    e = _fails(bad, "graph.nodes[1]", "'relu'", "undefined value 'ghost'")
    assert "aten.relu.default" in e.reason
    bad = copy.deepcopy(doc)
    nodes = bad["graph_module"]["graph"]["nodes"]
    nodes[0], nodes[1] = nodes[1], nodes[0]  # uses a value before it is produced
    _fails(bad, "graph.nodes[0]", "undefined value")
    bad = copy.deepcopy(doc)
    bad["graph_module"]["graph"]["outputs"] = [{"as_tensor": {"name": "ghost"}}]
    _fails(bad, "graph.outputs", "undefined value 'ghost'")
    bad = copy.deepcopy(doc)
    x = bad["graph_module"]["graph"]["inputs"][-1]["as_tensor"]["name"]
    bad["graph_module"]["graph"]["nodes"][1]["outputs"] = [{"as_tensor": {"name": x}}]
    _fails(bad, f"redefines value '{x}'")
    bad = copy.deepcopy(doc)
    bad["graph_module"]["signature"]["output_specs"][0]["user_output"]["arg"]["as_tensor"]["name"] = "ghost"
    _fails(bad, "signature.output_specs[0]", "ghost")


def test_deep_nesting_is_bounded():
    deep = b'{"schema_version": {"major": 8, "minor": 20}, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    _fails(deep, "nested too deeply")
    doc = _doc(tiny_pt2)
    arg = {"as_int": 1}
    for _ in range(50):
        arg = {"as_string_to_argument": {"k": arg}}
    _fails(_inject(doc, [{"target": "t.x", "inputs": [{"name": "a", "arg": arg}], "outputs": [],
                          "metadata": {}}]), "nested more than")


@pytest.mark.parametrize("data, needle", [(b"{not json", "invalid JSON"), (b"\xff\xfe\x00{", "JSON"),
                                          (b'{"graph_module": 1}', "missing schema_version")])
def test_invalid_documents(data, needle):
    _fails(data, needle)


def test_range_limits():
    doc = _doc(tiny_pt2)
    doc["range_constraints"] = {"a": {"min_val": 2, "max_val": None}, "b": {"min_val": "-Infinity",
                                                                            "max_val": "Infinity"},
                                "c": {"min_val": 0, "max_val": 9223372036854775806}}
    rc = _decode(doc).range_constraints
    assert rc == {"a": S.RangeConstraint(2, None), "b": S.RangeConstraint(None, None),
                  "c": S.RangeConstraint(0, None)}


def test_node_names_before_schema_8_17_come_from_outputs():
    doc = _doc(tiny_pt2)
    names = [n["name"] for n in doc["graph_module"]["graph"]["nodes"]]
    for n in doc["graph_module"]["graph"]["nodes"]:
        del n["name"]
    assert [n.name for n in _decode(doc).graph.nodes] == names
    doc["graph_module"]["graph"]["nodes"].append({"target": "torch.ops.aten._assert_async.msg",
                                                  "inputs": [], "outputs": [], "metadata": {}})
    doc["graph_module"]["graph"]["nodes"].append({"target": "torch.ops.aten._assert_async.msg",
                                                  "inputs": [], "outputs": [], "metadata": {}})
    assert [n.name for n in _decode(doc).graph.nodes[-2:]] == ["_assert_async_msg", "_assert_async_msg_1"]


def test_payload_config():
    path, _ = tiny_pt2()
    cfg_name = model_member(path, "model_weights_config.json")
    cfg = decode_payload_config(members(path)[cfg_name], cfg_name)
    assert set(cfg) == {"0.weight", "0.bias"}
    w = cfg["0.weight"]
    assert w.is_param and not w.use_pickle and w.tensor_meta.sizes == (2, 4)
    assert w.path_name.startswith("weight_")
    for bad, needle in [({"config": {"w": {"path_name": "../x"}}}, "invalid payload path"),
                        ({"config": []}, "config: expected an object"),
                        ({"config": {"w": {"path_name": "w", "tensor_meta": 3}}}, "w.tensor_meta")]:
        with pytest.raises(PT2FormatError, match=needle.replace("[", r"\[")):
            decode_payload_config(json.dumps(bad), cfg_name)
