"""The conversion IR: Graph, Operator, Operand, Attribute and Provenance.

One IR type carries the three vocabularies the passes walk through (in the spirit of pnnx's
``ir.h``):

* ATen: ``aten.conv2d.default``, ``aten.add.Tensor`` ... (exactly the overload names);
* pnnx: ``nn.Conv2d``, ``F.relu``, ``torch.cat``, ``Tensor.reshape``, ``pnnx.Expression``,
  ``pnnx.Attribute``, ``pnnx.Input``, ``pnnx.Output``;
* ncnn: ``Input``, ``Convolution``, ``ReLU``, ``Split`` ... (params keyed by int ids).

Mutation goes through :class:`Graph` methods so producer/consumer links stay consistent.
Operators are kept in topological order (``Graph.ops``); :meth:`Graph.lint` checks it.

Provenance: every operator records the ATen node names and module paths it came from.
Rules that replace operators pass the old operators' provenance on
(:meth:`Graph.add_op` ``provenance=`` / :meth:`Provenance.union`), so a final ncnn layer can
always be traced back to source.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

#: A tensor dimension: a concrete int, a symbol/expression string (``"s77"``), or None (unknown).
Dim = int | str | None

#: operator types that are the graph's boundary (never removed as dead code)
_OUTPUTS = ("pnnx.Output", "Output")
_BOUNDARY = _OUTPUTS + ("pnnx.Input", "Input")

#: pnnx's short dtype names, used by operands, attributes and the text form.
DTYPES = ("f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool", "c64", "c128", "c32")

_NUMPY_TO_SHORT = {
    np.dtype("float32"): "f32", np.dtype("float64"): "f64", np.dtype("float16"): "f16",
    np.dtype("int64"): "i64", np.dtype("int32"): "i32", np.dtype("int16"): "i16",
    np.dtype("int8"): "i8", np.dtype("uint8"): "u8", np.dtype("bool"): "bool",
    np.dtype("complex64"): "c64", np.dtype("complex128"): "c128",
}


def short_dtype(dtype: Any) -> str:
    """pnnx short name of a numpy dtype (``float32`` → ``f32``); strings pass through."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    return _NUMPY_TO_SHORT[np.dtype(dtype)]


class IRError(Exception):
    """Misuse of the IR API or a broken graph (see :meth:`Graph.lint`)."""


@dataclass(frozen=True)
class Provenance:
    """Where an operator came from: ATen node names and module paths (both ordered, unique)."""

    nodes: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()

    def union(self, *others: "Provenance") -> "Provenance":
        nodes = dict.fromkeys(self.nodes)
        modules = dict.fromkeys(self.modules)
        for o in others:
            nodes.update(dict.fromkeys(o.nodes))
            modules.update(dict.fromkeys(o.modules))
        return Provenance(tuple(nodes), tuple(modules))

    @staticmethod
    def merge(items: Iterable["Provenance"]) -> "Provenance":
        return Provenance().union(*items)

    def __bool__(self) -> bool:
        return bool(self.nodes)


class Attribute:
    """A weight tensor owned by an operator (``@weight`` in pnnx). Data is loaded lazily:
    ``Attribute(loader=callable)`` calls the loader on first access of :attr:`data` (so opening
    and lowering a package never reads weights that are not needed)."""

    __slots__ = ("_data", "_loader", "shape", "dtype")

    def __init__(self, data: np.ndarray | None = None, *, loader: Callable[[], np.ndarray] | None = None,
                 shape: Sequence[int] | None = None, dtype: str | None = None):
        if data is None and loader is None:
            raise IRError("Attribute needs data or a loader")
        self._data = None if data is None else np.asarray(data)
        self._loader = loader
        if self._data is not None:
            self.shape = tuple(int(s) for s in self._data.shape)
            self.dtype = short_dtype(self._data.dtype)
        else:
            if shape is None or dtype is None:
                raise IRError("a lazy Attribute needs its shape and dtype")
            self.shape = tuple(int(s) for s in shape)
            self.dtype = dtype

    @property
    def data(self) -> np.ndarray:
        if self._data is None:
            assert self._loader is not None
            arr = np.asarray(self._loader())
            if tuple(arr.shape) != self.shape:
                raise IRError(f"attribute loader returned shape {arr.shape}, expected {self.shape}")
            self._data = arr
        return self._data

    @property
    def loaded(self) -> bool:
        return self._data is not None

    def map(self, fn: Callable[[np.ndarray], np.ndarray], shape: Sequence[int] | None = None,
            dtype: str | None = None) -> "Attribute":
        """A new attribute whose data is ``fn(self.data)``. Lazy (nothing is read now) when the
        result's ``shape`` is given (``dtype``: its short dtype, default this one's) and this
        data is not loaded yet; otherwise computed now."""
        if shape is None or self.loaded:
            return Attribute(np.asarray(fn(self.data)))
        return Attribute(loader=lambda: fn(self.data), shape=shape, dtype=dtype or self.dtype)

    def __repr__(self) -> str:
        return f"Attribute({self.shape}, {self.dtype})"


