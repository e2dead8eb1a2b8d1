"""Name the model's inputs and outputs as pnnx does (``in0``, ``in1``... and ``out0``...),
remove the output markers, and record the mapping from these names to the program's own
input/output names in ``graph.meta["inputs"]`` / ``graph.meta["outputs"]``
(lists of ``{"blob", "name"}``; an input also has ``"dtype"``, the element type its Mat must
hold: ``float32``, or ``int32`` for token ids)."""
from __future__ import annotations

from .manager import graph_pass


@graph_pass("name_blobs", "name user inputs in0.. and outputs out0.. like pnnx, drop output markers")
def run(graph, cx):
    inputs, outputs = [], []
    for k, op in enumerate(graph.ops_of_type("Input")):
        opd = op.outputs[0]
        original = opd.name
        graph.rename_op(op, f"__in{k}")
        graph.rename_operand(opd, f"__in{k}")
        inputs.append((op, opd, original))
    for k, op in enumerate(graph.ops_of_type("Output")):
        opd = op.inputs[0]
        outputs.append((opd, opd.meta.get("user_output_name", opd.name)))
        graph.remove_input(op, 0)
        graph.remove_op(op)
    wanted = {f"in{k}" for k in range(len(inputs))} | {f"out{k}" for k in range(len(outputs))}
    for opd in list(graph.operands.values()):  # free the names we are about to use
        if opd.name in wanted:
            graph.rename_operand(opd, opd.name + "_")
    for op in list(graph.ops):
        if op.name in wanted:
            graph.rename_op(op, op.name + "_")
    for k, (op, opd, original) in enumerate(inputs):
        graph.rename_op(op, f"in{k}")
        graph.rename_operand(opd, f"in{k}")
    seen = set()
    named = []
    for k, (opd, original) in enumerate(outputs):
        if id(opd) in seen or any(opd is x for _, x, _ in inputs):
            # the same blob returned twice, or an input returned as is: keep its name
            named.append({"blob": opd.name, "name": original})
            continue
        seen.add(id(opd))
        graph.rename_operand(opd, f"out{k}")
        named.append({"blob": opd.name, "name": original})
    graph.meta["inputs"] = [{"blob": opd.name, "name": original, "dtype": op.meta.get("ncnn_dtype", "float32")}
                            for op, opd, original in inputs]
    graph.meta["outputs"] = named
