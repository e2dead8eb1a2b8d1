"""Name the model's inputs and outputs as pnnx does (``in0``, ``in1``... and ``out0``...),
remove the output markers, and record the mapping from these names to the program's own
input/output names in ``graph.meta["inputs"]`` / ``graph.meta["outputs"]``: lists of
``{"blob", "name", "shape", "torch_dtype", "dtype", "batch_dim"}`` — the PyTorch shape and dtype
of the value, the element type its ncnn Mat holds (``float32``; ``int32`` for an input of token
ids), and which of its dims is carried as the ncnn Mat's batch count (``ncnn.Mat(a,
batch_index=b)`` to feed it, ``mat.numpy(batch_index=b)`` to read it; None: every dim is in the
blob).

Every output gets its own ``out<k>`` blob: an output that is a model input returned as it is
(a reduction over the batch axis, a squeeze of it: nothing to compute in ncnn) or the same
blob as an earlier output is read through an ncnn ``Noop`` layer writing ``out<k>``."""
from __future__ import annotations

from ..convert.shapes import batch_dim
from .manager import graph_pass


def _entry(opd, original: str, value: dict | None = None, mat_dtype: str = "float32") -> dict:
    """``value``: the output's own view (its marker's, see ``converters.structural``). A 1-D
    value of one element along its batch axis (a diffusion UNet's timestep ``[1]``) is the whole
    one-element blob: no batch axis to feed or read it by (ncnn's Python ``Mat(a, batch_index=0)``
    refuses a 1-D array)."""
    if value is None:
        value = {"shape": list(opd.shape) if opd.shape is not None else None, "torch_dtype": opd.dtype,
                 "batch_dim": batch_dim(opd)}
    if value.get("shape") == [1] and value.get("batch_dim") == 0:
        value = {**value, "batch_dim": None}
    return {"blob": opd.name, "name": original, **value, "dtype": mat_dtype}


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
        outputs.append((opd, opd.meta.get("user_output_name", opd.name), op.meta.get("value")))
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
    latest: dict[int, object] = {}  # id(value) → the last blob named for it
    named = []
    for k, (opd, original, value) in enumerate(outputs):
        if id(opd) in latest or any(opd is x for _, x, _ in inputs):
            # the same blob returned twice, or an input returned as is: a Noop gives it its name,
            # reading the blob named last for the value (a blob read by two layers needs a Split)
            copy = graph.new_operand(f"out{k}", dtype=opd.dtype, shape=opd.shape)
            copy.meta.update({key: opd.meta[key] for key in ("batch", "batch_dim") if key in opd.meta})
            src = opd.producer
            noop = graph.add_op("Noop", graph.unique_op_name(f"out{k}_noop"), [latest.get(id(opd), opd)], [copy],
                                provenance=src.provenance if src is not None else None)
            latest[id(opd)] = copy
            if src is not None:
                noop.meta.update({key: src.meta[key] for key in ("source", "module_stack") if key in src.meta})
            named.append(_entry(copy, original, value))
            continue
        latest[id(opd)] = opd
        graph.rename_operand(opd, f"out{k}")
        named.append(_entry(opd, original, value))
    graph.meta["inputs"] = [_entry(opd, original, mat_dtype=op.meta.get("ncnn_dtype", "float32"))
                            for op, opd, original in inputs]
    graph.meta["outputs"] = named