@dataclass(eq=False)
class Operand:
    """A value flowing between operators (a "blob" in ncnn)."""

    name: str
    producer: "Operator | None" = None
    consumers: list["Operator"] = field(default_factory=list)
    dtype: str | None = None
    shape: list[Dim] | None = None
    #: Free annotations (e.g. ``{"const": value}`` for a folded scalar); copied with the graph.
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __repr__(self) -> str:
        return f"%{self.name}"


@dataclass(eq=False)
class Operator:
    """One operation. ``params`` are scalar/list parameters (str keys for ATen/pnnx, int ids
    for ncnn); ``attrs`` are weights; ``input_names`` optionally names inputs (pnnx ``$key``);
    ``meta`` holds free annotations that passes may use (not part of the text form)."""

    type: str
    name: str
    inputs: list[Operand] = field(default_factory=list)
    outputs: list[Operand] = field(default_factory=list)
    params: dict[Any, Any] = field(default_factory=dict)
    attrs: dict[str, Attribute] = field(default_factory=dict)
    input_names: list[str] = field(default_factory=list)
    provenance: Provenance = field(default_factory=Provenance)
    meta: dict[str, Any] = field(default_factory=dict)

    def input(self, i: int = 0) -> Operand:
        return self.inputs[i]

    def output(self, i: int = 0) -> Operand:
        return self.outputs[i]

    def named_input(self, key: str) -> Operand | None:
        if key in self.input_names:
            return self.inputs[self.input_names.index(key)]
        return None

    def __repr__(self) -> str:
        return f"<{self.type} {self.name}>"


