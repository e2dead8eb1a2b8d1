"""Which PyTorch value each ncnn blob holds, and in which layout: :func:`map_blobs` (for a graph
that carries provenance, i.e. one this converter produced) and :func:`map_by_name` (for
user-given ncnn files, matched by blob name against a reference mapping).

Rules, for each blob of an ncnn graph (topological order):

* a model input ``in<k>`` is the program value named in ``graph.meta["inputs"]``; the k-th
  output blob of ``graph.meta["outputs"]`` is the program's k-th output;
* an output of a ``Split`` holds what the Split's input holds;
* the *terminal* values of a layer are the tensor values of its provenance from which no other
  node of the provenance can be reached in the ATen graph (a fused conv + batchnorm + relu has
  one: the relu's; a Slice lowering three ``select`` s has three), in program order;
* a blob named after a terminal value is that value; a blob whose name starts with
  ``<terminal>_`` is that terminal (the longest such: ``select_1_sel`` is ``select_1``, not
  ``select``); a layer with one output and no such name holds its last terminal; an output of
  a multi-output layer that names none of them has no counterpart (guessing by position would
  compare a blob with its sibling's value);
* a blob whose value's node also appears in the provenance of a layer downstream (through
  Splits) is *internal*: an intermediate of one ATen node lowered to several layers
  (remainder as ``a - floor(a / b) * b``); it has no PyTorch counterpart;
* the value must be what the layer computes from its inputs: every ATen node between the values
  its inputs hold and the blob's value belongs to the layer (or to the layers without a
  counterpart feeding it), to no layer at all (eliminated no-ops), or only moves data
  (permute, view...). A layer a pass moved elsewhere (a permute run before the MLP it followed)
  keeps its provenance but not its value: it gets no counterpart.

Layout. The ncnn blob of an operand is the PyTorch tensor with its batch dim dropped, in the
same data order — when the operand's shape is the value's (size-1 dims aside). A pass that
re-lays a value out records it, ``operand.meta["aten_layout"] = {"value": <ATen value>, ...}``:
``"dims": [...]`` — the blob holds ``value.permute(dims)``; ``"view_of": shape`` — the operand
was only re-shaped, from ``shape`` (same data order). An operand whose shape is neither is not
the value in its order (a head split whose permute a pass merged into a later layer: (4, 16, 16)
for (4, 2, 16, 8) is a valid re-shaping by size, and the wrong order): it gets no counterpart —
never a comparison in the wrong order. The batch dim is the operand's
(:func:`engine.convert.shapes.batch_dim`), known when its shape is the (permuted) value's.
:mod:`.layout` turns a PyTorch value into the blob's layout.
"""
from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import Callable, Collection

from ..convert.shapes import batch_dim
from ..ir import Graph, Operand, Operator
from ..records import record

log = logging.getLogger(__name__)

SPLIT = "Split"
INPUT_TYPES = ("Input", "pnnx.Input")
#: the operand annotation of a re-laid-out value (see the module docstring)
LAYOUT_KEY = "aten_layout"
#: ATen ops that only move data: allowed between a layer's inputs and its value
DATA_MOVEMENT = frozenset(f"aten.{n}" for n in (
    "permute.default", "transpose.int", "t.default", "view.default", "reshape.default", "_unsafe_view.default",
    "flatten.using_ints", "unflatten.int", "squeeze.dim", "squeeze.dims", "squeeze.default", "unsqueeze.default",
    "contiguous.default", "clone.default", "alias.default", "detach.default", "lift_fresh_copy.default",
    "expand.default", "numpy_T.default", "movedim.int", "swapaxes.default", "swapdims.default"))
#: ATen ops reading only the shape / dtype of their tensor inputs (their results are constants)
SHAPE_ONLY = frozenset(f"aten.{n}" for n in (
    "new_zeros", "new_ones", "new_empty", "new_full", "zeros_like", "ones_like", "empty_like", "full_like",
    "sym_size", "sym_numel", "sym_stride", "size", "_shape_as_tensor", "scalar_tensor"))
