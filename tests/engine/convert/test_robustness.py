"""Converter robustness: hand-edited programs go through open → inspect → build → convert →
write and end in a diagnostic naming the node, a typed error naming the place, or a complete
conversion — never another exception, never silently wrong layer params.

Each case edits the program JSON (or a weight) of a committed fixture: values of the wrong type
where tensors or ints are expected, lists of the wrong length, out-of-range strides, cycles and
dangling references, missing tensor metadata, zero-size tensors, NaN/Inf constants and weights,
an empty graph, a graph with only inputs. The run is :func:`tests.fuzz.oracle.run_pipeline`
(with pass crashes counted as failures) under the fuzzers' time and memory limits.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import engine
from engine.convert import convert
from tests.fixtures import PT2_DIR
from tests.fixtures import zipcraft as zc
from tests.fixtures.malformed import json_edit, members
from tests.fuzz.oracle import guarded, run_pipeline

CNN = PT2_DIR / "cnn_training.pt2"  # conv2d, batch_norm, relu, relu6, max_pool2d, adaptive pool, flatten, linear
TINY = PT2_DIR / "tiny.pt2"  # linear, relu, linear
CONSTANTS = PT2_DIR / "constants.pt2"  # lifted constants, masked_fill(-inf), full_like(nan), gt, where
TINY_WEIGHTS = "tiny/data/weights/model_weights_config.json"


def _graph(doc):
    return doc["graph_module"]["graph"]


def _node(doc, target: str, k: int = 0) -> dict:
    return [n for n in _graph(doc)["nodes"] if n["target"].endswith(target)][k]


def _set_arg(node: dict, name: str, arg) -> None:
    node["inputs"] = [a for a in node["inputs"] if a["name"] != name] + [{"name": name, "arg": arg, "kind": 1}]


def _out(node: dict) -> str:
    return node["outputs"][0]["as_tensor"]["name"]


def _cycle(doc):
    a, b = _node(doc, "relu.default"), _node(doc, "conv2d.default", 1)
    _set_arg(b, "input", {"as_tensor": {"name": _out(a)}})
    _set_arg(a, "self", {"as_tensor": {"name": _out(b)}})


def _no_nodes(doc, outputs: list | None):
    g = _graph(doc)
    g["nodes"] = []
    if outputs is not None:
        g["outputs"] = [{"as_tensor": {"name": n}} for n in outputs]
        specs = doc["graph_module"]["signature"]["output_specs"]
        doc["graph_module"]["signature"]["output_specs"] = [
            {"user_output": {"arg": {"as_tensor": {"name": n}}}} for n in outputs] if outputs else []
        assert specs


def _sizes(doc, name: str, index: int, value: int):
    _graph(doc)["tensor_values"][name]["sizes"][index] = {"as_int": value}


@dataclass(frozen=True)
class Case:
    id: str
    edit: Callable[[dict], None]
    expect: str  #: "diagnostic" (conversion incomplete), "refused" (typed error), "converted"
    words: tuple[str, ...] = ()  #: in the refusal message, or in one diagnostic on ``node``
    node: str = ""
    src: Path = CNN


CASES = [
    # ---- unexpected argument types
    Case("int_where_tensor", lambda d: _set_arg(_node(d, "conv2d.default"), "weight", {"as_int": 3}),
         "diagnostic", ("weight",), "conv2d"),
    Case("string_where_tensor", lambda d: _set_arg(_node(d, "conv2d.default"), "input", {"as_string": "abc"}),
         "diagnostic", ("disagree on the batch size",), "conv2d"),
    Case("bool_where_tensor", lambda d: _set_arg(_node(d, "relu.default"), "self", {"as_bool": True}),
         "refused", ("relu", "shape")),
    Case("none_where_tensor", lambda d: _set_arg(_node(d, "relu.default"), "self", {"as_none": True}),
         "refused", ("relu",)),
    Case("int_list_where_tensor", lambda d: _set_arg(_node(d, "linear.default"), "weight", {"as_ints": [1, 2, 3]}),
         "diagnostic", ("linear",), "linear"),
    Case("tensor_where_int_list", lambda d: _set_arg(_node(d, "conv2d.default"), "stride", {"as_tensor": {"name": "x"}}),
         "refused", ("conv2d", "'stride'", "refers to a tensor")),
    Case("string_where_int", lambda d: _set_arg(_node(d, "conv2d.default"), "groups", {"as_string": "two"}),
         "diagnostic", ("groups='two'",), "conv2d"),
    Case("float_where_int", lambda d: _set_arg(_node(d, "flatten.using_ints"), "start_dim", {"as_float": 1.5}),
         "any"),
    Case("unknown_operator", lambda d: _node(d, "relu.default").update(target="torch.ops.aten.no_such_op.default"),
         "diagnostic", ("no aten converter registered for aten.no_such_op.default",), "relu"),
    Case("garbage_target", lambda d: _node(d, "relu.default").update(target="..."),
         "diagnostic", ("no aten converter",), "relu"),
    # ---- lists of the wrong length, values out of range
    Case("stride_too_long", lambda d: _set_arg(_node(d, "conv2d.default"), "stride", {"as_ints": [1, 1, 1]}),
         "diagnostic", ("stride=[1, 1, 1]", "expected 2"), "conv2d"),
    Case("stride_empty", lambda d: _set_arg(_node(d, "conv2d.default"), "stride", {"as_ints": []}),
         "diagnostic", ("stride=[]",), "conv2d"),
    Case("stride_zero", lambda d: _set_arg(_node(d, "conv2d.default"), "stride", {"as_ints": [0, 0]}),
         "diagnostic", ("stride=[0, 0]", ">= 1"), "conv2d"),
    Case("negative_padding", lambda d: _set_arg(_node(d, "conv2d.default"), "padding", {"as_ints": [-1, -1]}),
         "diagnostic", ("padding=[-1, -1]", ">= 0"), "conv2d"),
    Case("pool_kernel_too_long", lambda d: _set_arg(_node(d, "max_pool2d.default"), "kernel_size",
                                                    {"as_ints": [2, 2, 2, 2, 2]}),
         "diagnostic", ("kernel_size=[2, 2, 2, 2, 2]",), "max_pool2d"),
    Case("pool_stride_zero", lambda d: _set_arg(_node(d, "max_pool2d.default"), "stride", {"as_ints": [0, 0]}),
         "diagnostic", ("stride=[0, 0]",), "max_pool2d"),
    # ---- cycles, dangling and duplicate references
    Case("cycle", _cycle, "refused", ("undefined value",)),
    Case("self_loop", lambda d: _set_arg(_node(d, "relu.default"), "self",
                                         {"as_tensor": {"name": _out(_node(d, "relu.default"))}}),
         "refused", ("relu", "undefined value 'relu'")),
    Case("nodes_reversed", lambda d: _graph(d)["nodes"].reverse(), "refused", ("undefined value",)),
    Case("missing_tensor", lambda d: _set_arg(_node(d, "relu.default"), "self", {"as_tensor": {"name": "nope"}}),
         "refused", ("'nope'",)),
    Case("duplicate_node", lambda d: _graph(d)["nodes"].insert(1, json.loads(json.dumps(_graph(d)["nodes"][0]))),
         "refused", ("redefines value 'conv2d'",)),
    Case("missing_tensor_metadata", lambda d: _graph(d)["tensor_values"].__delitem__(_out(_node(d, "relu.default"))),
         "diagnostic", ("shape None",), "conv2d_1"),
    # ---- zero-size and negative sizes
    Case("zero_batch_input", lambda d: _sizes(d, "x", 0, 0), "any"),
    Case("zero_channel_input", lambda d: _sizes(d, "x", 1, 0), "any"),
    Case("negative_input_dim", lambda d: _sizes(d, "x", 2, -5), "any"),
    # ---- NaN / Inf constants
    Case("nan_eps", lambda d: _set_arg(_node(d, "batch_norm.default"), "eps", {"as_float": math.nan}), "converted"),
    Case("inf_eps", lambda d: _set_arg(_node(d, "batch_norm.default"), "eps", {"as_float": math.inf}), "converted"),
    # constants.pt2 already holds masked_fill(-inf) and full_like(nan), as torch writes them
    Case("nan_scalar_as_torch_writes_it", lambda d: _set_arg(_node(d, "gt.Scalar"), "other", {"as_float": "NaN"}),
         "any", src=CONSTANTS),
    Case("inf_scalar_as_json_literal", lambda d: _set_arg(_node(d, "gt.Scalar"), "other", {"as_float": math.inf}),
         "any", src=CONSTANTS),
    Case("nan_mul_scalar", lambda d: _set_arg(_node(d, "mul.Tensor"), "other", {"as_float": math.nan}),
         "any", src=CONSTANTS),
    # ---- empty graphs
    Case("no_nodes_output_refers_to_removed_node", lambda d: _no_nodes(d, None), "refused", ("undefined value",)),
    Case("no_nodes_output_is_input", lambda d: _no_nodes(d, ["x"]), "converted"),
    Case("only_inputs", lambda d: _no_nodes(d, []), "converted"),
]


def _run(path: Path, out: Path) -> str:
    out.mkdir(exist_ok=True)
    with guarded():
        return run_pipeline(path, out, strict_passes=True)


def _check(case: Case, path: Path, out: Path) -> str:
    outcome = _run(path, out)
    if case.expect == "any":
        return outcome
    if case.expect == "refused":
        assert outcome.startswith("refused: PT2FormatError"), outcome
        for w in case.words:
            assert w in outcome, outcome
    elif case.expect == "diagnostic":
        assert outcome == "incomplete", outcome
        with engine.load(path) as pkg:
            result = convert(pkg)
        reasons = [d.reason for d in result.errors if d.node == case.node or case.node in str(d.node).split(",")]
        assert any(all(w in r for w in case.words) for r in reasons), [str(d) for d in result.errors]
        # --partial writes the rest, with the unconverted node as a custom layer
        assert (out / "fuzzed.ncnn.param").exists()
    else:
        assert outcome == "converted", outcome
        assert sorted(p.name for p in out.iterdir()) == ["fuzzed.ncnn.bin", "fuzzed.ncnn.param",
                                                         "fuzzed.pnnx.bin", "fuzzed.pnnx.param"]
    return outcome


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hand_edited_program(case: Case, tmp_path):
    path = tmp_path / f"{case.id}.pt2"
    model_json = next(m.name for m in members(case.src) if m.name.endswith("models/model.json"))
    path.write_bytes(json_edit(model_json, case.edit, case.src)(tmp_path))
    _check(case, path, tmp_path / "out")


def _tiny_with_weight(tmp_path: Path, fqn: str, sizes: list[int], data: bytes) -> Path:
    """tiny.pt2 with weight ``fqn`` replaced: new sizes in the weights config and the graph, new bytes."""
    ms = members(TINY)
    config = json.loads(next(m.data for m in ms if m.name == TINY_WEIGHTS))
    entry = config["config"][fqn]
    entry["tensor_meta"]["sizes"] = [{"as_int": s} for s in sizes]
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.insert(0, {"as_int": acc})
        acc *= max(s, 1)
    entry["tensor_meta"]["strides"] = strides
    model = json.loads(next(m.data for m in ms if m.name.endswith("models/model.json")))
    graph_name = next(s["parameter"]["arg"]["name"] for s in model["graph_module"]["signature"]["input_specs"]
                      if "parameter" in s and s["parameter"]["parameter_name"] == fqn)
    model["graph_module"]["graph"]["tensor_values"][graph_name]["sizes"] = [{"as_int": s} for s in sizes]
    payload = "tiny/data/weights/" + entry["path_name"]
    out = []
    for m in ms:
        if m.name == TINY_WEIGHTS:
            m = m.with_(data=json.dumps(config).encode())
        elif m.name.endswith("models/model.json"):
            m = m.with_(data=json.dumps(model).encode())
        elif m.name == payload:
            m = m.with_(data=data)
        out.append(m)
    path = tmp_path / "edited.pt2"
    path.write_bytes(zc.build(out))
    return path


@pytest.mark.parametrize("values", [[math.nan] * 32, [math.inf, -math.inf] * 16, [math.nan, math.inf, 0.0, 1.0] * 8],
                         ids=["nan", "inf", "mixed"])
def test_nan_and_inf_weights_are_converted_as_they_are(values, tmp_path):
    """Non-finite weights are data, not a broken file: the model converts and the .bin holds
    exactly those values (fp32 here, as an InnerProduct weight written without fp16)."""
    path = _tiny_with_weight(tmp_path, "fc1.weight", [8, 4], struct.pack("<32f", *values))
    assert _run(path, tmp_path / "out") == "converted"
    with engine.load(path) as pkg:
        convert(pkg).write(tmp_path / "m.param", tmp_path / "m.bin", fp16=False)
    written = np.fromfile(tmp_path / "m.bin", dtype=np.float32)
    want = np.array(values, np.float32)
    assert any(np.array_equal(written[i:i + 32], want, equal_nan=True) for i in range(len(written) - 31))


def test_zero_size_weight_is_handled(tmp_path):
    """fc1.weight stored as [0, 4] (declared consistently in the graph and the weights config):
    read and converted, but no ncnn model can hold an empty weight, so writing it is refused
    naming the layer."""
    path = _tiny_with_weight(tmp_path, "fc1.weight", [0, 4], b"")
    with engine.load(path) as pkg:
        assert pkg.model.tensor("fc1.weight").shape == (0, 4)
    outcome = _run(path, tmp_path / "out")
    assert outcome.startswith("refused: WriteError") and "layer 'p_fc1_weight'" in outcome and "0 values" in outcome, outcome
    assert not list((tmp_path / "out").iterdir())
