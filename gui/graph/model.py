"""What a graph view shows, as plain data: :class:`DisplayGraph` made from an IR graph.

No Qt here. One :class:`DisplayNode` per IR operator (kind, short label, output shape text,
category for colour, module path for grouping, status for problems) and one
:class:`DisplayEdge` per operand use (shape and dtype for the tooltip). The same builder serves
the three vocabularies (ATen, pnnx, ncnn), since they share the IR. :meth:`DisplayGraph.without`
drops a kind of node (parameters) for the "hide parameters" toggle, and
:meth:`DisplayGraph.layout_input` turns the graph into the input of the layered layout.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from engine.ir import Graph, Operator

from .layout import LayoutInput

#: Node kinds, drawn differently.
OP, INPUT, OUTPUT, PARAM = "op", "input", "output", "param"

_INPUT_TYPES = {"pnnx.Input", "Input"}
_OUTPUT_TYPES = {"pnnx.Output", "Output"}
_PARAM_TYPES = {"pnnx.Attribute", "MemoryData"}

#: Category → keywords matched against the lower-cased op type, first match wins.
_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("problem", ("pnnx.unsupported",)),
    ("conv", ("conv", "deconvolution")),
    ("linear", ("linear", "matmul", "addmm", "bmm", "gemm", "innerproduct", "mm.default", "einsum", "baddbmm")),
    ("attention", ("attention", "softmax", "sdpa")),
    ("norm", ("norm", "batchnorm", "instancenorm", "groupnorm", "layernorm")),
    ("activation", ("relu", "gelu", "sigmoid", "tanh", "silu", "swish", "hardswish", "hardsigmoid", "mish", "elu",
                    "clamp", "clip", "hardtanh", "prelu", "softplus", "erf", "leaky")),
    ("pool", ("pool", "pooling", "adaptive")),
    ("shape", ("view", "reshape", "permute", "transpose", "flatten", "squeeze", "unsqueeze", "expand", "slice",
               "select", "cat", "concat", "split", "chunk", "getitem", "stack", "contiguous", "clone", "flip",
               "crop", "pad", "repeat", "tile", "unbind", "narrow", "sym_size", "t.default", "alias", "detach",
               "dropout", "to.dtype", "_to_copy", "type_as")),
    ("reduce", ("sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "reduction", "var", "std", "prod",
                "topk", "sort", "cumsum")),
    ("math", ("add", "sub", "mul", "div", "pow", "sqrt", "rsqrt", "exp", "log", "neg", "abs", "binaryop",
              "unaryop", "expression", "where", "eq", "ne", "lt", "gt", "le", "ge", "floor", "ceil", "round",
              "operator.", "sym_")),
)


@functools.cache  # a pure function of the type; a graph repeats a few dozen types
def op_category(op_type: str) -> str:
    """Colour category of an operator type in any vocabulary (``aten.conv2d.default``,
    ``nn.Conv2d``, ``Convolution`` → ``conv``)."""
    t = op_type.lower()
    for cat, words in _CATEGORIES:
        if any(w in t for w in words):
            return cat
    return "other"


def short_type(op_type: str) -> str:
    """Readable op type: ``aten.conv2d.default`` → ``conv2d``, ``aten.add.Tensor`` →
    ``add.Tensor``; pnnx and ncnn types are kept."""
    if op_type.startswith("aten."):
        t = op_type[5:]
        return t[: -len(".default")] if t.endswith(".default") else t
    if op_type.startswith("_operator."):
        return "operator." + op_type[len("_operator."):]
    return op_type


def shape_text(shape: Sequence[Any] | None, dtype: str | None = None) -> str:
    """``[1, 16, 32, 32]`` → ``1×16×32×32``; unknown dims are ``?``; a scalar is ``scalar``."""
    if shape is None:
        return dtype or ""
    if len(shape) == 0:
        return "scalar" + (f" {dtype}" if dtype and dtype != "f32" else "")
    dims = "×".join("?" if d is None else str(d) for d in shape)
    return dims + (f" {dtype}" if dtype and dtype != "f32" else "")


def elide(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class DisplayNode:
    """One operator as drawn."""

    name: str  #: operator name (unique in its graph)
    kind: str  #: OP | INPUT | OUTPUT | PARAM
    type: str  #: the full operator type
    label: str  #: first line (short type, or the tensor name for a parameter)
    detail: str  #: second line (output shape)
    category: str  #: colour category (see :func:`op_category`)
    module: str = ""  #: innermost module path ("" for the root)
    #: the module *call* the node belongs to: its path with ``@k`` after each module called for
    #: the k+1-th time (``layer1.0.relu@1``: the second call of that ReLU); groups are made of calls,
    #: so a module used twice gets two boxes and the flow stays top-down
    scope: str = ""
    provenance: tuple[str, ...] = ()  #: ATen node names the operator came from
    problem: str = ""  #: why the operator is unsupported / failed ("" when fine)
    ghost: bool = False  #: drawn faded (an operator a pass removed)


@dataclass
class DisplayEdge:
    """One operand flowing from ``src`` to ``dst`` (node indices)."""

    src: int
    dst: int
    operand: str
    shape: str
    dtype: str
    from_param: bool = False


@dataclass
class DisplayGraph:
    """Nodes and edges of one view, plus the IR graph they were made from (``source``; None for
    a graph parsed from a pass snapshot without it)."""

    nodes: list[DisplayNode]
    edges: list[DisplayEdge]
    vocabulary: str = "aten"  #: "aten" | "pnnx" | "ncnn" | "snapshot"
    source: Graph | None = None
    index: dict[str, int] = field(default_factory=dict)
    unused_params: int = 0  #: parameters no operator reads (not drawn)
    #: module path → qualified class (``torch.nn.modules.linear.Linear``), for group labels
    module_types: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.index:
            self.index = {n.name: i for i, n in enumerate(self.nodes)}

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, name: str) -> DisplayNode | None:
        i = self.index.get(name)
        return None if i is None else self.nodes[i]

    def operator(self, name: str) -> Operator | None:
        """The IR operator behind a node (None for ghosts or snapshot graphs)."""
        if self.source is None:
            return None
        return _op_index(self.source).get(name)

    def without(self, kinds: Iterable[str]) -> "DisplayGraph":
        """A copy without the nodes of the given kinds (and their edges)."""
        drop = set(kinds)
        keep = [i for i, n in enumerate(self.nodes) if n.kind not in drop]
        if len(keep) == len(self.nodes):
            return self
        remap = {old: new for new, old in enumerate(keep)}
        edges = [DisplayEdge(remap[e.src], remap[e.dst], e.operand, e.shape, e.dtype, e.from_param)
                 for e in self.edges if e.src in remap and e.dst in remap]
        return DisplayGraph([self.nodes[i] for i in keep], edges, self.vocabulary, self.source,
                            module_types=self.module_types)

    def layout_input(self, sizes: Sequence[tuple[float, float]]) -> LayoutInput:
        """Layout input; parameters may sit as satellites above the operator they feed."""
        return LayoutInput(sizes, [(e.src, e.dst) for e in self.edges], [n.kind == PARAM for n in self.nodes])

    def neighbours(self) -> tuple[list[list[int]], list[list[int]]]:
        """(predecessors, successors) of every node, by index."""
        preds: list[list[int]] = [[] for _ in self.nodes]
        succs: list[list[int]] = [[] for _ in self.nodes]
        for e in self.edges:
            if e.dst not in succs[e.src]:
                succs[e.src].append(e.dst)
                preds[e.dst].append(e.src)
        return preds, succs


_OP_INDEX_CACHE: dict[int, tuple[Graph, dict[str, Operator]]] = {}


def _op_index(g: Graph) -> dict[str, Operator]:
    hit = _OP_INDEX_CACHE.get(id(g))
    if hit is None or hit[0] is not g or len(hit[1]) != len(g.ops):
        hit = (g, {op.name: op for op in g.ops})
        if len(_OP_INDEX_CACHE) > 16:
            _OP_INDEX_CACHE.clear()
        _OP_INDEX_CACHE[id(g)] = hit
    return hit[1]


def kind_of_type(op_type: str) -> str:
    """Node kind of an operator type: an input, an output, a weight (parameter, buffer,
    constant, ncnn MemoryData) or an operator."""
    if op_type in _INPUT_TYPES:
        return INPUT
    if op_type in _OUTPUT_TYPES:
        return OUTPUT
    if op_type in _PARAM_TYPES:
        return PARAM
    return OP


def node_kind(op: Operator) -> str:
    return kind_of_type(op.type)


def problem_of(op: Operator) -> str:
    """The reason an operator is marked unsupported by the engine, if any."""
    for key in ("unsupported", "unsupported_reason", "failed"):
        v = op.meta.get(key)
        if v:
            return v if isinstance(v, str) else key
    if op.type == "pnnx.Unsupported":
        return "unsupported input"
    return ""


_CALL = re.compile(r"@(\d+)$")


def call_scope(stack: Sequence[Any]) -> str:
    """The call-qualified path of a ``module_stack`` (outermost frame first): each module's
    path relative to its caller, with ``@k`` when the frame's key says it is the module's
    k+1-th call (``torch.export`` keys a repeated call ``L__self__layer1.0.relu@1``)."""
    scope, outer = "", ""
    for f in stack:
        path = getattr(f, "path", "")
        if not path:
            continue
        m = _CALL.search(getattr(f, "key", "") or "")
        suffix = f"@{m.group(1)}" if m and m.group(1) != "0" else ""
        if outer and scope and path.startswith(outer + "."):
            scope = f"{scope}.{path[len(outer) + 1:]}{suffix}"
        else:
            scope = path + suffix
        outer = path
    return scope


def plain_path(scope: str) -> str:
    """``blk@1.c1@1`` → ``blk.c1``."""
    return re.sub(r"@\d+", "", scope)


def scope_label(scope: str) -> str:
    """``layer1.0.mlp@1`` → ``layer1.0.mlp (call 2)``."""
    calls = re.findall(r"@(\d+)", scope)
    return plain_path(scope) + (f" (call {int(calls[-1]) + 1})" if calls else "")


def _module_of(op: Operator, scopes: dict[int, str]) -> tuple[str, str]:
    """(module path, call scope) of an operator."""
    first = op.provenance.modules[0] if op.provenance.modules else ""
    stack = op.meta.get("module_stack")
    if stack:
        scope = scopes.get(id(stack))
        if scope is None:
            scope = scopes[id(stack)] = call_scope(stack)
        path = getattr(stack[-1], "path", "")
        if not first or first == path:
            return path, scope
    return first, first


def _node_for(op: Operator, problems: Mapping[str, str], scopes: dict[int, str]) -> DisplayNode:
    kind = node_kind(op)
    out = op.outputs[0] if op.outputs else None
    if kind == PARAM:
        # the module path is the consumer's: the last component says enough ("weight")
        label = str(op.params.get("target") or op.name).rsplit(".", 1)[-1]
        detail = shape_text(out.shape, out.dtype) if out is not None else ""
        if not detail and op.attrs:
            a = next(iter(op.attrs.values()))
            detail = shape_text(a.shape, a.dtype)
    elif kind == INPUT:
        label = op.name
        detail = shape_text(out.shape, out.dtype) if out is not None else ""
    elif kind == OUTPUT:
        label = "output" if op.name.startswith("pnnx_output") else op.name
        src = op.inputs[0] if op.inputs else None
        detail = shape_text(src.shape, src.dtype) if src is not None else ""
    else:
        label = short_type(op.type)
        detail = shape_text(out.shape, out.dtype) if out is not None else ""
        if len(op.outputs) > 1:
            detail += f"  (+{len(op.outputs) - 1})"
    problem = problems.get(op.name) or problem_of(op)
    if kind in (INPUT, OUTPUT):
        category = "io"
    elif kind == PARAM:  # parameter, buffer or lifted constant: drawn a little differently
        category = {"buffer": "buffer", "constant": "constant"}.get(str(op.params.get("kind")), "param")
    else:
        category = op_category(op.type)
    module, scope = _module_of(op, scopes)
    return DisplayNode(op.name, kind, op.type, label, detail, category, module, scope, tuple(op.provenance.nodes),
                       problem)


def display_graph(g: Graph, vocabulary: str, problems: Mapping[str, str] | None = None,
                  ghosts: Sequence[Operator] = ()) -> DisplayGraph:
    """The display graph of IR graph ``g``. ``problems`` maps operator names to a reason
    (diagnostics), ``ghosts`` are operators of an earlier graph drawn faded (a pass removed
    them); their edges connect to operands of ``g`` with the same names."""
    problems = problems or {}
    nodes: list[DisplayNode] = []
    producer: dict[str, int] = {}
    ops = list(g.ops)
    # ghosts go right after the operator that produced their first input, to keep the order
    # topological enough for the layout
    ghost_after: dict[str, list[Operator]] = {}
    for gop in ghosts:
        anchor = next((i.producer.name for i in gop.inputs if i.producer is not None), "")
        ghost_after.setdefault(anchor, []).append(gop)
    ordered: list[tuple[Operator, bool]] = [(gop, True) for gop in ghost_after.pop("", [])]
    for op in ops:
        ordered.append((op, False))
        ordered.extend((gop, True) for gop in ghost_after.pop(op.name, []))
    for rest in ghost_after.values():
        ordered.extend((gop, True) for gop in rest)

    unused = 0
    scopes: dict[int, str] = {}
    for op, ghost in ordered:
        if node_kind(op) == PARAM and not any(o.consumers for o in op.outputs):
            unused += 1  # e.g. BatchNorm's num_batches_tracked: listed in Tensors, not drawn
            continue
        node = _node_for(op, problems, scopes)
        node.ghost = ghost
        if ghost and node.name in producer:
            continue
        idx = len(nodes)
        nodes.append(node)
        for o in op.outputs:
            producer.setdefault(o.name, idx)
    index = {n.name: i for i, n in enumerate(nodes)}
    edges: list[DisplayEdge] = []
    for op, ghost in ordered:
        dst = index.get(op.name)
        if dst is None:
            continue
        for i in op.inputs:
            src = producer.get(i.name)
            if src is None or src == dst:
                continue
            edges.append(DisplayEdge(src, dst, i.name, shape_text(i.shape), i.dtype or "",
                                     nodes[src].kind == PARAM))
    return DisplayGraph(nodes, edges, vocabulary, g, index, unused_params=unused, module_types=module_types(ops))


def module_types(ops: Iterable[Operator]) -> dict[str, str]:
    """Module path → class, from the operators' ``module_stack`` (lowered operators inherit
    it from the ATen nodes they came from)."""
    out: dict[str, str] = {}
    seen: set[int] = set()
    for op in ops:
        stack = op.meta.get("module_stack")
        if not stack or id(stack) in seen:
            continue
        seen.add(id(stack))
        for f in stack:
            path, typ = getattr(f, "path", None), getattr(f, "type", "")
            if path is not None and typ and path not in out:
                out[path] = typ
    return out