#: most layers without a counterpart looked through to find what a layer computes from
MAX_REGION = 64


@record(frozen=True)
class ValueRef:
    """The PyTorch value an ncnn blob stands for, and how to lay it out as the blob."""

    value: str  #: ATen value name (the torch.fx node name)
    node: str  #: the ATen node producing it (the value itself for program inputs)
    how: str  #: ``input`` | ``output`` | ``name`` | ``provenance`` | ``layout`` | ``split``
    dims: tuple[int, ...] | None = None  #: the blob holds ``value.permute(dims)`` (None: the value's order)
    batch: int | None = None  #: dim of the (permuted) value that is the model's batch axis, when known
    #: the graph's shapes say the blob holds the value in this order (else a runtime check decides)
    checked: bool = False


@record
class BlobMap:
    """Blob name → :class:`ValueRef`; ``unmapped`` gives the reason for blobs without one."""

    refs: dict[str, ValueRef]
    unmapped: dict[str, str]

    def get(self, blob: str) -> ValueRef | None:
        return self.refs.get(blob)


def _is_tensor(opd: Operand) -> bool:
    """False for SymInt/SymFloat values, constants and None placeholders."""
    return not (opd.meta.get("none") or "expr" in opd.meta or "const" in opd.meta)


class _AtenIndex:
    """Program order, value producers, consumers and shapes of the ATen graph."""

    def __init__(self, aten: Graph):
        self.order: dict[str, int] = {}
        self.ops: dict[str, Operator] = {}
        self.producer: dict[str, str] = {}  # value name -> node name
        self.values: dict[str, Operand] = {}
        self.users: dict[str, list[str]] = {}  # value name -> node names using it
        self.dynamic: set[str] = set()  # nodes whose tensors depend on a model input
        for k, op in enumerate(aten.ops):
            self.order[op.name] = k
            self.ops[op.name] = op
            for o in op.outputs:
                if _is_tensor(o):
                    self.producer[o.name] = op.name
                    self.values[o.name] = o
            for i in op.inputs:
                self.users.setdefault(i.name, []).append(op.name)
            if op.type == "pnnx.Input" or op.type.rsplit(".", 1)[0] not in SHAPE_ONLY and any(
                    i.producer is not None and i.producer.name in self.dynamic for i in op.inputs if _is_tensor(i)):
                self.dynamic.add(op.name)
        self.inputs = [op.outputs[0].name for op in aten.ops if op.type == "pnnx.Input" and op.outputs]
        self.outputs = [op.inputs[0].name for op in aten.ops if op.type == "pnnx.Output" and op.inputs]

    def tensor_outputs(self, node: str) -> list[str]:
        op = self.ops.get(node)
        return [o.name for o in op.outputs if _is_tensor(o)] if op is not None else []

    def reaches(self, node: str, targets: set[str]) -> bool:
        """Whether any of ``targets`` (node names) uses, directly or not, a value of ``node``."""
        if not targets:
            return False
        last = max(self.order[t] for t in targets)
        stack, seen = [node], {node}
        while stack:
            for v in self.tensor_outputs(stack.pop()):
                for u in self.users.get(v, ()):
                    if u in targets:
                        return True
                    if u not in seen and self.order[u] < last:
                        seen.add(u)
                        stack.append(u)
        return False

    def terminals(self, nodes: list[str]) -> list[str]:
        """Tensor values of ``nodes`` from which no other of ``nodes`` is reached, program order
        (values nothing reads — batch norm's unused statistics — are no layer's result)."""
        inside = set(nodes)
        out = []
        for n in sorted(inside, key=self.order.__getitem__):
            if not self.reaches(n, inside - {n}):
                out.extend(v for v in self.tensor_outputs(n) if self.users.get(v))
        return out

    def computed_from(self, value: str, frontier: set[str], allowed: set[str], constant: Collection[str] = (), *,
                      assigned: set[str]) -> bool:
        """Whether ``value`` is computed from the ``frontier`` values by ``allowed`` nodes, nodes
        no layer claims, data movement and constants only — ``constant``: nodes the conversion
        made constants of (a ``MemoryData`` layer), whatever PyTorch computes them from."""
        if value in frontier:
            return True
        fronts = [self.order[self.producer[f]] for f in frontier if f in self.producer]
        floor = min(fronts) if fronts else 0
        stack, seen = [self.producer.get(value)], set()
        while stack:
            n = stack.pop()
            if n is None:
                return False
            if n in seen or n not in self.dynamic or n in constant:
                continue
            seen.add(n)
            op = self.ops[n]
            if op.type == "pnnx.Input" or self.order[n] < floor:
                return False  # reaches back past the layer's inputs
            if n not in allowed and n in assigned and op.type not in DATA_MOVEMENT:
                return False  # another layer's computation
            for i in _read(op):
                if _is_tensor(i) and i.name not in frontier:
                    stack.append(self.producer.get(i.name))
        return True