class Graph:
    """An ordered list of operators plus a name → operand table."""

    def __init__(self) -> None:
        self.ops: list[Operator] = []
        self.operands: dict[str, Operand] = {}
        self._op_names: set[str] = set()
        self._next_suffix: dict[str, int] = {}
        #: Graph-level annotations (e.g. the source dialect, symbol ranges).
        self.meta: dict[str, Any] = {}

    # ------------------------------------------------------------------ names
    def unique_operand_name(self, base: str) -> str:
        return self._unique(base, self.operands)

    def unique_op_name(self, base: str) -> str:
        return self._unique(base, self._op_names)

    def _unique(self, base: str, taken) -> str:
        if base not in taken:
            return base
        n = self._next_suffix.get(base, 1)
        while f"{base}_{n}" in taken:
            n += 1
        self._next_suffix[base] = n + 1
        return f"{base}_{n}"

    # ------------------------------------------------------------------ creation
    def new_operand(self, name: str, *, dtype: str | None = None, shape: Sequence[Dim] | None = None,
                    exact: bool = False) -> Operand:
        """Create an operand. With ``exact`` the name must be free; otherwise it is uniquified."""
        if exact and name in self.operands:
            raise IRError(f"operand name {name!r} already exists")
        name = name if exact else self.unique_operand_name(name)
        opd = Operand(name, dtype=dtype, shape=None if shape is None else list(shape))
        self.operands[name] = opd
        return opd

    def add_op(self, type: str, name: str, inputs: Sequence[Operand] = (), outputs: Sequence[Operand] = (),
               *, params: dict | None = None, attrs: dict[str, Attribute] | None = None,
               input_names: Sequence[str] | None = None, provenance: Provenance | None = None,
               before: Operator | None = None, after: Operator | None = None, exact: bool = False) -> Operator:
        """Create an operator, link it to its operands, and insert it (at the end, or before /
        after a given operator). Outputs must not already have a producer."""
        if exact and name in self._op_names:
            raise IRError(f"operator name {name!r} already exists")
        name = name if exact else self.unique_op_name(name)
        op = Operator(type, name, list(inputs), list(outputs), dict(params or {}), dict(attrs or {}),
                      list(input_names or []), provenance or Provenance())
        for o in op.outputs:
            if o.producer is not None:
                raise IRError(f"operand {o.name!r} already produced by {o.producer.name!r}")
            o.producer = op
        for i in op.inputs:
            i.consumers.append(op)
        self._op_names.add(name)
        if before is not None:
            self.ops.insert(self.ops.index(before), op)
        elif after is not None:
            self.ops.insert(self.ops.index(after) + 1, op)
        else:
            self.ops.append(op)
        return op

    # ------------------------------------------------------------------ mutation
    def set_input(self, op: Operator, index: int, operand: Operand) -> None:
        old = op.inputs[index]
        old.consumers.remove(op)
        op.inputs[index] = operand
        operand.consumers.append(op)

    def append_input(self, op: Operator, operand: Operand, name: str | None = None) -> None:
        op.inputs.append(operand)
        operand.consumers.append(op)
        if name is not None or op.input_names:
            op.input_names.append(name or "")

    def remove_input(self, op: Operator, index: int) -> None:
        opd = op.inputs.pop(index)
        opd.consumers.remove(op)
        if op.input_names:
            op.input_names.pop(index)

    def replace_all_uses(self, old: Operand, new: Operand) -> None:
        """Make every consumer of ``old`` read ``new`` instead."""
        for c in list(old.consumers):
            for i, x in enumerate(c.inputs):
                if x is old:
                    c.inputs[i] = new
                    new.consumers.append(c)
        old.consumers.clear()

    def remove_op(self, op: Operator, *, drop_outputs: bool = True) -> None:
        """Remove an operator. Its outputs must have no consumers left (as ``torch.fx``'s
        ``erase_node``)."""
        for o in op.outputs:
            if o.consumers:
                raise IRError(f"cannot remove {op.name!r}: output {o.name!r} is still used by "
                              + ", ".join(c.name for c in o.consumers))
        for i in op.inputs:
            if op in i.consumers:
                i.consumers.remove(op)
        for o in op.outputs:
            o.producer = None
            if drop_outputs:
                self.operands.pop(o.name, None)
        self.ops.remove(op)
        self._op_names.discard(op.name)

    def bypass(self, op: Operator, input_index: int = 0, output_index: int = 0) -> None:
        """Remove a single-path operator (identity, dropout...), wiring its consumers to its input."""
        self.replace_all_uses(op.outputs[output_index], op.inputs[input_index])
        for o in op.outputs:
            if o.consumers:
                raise IRError(f"cannot bypass {op.name!r}: output {o.name!r} still used")
        self.remove_op(op)

    def rename_op(self, op: Operator, new_name: str) -> str:
        self._op_names.discard(op.name)
        op.name = self.unique_op_name(new_name)
        self._op_names.add(op.name)
        return op.name

    def rename_operand(self, opd: Operand, new_name: str) -> str:
        del self.operands[opd.name]
        opd.name = self.unique_operand_name(new_name)
        self.operands[opd.name] = opd
        return opd.name

    def remove_dead(self, keep: Callable[[Operator], bool] | None = None) -> int:
        """Remove operators whose outputs are all unused (except those ``keep`` protects and
        graph outputs). Returns how many were removed."""
        removed = 0
        changed = True
        while changed:
            changed = False
            for op in reversed(list(self.ops)):
                if op.type in _OUTPUTS or (keep and keep(op)):
                    continue
                if op.outputs and all(not o.consumers for o in op.outputs):
                    self.remove_op(op)
                    removed += 1
                    changed = True
        for name in [n for n, o in self.operands.items() if o.producer is None and not o.consumers]:
            del self.operands[name]
        return removed

    def prune(self, operands: Iterable[Operand]) -> int:
        """Remove the producers of ``operands`` that no longer have readers, then whatever that
        leaves unread upstream: the scoped form of :meth:`remove_dead` for a pass that just
        rewired those operands (inputs and outputs of the graph are never removed). Returns how
        many operators were removed."""
        removed, pending = 0, list(operands)
        while pending:
            op = pending.pop().producer
            if op is None or op.type in _BOUNDARY or any(o.consumers for o in op.outputs):
                continue
            pending.extend(op.inputs)
            self.remove_op(op)
            removed += 1
        return removed

    def toposort(self) -> None:
        """Re-order ``ops`` topologically (stable: keeps the current order where possible)."""
        index = {id(op): i for i, op in enumerate(self.ops)}
        indeg = {id(op): 0 for op in self.ops}
        users: dict[int, list[Operator]] = {id(op): [] for op in self.ops}
        for op in self.ops:
            preds = {id(i.producer) for i in op.inputs if i.producer is not None}
            indeg[id(op)] = len(preds)
            for p in preds:
                users[p].append(op)
        import heapq

        ready = [(index[id(op)], id(op), op) for op in self.ops if indeg[id(op)] == 0]
        heapq.heapify(ready)
        out: list[Operator] = []
        while ready:
            _, _, op = heapq.heappop(ready)
            out.append(op)
            for u in users[id(op)]:
                indeg[id(u)] -= 1
                if indeg[id(u)] == 0:
                    heapq.heappush(ready, (index[id(u)], id(u), u))
        if len(out) != len(self.ops):
            stuck = [op.name for op in self.ops if indeg[id(op)] > 0][:5]
            raise IRError("graph has a cycle through " + ", ".join(stuck))
        self.ops = out

    # ------------------------------------------------------------------ queries
    def find_op(self, name: str) -> Operator | None:
        for op in self.ops:
            if op.name == name:
                return op
        return None

    def ops_of_type(self, *types: str) -> list[Operator]:
        return [op for op in self.ops if op.type in types]

    def input_ops(self) -> list[Operator]:
        return [op for op in self.ops if op.type in ("pnnx.Input", "Input")]

    def output_ops(self) -> list[Operator]:
        return [op for op in self.ops if op.type in ("pnnx.Output", "Output")]

    def __iter__(self) -> Iterator[Operator]:
        return iter(list(self.ops))

    def __len__(self) -> int:
        return len(self.ops)

    # ------------------------------------------------------------------ checks and views
    def lint(self) -> None:
        """Check invariants: unique operator names, every operand has at most one producer and
        is registered, consumer lists match inputs, no use before definition (topological
        order), no dangling uses. Raises :class:`IRError` listing every problem found."""
        problems: list[str] = []
        seen_names: set[str] = set()
        defined: set[int] = set()
        for op in self.ops:
            if op.name in seen_names:
                problems.append(f"duplicate operator name {op.name!r}")
            seen_names.add(op.name)
            for i in op.inputs:
                if self.operands.get(i.name) is not i:
                    problems.append(f"{op.name}: input {i.name!r} is not registered in the graph")
                if i.producer is None:
                    problems.append(f"{op.name}: input {i.name!r} has no producer (dangling use)")
                elif id(i) not in defined:
                    problems.append(f"{op.name}: input {i.name!r} used before it is produced by {i.producer.name}")
                if op not in i.consumers:
                    problems.append(f"{op.name}: not in consumers of {i.name!r}")
            for o in op.outputs:
                if o.producer is not op:
                    problems.append(f"{op.name}: output {o.name!r} has producer "
                                    f"{o.producer.name if o.producer else None}")
                if id(o) in defined:
                    problems.append(f"{op.name}: output {o.name!r} produced twice")
                if self.operands.get(o.name) is not o:
                    problems.append(f"{op.name}: output {o.name!r} is not registered in the graph")
                defined.add(id(o))
            if op.input_names and len(op.input_names) != len(op.inputs):
                problems.append(f"{op.name}: {len(op.input_names)} input names for {len(op.inputs)} inputs")
        for name, opd in self.operands.items():
            if opd.name != name:
                problems.append(f"operand registered as {name!r} is named {opd.name!r}")
            for c in opd.consumers:
                if c.name not in seen_names or opd not in c.inputs:
                    problems.append(f"operand {name!r} lists stale consumer {c.name!r}")
        if seen_names != self._op_names:
            problems.append("operator name table out of sync")
        if problems:
            raise IRError("IR lint failed:\n  " + "\n  ".join(problems[:50]))

    def to_networkx(self):
        """A ``networkx.MultiDiGraph`` view: nodes are operator names (with ``op`` attribute),
        edges carry the operand name."""
        import networkx as nx

        g = nx.MultiDiGraph()
        for op in self.ops:
            g.add_node(op.name, op=op)
        for op in self.ops:
            for i in op.inputs:
                if i.producer is not None:
                    g.add_edge(i.producer.name, op.name, operand=i.name)
        return g

    def copy(self) -> "Graph":
        """A structural copy (operators and operands new; attribute data shared, lazily)."""
        g = Graph()
        g.meta = dict(self.meta)
        mapping: dict[int, Operand] = {}
        for name, opd in self.operands.items():
            new = Operand(opd.name, dtype=opd.dtype, shape=None if opd.shape is None else list(opd.shape),
                          meta=dict(opd.meta))
            g.operands[name] = new
            mapping[id(opd)] = new
        for op in self.ops:
            new_op = Operator(op.type, op.name, [mapping[id(i)] for i in op.inputs],
                              [mapping[id(o)] for o in op.outputs], dict(op.params), dict(op.attrs),
                              list(op.input_names), op.provenance, dict(op.meta))
            for i in new_op.inputs:
                i.consumers.append(new_op)
            for o in new_op.outputs:
                o.producer = new_op
            g.ops.append(new_op)
            g._op_names.add(op.name)
        return g

    def to_text(self) -> str:
        from .text import format_graph

        return format_graph(self)

    @staticmethod
    def from_text(text: str) -> "Graph":
        from .text import parse_graph

        return parse_graph(text)

    def __str__(self) -> str:
        return self.to_text()
