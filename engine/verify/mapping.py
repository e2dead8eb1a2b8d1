"""Which PyTorch value each ncnn blob holds: :func:`map_blobs` (for a graph that carries
provenance, i.e. one this converter produced) and :func:`map_by_name` (for user-given ncnn files,
matched by blob name against a reference mapping).

Rules, for each blob of an ncnn graph, in order:

* a model input ``in<k>`` / output ``out<k>`` is the program value named in
  ``graph.meta["inputs"]`` / ``["outputs"]``;
* an output of a ``Split`` holds what the Split's input holds;
* a blob named after an ATen value produced by a node of its layer's provenance, and not used by
  another node of that provenance, is that value (the lowering keeps the ATen operand names);
* otherwise (a fused chain: conv + batchnorm + relu is one layer whose blob keeps the conv's
  name) the blob holds the value of the LAST node of the layer's provenance, in program order,
  that is not consumed inside the provenance (the k-th such value for a layer's k-th output);
* a blob whose chosen node also appears in the provenance of a layer downstream (through Splits)
  is *internal*: an intermediate of one ATen node lowered to several layers (remainder as
  ``a - floor(a / b) * b``); it has no PyTorch counterpart and is not compared.

The mapping is by value name only; sizes are checked when values are compared.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace

from ..ir import Graph, Operand, Operator

log = logging.getLogger(__name__)

SPLIT = "Split"
INPUT_TYPES = ("Input", "pnnx.Input")


@dataclass(frozen=True)
class ValueRef:
    """The PyTorch value an ncnn blob stands for."""

    value: str  #: ATen value name (the torch.fx node name)
    node: str  #: the ATen node producing it (the value itself for program inputs)
    how: str  #: ``input`` | ``output`` | ``name`` | ``provenance`` | ``split``


@dataclass
class BlobMap:
    """Blob name → :class:`ValueRef`; ``unmapped`` gives the reason for blobs without one."""

    refs: dict[str, ValueRef]
    unmapped: dict[str, str]

    def get(self, blob: str) -> ValueRef | None:
        return self.refs.get(blob)


class _AtenIndex:
    """Program order, value producers and value consumers of the ATen graph."""

    def __init__(self, aten: Graph):
        self.order: dict[str, int] = {}
        self.ops: dict[str, Operator] = {}
        self.producer: dict[str, str] = {}  # value name -> node name
        self.users: dict[str, set[str]] = {}  # value name -> node names using it
        for k, op in enumerate(aten.ops):
            self.order[op.name] = k
            self.ops[op.name] = op
            for o in op.outputs:
                if _is_tensor(o):
                    self.producer[o.name] = op.name
            for i in op.inputs:
                self.users.setdefault(i.name, set()).add(op.name)
        self.inputs = [op.outputs[0].name for op in aten.ops if op.type == "pnnx.Input" and op.outputs]
        self.outputs = [op.inputs[0].name for op in aten.ops if op.type == "pnnx.Output" and op.inputs]

    def tensor_outputs(self, node: str) -> list[str]:
        op = self.ops.get(node)
        return [o.name for o in op.outputs if _is_tensor(o)] if op is not None else []


def _is_tensor(opd: Operand) -> bool:
    """False for SymInt/SymFloat values, constants and None placeholders."""
    return not (opd.meta.get("none") or "expr" in opd.meta or "const" in opd.meta)


def _sinks(nodes: list[str], idx: _AtenIndex) -> list[str]:
    """Tensor values of ``nodes`` not consumed by another node of ``nodes``, last node first."""
    inside = set(nodes)
    out: list[str] = []
    for n in sorted(nodes, key=lambda n: idx.order[n], reverse=True):
        for v in idx.tensor_outputs(n):
            if not (idx.users.get(v, set()) & (inside - {n})):
                out.append(v)
    return out


def _downstream_layers(opd: Operand) -> list[Operator]:
    """Layers using ``opd``, looking through Split layers."""
    out: list[Operator] = []
    stack = list(opd.consumers)
    seen: set[int] = set()
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        if c.type == SPLIT:
            for o in c.outputs:
                stack.extend(o.consumers)
        else:
            out.append(c)
    return out


def map_blobs(ncnn: Graph, aten: Graph) -> BlobMap:
    """Map every blob of ``ncnn`` (a graph from this converter, with provenance) to the ATen
    value of ``aten`` it holds."""
    idx = _AtenIndex(aten)
    refs: dict[str, ValueRef] = {}
    unmapped: dict[str, str] = {}
    outputs = {d["blob"]: d["name"] for d in ncnn.meta.get("outputs", [])}
    for d in ncnn.meta.get("inputs", []):
        refs[d["blob"]] = ValueRef(d["name"], d["name"], "input")
    for op in ncnn.ops:
        if op.type in INPUT_TYPES:
            for o in op.outputs:
                if o.name not in refs:
                    unmapped[o.name] = "model input not named in the graph"
            continue
        if op.type == SPLIT and op.inputs:
            src = op.inputs[0].name
            for o in op.outputs:
                if src in refs:
                    refs[o.name] = replace(refs[src], how="split")
                else:
                    unmapped[o.name] = unmapped.get(src, "split of a blob without counterpart")
            continue
        nodes = [n for n in op.provenance.nodes if n in idx.order]
        sinks = _sinks(nodes, idx)
        for k, o in enumerate(op.outputs):
            if o.name in outputs:
                value = outputs[o.name]
                refs[o.name] = ValueRef(value, idx.producer.get(value, value), "output")
                continue
            if o.name in idx.producer and (o.name in sinks or not nodes):
                refs[o.name] = ValueRef(o.name, idx.producer[o.name], "name")
            elif sinks:
                value = sinks[k] if 1 < len(op.outputs) <= len(sinks) else sinks[0]
                refs[o.name] = ValueRef(value, idx.producer[value], "provenance")
            else:
                unmapped[o.name] = "no ATen value in the layer's provenance"
                continue
            node = refs[o.name].node
            if any(node in c.provenance.nodes for c in _downstream_layers(o)):
                del refs[o.name]
                unmapped[o.name] = f"intermediate of {node}, lowered to several layers"
    return BlobMap(refs, unmapped)


def _io_ref(blob: str, idx: _AtenIndex) -> ValueRef | None:
    m = re.fullmatch(r"(in|out)(\d+)", blob)
    if m is None:
        return None
    names = idx.inputs if m.group(1) == "in" else idx.outputs
    k = int(m.group(2))
    if k >= len(names):
        return None
    value = names[k]
    return ValueRef(value, idx.producer.get(value, value), "input" if m.group(1) == "in" else "output")


def map_by_name(graph: Graph, reference: BlobMap | None, aten: Graph) -> BlobMap:
    """Map the blobs of a user-given ncnn graph (no provenance): a blob the reference mapping
    (from converting the same program) knows keeps its value; a ``<blob>_split_<k>`` holds what
    ``<blob>`` holds; ``in<k>`` / ``out<k>`` are the program's k-th user input / output (an
    input layer's blob named otherwise is the user input of the same position); any other blob
    named after an ATen value is that value."""
    idx = _AtenIndex(aten)
    refs: dict[str, ValueRef] = {}
    unmapped: dict[str, str] = {}
    known = reference.refs if reference is not None else {}
    n_inputs = 0
    for op in graph.ops:
        for o in op.outputs:
            if op.type in INPUT_TYPES and o.name not in known and _io_ref(o.name, idx) is None \
                    and n_inputs < len(idx.inputs):  # an input named otherwise: inputs in order
                value = idx.inputs[n_inputs]
                refs[o.name] = ValueRef(value, value, "input")
            elif o.name in known:
                refs[o.name] = known[o.name]
            elif op.type == SPLIT and op.inputs and op.inputs[0].name in refs:
                refs[o.name] = replace(refs[op.inputs[0].name], how="split")
            elif o.name in idx.producer:
                refs[o.name] = ValueRef(o.name, idx.producer[o.name], "name")
            elif (ref := _io_ref(o.name, idx)) is not None:
                refs[o.name] = ref
            elif reference is not None and o.name in reference.unmapped:
                unmapped[o.name] = reference.unmapped[o.name]
            else:
                unmapped[o.name] = "blob name matches no ATen value"
        n_inputs += op.type in INPUT_TYPES
    return BlobMap(refs, unmapped)