def _sole_output(terminals: list[str], idx: "_AtenIndex") -> bool:
    """Whether the last of ``terminals`` is the only one its node computes: a layer named after
    none of the values of a node of several outputs (the values and the indices of a ``topk``
    written out by a pass) holds one of them, and which one is not known."""
    node = idx.producer.get(terminals[-1])
    return sum(idx.producer.get(t) == node for t in terminals) == 1


def _read(op: Operator) -> list[Operand]:
    """The inputs whose values ``op``'s result holds: all of them, but for a copy into a tensor of
    the source's own shape, which holds the source's values alone (MViTv2 writes its attention
    with the relative positions added back into it: ``attn.copy_(view)``), and for the ``*_as``
    ops, whose ``other`` lends only its dtype or shape (RoBERTa's position ids:
    ``cumsum(mask).type_as(mask)``)."""
    if op.type in _COPIES and len(op.inputs) >= 2 and op.inputs[0].shape is not None \
            and _same_shape(op.inputs[0].shape, op.inputs[1].shape):
        return [op.inputs[1]]
    if op.type in _SELF_ONLY and op.inputs:
        return [op.inputs[0]]
    return list(op.inputs)


_COPIES = ("aten.copy_.default", "aten.copy.default")
_SELF_ONLY = ("aten.type_as.default", "aten.expand_as.default", "aten.view_as.default", "aten.reshape_as.default")


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


def _named_terminal(blob: str, terminals: list[str]) -> str | None:
    """The terminal the blob is named after: itself, else the longest ``<terminal>_`` prefix."""
    if blob in terminals:
        return blob
    prefixed = [t for t in terminals if blob.startswith(t + "_")]
    return max(prefixed, key=len) if prefixed else None


def _same_shape(a, b) -> bool:
    return a is not None and b is not None and len(a) == len(b) and all(str(x) == str(y) for x, y in zip(a, b))


def _squeezed(shape) -> list[str]:
    return [str(d) for d in shape if str(d) != "1"]


def _layout(opd: Operand, value: str, idx: _AtenIndex) -> tuple[ValueRef | None, str]:
    """The layout of ``opd`` holding ATen ``value`` as a partial :class:`ValueRef` (``dims``,
    ``batch``, ``checked``), or (None, why) when its shape says it holds the value in another
    order (see the module docstring)."""
    note = opd.meta.get(LAYOUT_KEY)
    note = note if isinstance(note, dict) and note.get("value") == value else {}
    dims = tuple(int(d) for d in note["dims"]) if note.get("dims") is not None else None
    aten = idx.values.get(value)
    shape = None if aten is None or aten.shape is None else list(aten.shape)
    if shape is not None and dims is not None:
        shape = [shape[d] for d in dims] if sorted(dims) == list(range(len(shape))) else None
    own = note.get("view_of", opd.shape)  # a pass that only re-shaped it records the shape before
    if shape is None or own is None:
        return ValueRef(value, value, "", dims, None, False), ""
    if _squeezed(own) != _squeezed(shape):
        return None, (f"holds {value} in another layout (shape {[str(d) for d in own]}, PyTorch's "
                      f"{[str(d) for d in shape]}{f' permuted {list(dims)}' if dims else ''})")
    batch = batch_dim(opd) if "view_of" not in note and _same_shape(opd.shape, shape) else None
    return ValueRef(value, value, "", dims, batch, True), ""


class _Mapper:
    """One :func:`map_blobs` run."""

    def __init__(self, ncnn: Graph, aten: Graph):
        self.idx = _AtenIndex(aten)
        self.refs: dict[str, ValueRef] = {}
        self.unmapped: dict[str, str] = {}
        self.assigned = {n for op in ncnn.ops for n in op.provenance.nodes}
        # the k-th output blob is the program's k-th output (the name recorded beside the blob is
        # the operand's, which a fusion may have replaced: conv + relu keeps the conv's name)
        metas = ncnn.meta.get("outputs", [])
        names = self.idx.outputs if len(self.idx.outputs) == len(metas) else [d["name"] for d in metas]
        self.outputs = {d["blob"]: name for d, name in zip(metas, names)}
        for d in ncnn.meta.get("inputs", []):
            self.refs[d["blob"]] = ValueRef(d["name"], d["name"], "input")

    def ref(self, opd: Operand, value: str, how: str) -> ValueRef | None:
        """The reference (None, with the reason in ``unmapped``, when the layout differs)."""
        layout, why = _layout(opd, value, self.idx)
        if layout is None:
            self.unmapped[opd.name] = why
            return None
        return replace(layout, node=self.idx.producer.get(value, value), how=how)

    def set_ref(self, opd: Operand, value: str, how: str) -> None:
        ref = self.ref(opd, value, how)
        if ref is not None:
            self.refs[opd.name] = ref

    def region(self, op: Operator) -> tuple[set[str], set[str], set[str]] | None:
        """(values the layer's computation starts from, ATen nodes it may use, nodes of those
        made constants): through inputs without a counterpart to the layers producing them. None
        past :data:`MAX_REGION`."""
        found = sources(op, lambda b: b.name in self.refs)
        if found is None:
            return None
        blobs, layers = found
        allowed = set(op.provenance.nodes).union(*(p.provenance.nodes for p in layers))
        # RoBERTa's token types, a gather of a zero buffer by position: a MemoryData of zeros
        constant = set().union(*(p.provenance.nodes for p in layers if not p.inputs))
        return {self.refs[b.name].value for b in blobs}, allowed, constant

    def layer(self, op: Operator) -> None:
        idx = self.idx
        nodes = [n for n in op.provenance.nodes if n in idx.order]
        terminals = idx.terminals(nodes)
        region = None
        for o in op.outputs:
            if o.name in self.outputs:
                self.set_ref(o, self.outputs[o.name], "output")
                continue
            note = o.meta.get(LAYOUT_KEY)
            if isinstance(note, dict) and note.get("value") in idx.producer:
                value, how = note["value"], "layout"  # a pass re-laid it out and said which value
            else:
                value = _named_terminal(o.name, terminals)
                how = "name" if value == o.name else "provenance"
            if value is None and len(op.outputs) == 1 and terminals and _sole_output(terminals, idx):
                value = terminals[-1]
            if value is None and not nodes and o.name in idx.producer:
                value, how = o.name, "name"  # no provenance (a hand-built graph): the name alone
            if value is None:
                self.unmapped[o.name] = ("no ATen value in the layer's provenance" if not terminals else
                                         "an output of a multi-output layer named after none of its values")
                continue
            node = idx.producer[value]
            if nodes and any(node in c.provenance.nodes for c in _downstream_layers(o)):
                self.unmapped[o.name] = f"intermediate of {node}, lowered to several layers"
                continue
            if nodes:
                region = region or self.region(op)
                if region is None or not idx.computed_from(value, *region, assigned=self.assigned):
                    self.unmapped[o.name] = (f"holds no value of PyTorch's program: the layer does not compute "
                                             f"{value} from its inputs (moved or re-laid out by a pass)")
                    continue
            self.set_ref(o, value, how)

    def run(self, ncnn: Graph) -> BlobMap:
        for op in ncnn.ops:
            if op.type in INPUT_TYPES:
                for o in op.outputs:
                    if o.name in self.refs:
                        self.set_ref(o, self.refs.pop(o.name).value, "input")
                    else:
                        self.unmapped[o.name] = "model input not named in the graph"
            elif op.type == SPLIT and op.inputs:
                src = op.inputs[0].name
                for o in op.outputs:
                    if src in self.refs:
                        self.refs[o.name] = replace(self.refs[src], how="split")
                    else:
                        self.unmapped[o.name] = self.unmapped.get(src, "split of a blob without counterpart")
            else:
                self.layer(op)
        return BlobMap(self.refs, self.unmapped)


def map_blobs(ncnn: Graph, aten: Graph) -> BlobMap:
    """Map every blob of ``ncnn`` (a graph from this converter, with provenance) to the ATen
    value of ``aten`` it holds, with its layout."""
    return _Mapper(ncnn, aten).run(ncnn)


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
    (from converting the same program) knows keeps its value and layout; a ``<blob>_split_<k>``
    holds what ``<blob>`` holds; ``in<k>`` / ``out<k>`` are the program's k-th user input /
    output (an input layer's blob named otherwise is the user input of the same position); any
    blob the reference left without a value keeps none; any other blob named after an ATen
    value is that value (layout checked when compared)."""
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
                same = known.get(f"in{n_inputs}")  # the converted model's input of that position
                refs[o.name] = same if same is not None and same.value == value else ValueRef(value, value, "input")
            elif o.name in known:
                refs[o.name] = known[o.name]
            elif op.type == SPLIT and op.inputs and op.inputs[0].name in refs:
                refs[o.name] = replace(refs[op.inputs[0].name], how="split")
            elif reference is not None and o.name in reference.unmapped and _io_ref(o.name, idx) is None:
                # the conversion made this blob and found it holds no value as it stands (Swin's
                # ``reshape`` blob is its windows in another layout): its name says no more
                unmapped[o.name] = reference.unmapped[o.name]
            elif o.name in idx.producer:
                refs[o.name] = ValueRef(o.name, idx.producer[o.name], "name")
            elif (ref := _io_ref(o.name, idx)) is not None:
                refs[o.name] = ref
            else:
                unmapped[o.name] = "blob name matches no ATen value"
        n_inputs += op.type in INPUT_TYPES
    return BlobMap(refs, unmapped)


def sources(op: Operator, known: Callable[[Operand], bool],
            edge: Callable[[Operand], bool] | None = None) -> tuple[list[Operand], list[Operator]] | None:
    """The blobs ``op`` computes from that ``known`` accepts — its inputs, and through an input it
    does not accept the inputs of the layer producing that one — and the layers gone through.
    At a model input it does not accept, or past :data:`MAX_REGION` layers, the blob is taken
    too if ``edge`` accepts it; else the answer is None."""
    found: list[Operand] = []
    through: list[Operator] = []
    stack, seen = list(op.inputs), set()
    while stack:
        b = stack.pop()
        if b.name in seen:
            continue
        seen.add(b.name)
        if known(b):
            found.append(b)
            continue
        p = b.producer
        if p is None or p.type in INPUT_TYPES or len(through) >= MAX_REGION:
            if edge is None or not edge(b):
                return None
            found.append(b)
            continue
        through.append(p)
        stack.extend(p.inputs)
    return found, through
