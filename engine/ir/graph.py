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
import math
from collections.abc import Sequence
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..records import field, record

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


@record(frozen=True)
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


#: values of a weight computed at once when it is computed a piece at a time
#: (:meth:`Attribute.pieces`): 512 KB of float32, few enough pieces that their Python costs
#: little, and memory that the allocator reuses from piece to piece (1 MB pieces came back as
#: fresh pages: a third more page faults converting ResNet-18)
PIECE = 1 << 17


class Attribute:
    """A weight tensor owned by an operator (``@weight`` in pnnx). Data is loaded lazily:
    ``Attribute(loader=callable)`` calls the loader on first access of :attr:`data` (so opening
    and lowering a package never reads weights that are not needed). A lazy attribute whose
    data can be computed a part at a time also takes ``pieces`` (see :meth:`pieces`)."""

    __slots__ = ("_data", "_loader", "_pieces", "shape", "dtype")

    def __init__(self, data: np.ndarray | None = None, *, loader: Callable[[], np.ndarray] | None = None,
                 shape: Sequence[int] | None = None, dtype: str | None = None,
                 pieces: Callable[[int], Iterator[np.ndarray]] | None = None):
        if data is None and loader is None:
            raise IRError("Attribute needs data or a loader")
        self._data = None if data is None else np.asarray(data)
        self._loader = loader
        self._pieces = pieces
        if self._data is not None:
            self.shape = tuple(map(int, self._data.shape))
            self.dtype = short_dtype(self._data.dtype)
        else:
            if shape is None or dtype is None:
                raise IRError("a lazy Attribute needs its shape and dtype")
            self.shape = tuple(map(int, shape))
            self.dtype = dtype

    @property
    def data(self) -> np.ndarray:
        if self._data is None:
            self._data = self.peek()
        return self._data

    def peek(self) -> np.ndarray:
        """The data, not kept when it was not loaded yet: a writer that reads each weight once
        leaves the graph holding what it held (a folded BatchNorm's kernel, computed for the
        ``.bin``, is freed after it is written instead of staying in memory with the graph)."""
        if self._data is not None:
            return self._data
        assert self._loader is not None
        arr = np.asarray(self._loader())
        if tuple(arr.shape) != self.shape:
            raise IRError(f"attribute loader returned shape {arr.shape}, expected {self.shape}")
        return arr

    def pieces(self, size: int = PIECE) -> Iterator[np.ndarray]:
        """The data, flattened in C order, as consecutive pieces: computed ``size`` values or
        so at a time when the attribute was given ``pieces`` (``pieces(size)`` yields them), so
        that a weight computed from another one (a folded BatchNorm's kernel) never exists
        whole — no fresh memory the size of the weight, touched page by page, for each writer
        that reads it; otherwise all of it in one piece."""
        if not self.piecewise:
            yield np.asarray(self.peek()).reshape(-1)
            return
        n = 0
        for p in self._pieces(size):
            p = np.asarray(p).reshape(-1)
            n += p.size
            yield p
        if n != math.prod(self.shape):
            raise IRError(f"attribute pieces hold {n} values, expected {self.shape}")

    @property
    def loaded(self) -> bool:
        return self._data is not None

    @property
    def piecewise(self) -> bool:
        """Whether :meth:`pieces` computes the data a piece at a time (not loaded, and given
        ``pieces``)."""
        return self._data is None and self._pieces is not None

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


#: Ticks once for every counted change of any operator, operand or :class:`TrackedDict`, in
#: any graph (``next()`` of a counter is atomic under the GIL). A pass snapshot draws a tick
#: too: when the next snapshot of the same graph draws the very next one, nothing at all
#: changed in between and the last snapshot is the graph's snapshot again.
change_tick = itertools.count().__next__


class TrackedDict(dict):
    """A dict that counts its changes in :attr:`version` (reads cost what a dict's cost).
    Operators made by a :class:`Graph` hold their ``params`` and ``attrs`` in one, so a pass
    snapshot can tell an operator that did not change without formatting it."""

    #: the change count: this class default until the first change, which gives the dict an
    #: attribute of its own (no ``__init__`` of its own: every operator made or copied makes two,
    #: at a plain dict's cost; no ``__slots__``, whose unset slot would make reads raise)
    version = 0

    def _count(self) -> None:
        self.version += 1
        change_tick()

    def __setitem__(self, key, value) -> None:
        dict.__setitem__(self, key, value)
        self._count()

    def __delitem__(self, key) -> None:
        dict.__delitem__(self, key)
        self._count()

    def __ior__(self, other):
        dict.update(self, other)
        self._count()
        return self

    def pop(self, *args):
        self._count()
        return dict.pop(self, *args)

    def popitem(self):
        self._count()
        return dict.popitem(self)

    def setdefault(self, key, default=None):
        self._count()
        return dict.setdefault(self, key, default)

    def update(self, *args, **kwargs) -> None:
        dict.update(self, *args, **kwargs)
        self._count()

    def clear(self) -> None:
        dict.clear(self)
        self._count()

    def __reduce__(self):
        return (TrackedDict, (dict(self),))


#: Operator fields that its text line shows (assigning one counts as a change)
_LINE_FIELDS = frozenset({"type", "name", "inputs", "outputs", "params", "attrs", "input_names", "provenance"})
#: Operand fields that its producer's (and, for the name, its consumers') line shows
_OPERAND_LINE_FIELDS = frozenset({"name", "shape", "dtype"})


def touch(op: "Operator") -> None:
    """Count a change of ``op`` made in place (its ``inputs`` list, a nested value): what
    :class:`Graph` methods do after changing an operator's lists."""
    op.__dict__["_v"] += 1
    change_tick()


@record(eq=False, init=False)
class Operand:
    """A value flowing between operators (a "blob" in ncnn).

    Assigning ``name``, ``shape`` or ``dtype`` counts as a change of the producer (whose line
    annotates the operand) and, for ``name``, of the consumers; change a shape by assigning a
    new list, not in place."""

    name: str
    producer: "Operator | None" = None
    consumers: list["Operator"] = field(default_factory=list)
    dtype: str | None = None
    shape: list[Dim] | None = None
    #: Free annotations (e.g. ``{"const": value}`` for a folded scalar); copied with the graph.
    meta: dict[str, Any] = field(default_factory=dict)

    def __init__(self, name: str, producer: "Operator | None" = None, consumers: list["Operator"] | None = None,
                 dtype: str | None = None, shape: list[Dim] | None = None, meta: dict[str, Any] | None = None):
        d = self.__dict__
        d["name"] = name
        d["producer"] = producer
        d["consumers"] = [] if consumers is None else consumers
        d["dtype"] = dtype
        d["shape"] = shape
        d["meta"] = {} if meta is None else meta

    def __setattr__(self, key: str, value: Any) -> None:
        d = self.__dict__
        d[key] = value
        if key in _OPERAND_LINE_FIELDS:
            change_tick()
            producer = d["producer"]
            if producer is not None:
                producer.__dict__["_v"] += 1
            if key == "name":
                for c in d["consumers"]:
                    c.__dict__["_v"] += 1

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __repr__(self) -> str:
        return f"%{self.name}"


@record(eq=False, init=False)
class Operator:
    """One operation. ``params`` are scalar/list parameters (str keys for ATen/pnnx, int ids
    for ncnn); ``attrs`` are weights; ``input_names`` optionally names inputs (pnnx ``$key``);
    ``meta`` holds free annotations that passes may use (not part of the text form).

    Changes are counted for pass snapshots (:mod:`engine.ir.snapshot`): assigning a field,
    changing ``params``/``attrs`` through their dict methods, or a :class:`Graph` method.
    A pass that changes a list in place (``op.inputs``, a list inside ``params``) calls
    :func:`touch` or assigns a new list instead; lint mode checks every snapshot."""

    type: str
    name: str
    inputs: list[Operand] = field(default_factory=list)
    outputs: list[Operand] = field(default_factory=list)
    params: dict[Any, Any] = field(default_factory=dict)
    attrs: dict[str, Attribute] = field(default_factory=dict)
    input_names: list[str] = field(default_factory=list)
    provenance: Provenance = field(default_factory=Provenance)
    meta: dict[str, Any] = field(default_factory=dict)

    def __init__(self, type: str, name: str, inputs: list[Operand] | None = None,
                 outputs: list[Operand] | None = None, params: dict[Any, Any] | None = None,
                 attrs: dict[str, Attribute] | None = None, input_names: list[str] | None = None,
                 provenance: Provenance | None = None, meta: dict[str, Any] | None = None):
        d = self.__dict__
        d["type"] = type
        d["name"] = name
        d["inputs"] = [] if inputs is None else inputs
        d["outputs"] = [] if outputs is None else outputs
        d["params"] = TrackedDict() if params is None else params
        d["attrs"] = TrackedDict() if attrs is None else attrs
        d["input_names"] = [] if input_names is None else input_names
        d["provenance"] = _NO_PROVENANCE if provenance is None else provenance
        d["meta"] = {} if meta is None else meta
        d["_v"] = 0  #: change count (see the class docstring)

    def __setattr__(self, key: str, value: Any) -> None:
        d = self.__dict__
        d[key] = value
        if key in _LINE_FIELDS:
            d["_v"] += 1
            change_tick()

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


_NO_PROVENANCE = Provenance()


class InputPositions:
    """Where an operand is among its consumers' inputs: ``(consumer, input index)`` pairs in
    consumer order, each once. A consumer of many inputs (a Concat of hundreds of branches, each
    also read elsewhere) has its inputs indexed on first use instead of scanned again for each
    of them. For a walk that does not change those inputs (or only at positions already asked
    for: the positions of the others stay right)."""

    #: consumers of at most this many inputs are scanned (cheaper than indexing them)
    SCAN = 4

    def __init__(self) -> None:
        self._at: dict[Operator, dict[Operand, list[int]]] = {}

    def __call__(self, opd: Operand) -> list[tuple[Operator, int]]:
        uses: list[tuple[Operator, int]] = []
        for c in dict.fromkeys(opd.consumers):
            ins = c.inputs
            if len(ins) <= self.SCAN:
                uses += [(c, i) for i, x in enumerate(ins) if x is opd]
                continue
            at = self._at.get(c)
            if at is None:
                at = self._at[c] = {}
                for i, x in enumerate(ins):
                    at.setdefault(x, []).append(i)
            uses += [(c, i) for i in at.get(opd, ())]
        return uses


class OpList(Sequence):
    """The operators of a :class:`Graph` in order, as a read-only list-like view
    (:attr:`Graph.ops`): iteration, ``len``, indexing and slicing, ``in`` (constant time) and
    :meth:`index`. Iterating goes over the order as it was when the loop started, so a pass may
    add and remove operators while it walks the graph. Changing the order goes through the
    graph (:meth:`Graph.add_op`, :meth:`Graph.remove_op`, :meth:`Graph.move_before`); the
    list methods ``append``/``insert``/``remove`` are kept for callers written against the
    plain list this used to be."""

    __slots__ = ("_g",)

    def __init__(self, graph: "Graph") -> None:
        self._g = graph

    def __len__(self) -> int:
        return len(self._g._next)

    def __iter__(self) -> Iterator[Operator]:
        return iter(self._g._ordered())

    def __reversed__(self) -> Iterator[Operator]:
        return reversed(self._g._ordered())

    def __getitem__(self, i):
        return self._g._ordered()[i]

    def __contains__(self, op: object) -> bool:
        try:
            return op in self._g._next
        except TypeError:  # unhashable
            return False

    def __bool__(self) -> bool:
        return bool(self._g._next)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OpList):
            other = other._g._ordered()
        return isinstance(other, list) and self._g._ordered() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._g._ordered())

    def index(self, op: Operator, *_args) -> int:
        """Position of ``op`` (a position table is built once per change of the order)."""
        pos = self._g._positions()
        if op not in pos:
            raise ValueError(f"{op!r} is not in the graph")
        return pos[op]

    def count(self, op: Operator) -> int:
        return 1 if op in self else 0

    def copy(self) -> list[Operator]:
        return list(self._g._ordered())

    def __add__(self, other) -> list[Operator]:
        return self._g._ordered() + list(other)

    def __radd__(self, other) -> list[Operator]:
        return list(other) + self._g._ordered()

    def append(self, op: Operator) -> None:
        self._g._link(op)

    def insert(self, index: int, op: Operator) -> None:
        order = self._g._ordered()
        self._g._link(op, before=order[index] if -len(order) <= index < len(order) else None)

    def remove(self, op: Operator) -> None:
        if op not in self:
            raise ValueError(f"{op!r} is not in the graph")
        self._g._unlink(op)


def _unread(op: Operator) -> bool:
    """``op`` has outputs and none of them is read."""
    outs = op.outputs
    if not outs or outs[0].consumers:
        return False
    return len(outs) == 1 or not any(o.consumers for o in outs)


class Graph:
    """Operators in topological order plus a name → operand table.

    The order is a doubly linked list keyed by operator (``_next``/``_prev``), so inserting
    anywhere and removing are constant time; :attr:`ops` is a list-like view of it whose list
    form is built once per change of the order."""

    def __init__(self) -> None:
        self.operands: dict[str, Operand] = {}
        self._next: dict[Operator, Operator | None] = {}
        self._prev: dict[Operator, Operator | None] = {}
        self._head: Operator | None = None
        self._tail: Operator | None = None
        self._list: list[Operator] | None = []  #: the order as a list (None: to rebuild)
        self._pos: dict[Operator, int] | None = None  #: operator → position (None: to rebuild)
        self._view = OpList(self)
        self._op_names: dict[str, Operator] = {}  #: operator name → operator
        self._next_suffix: dict[str, int] = {}
        #: Graph-level annotations (e.g. the source dialect, symbol ranges).
        self.meta: dict[str, Any] = {}

    # ------------------------------------------------------------------ order
    @property
    def ops(self) -> OpList:
        """The operators in order (a list-like view; ``list(g.ops)`` for a list)."""
        return self._view

    @ops.setter
    def ops(self, ops: Iterable[Operator]) -> None:
        """Replace the order by ``ops`` (the same operators, re-ordered)."""
        self._set_order(list(ops))

    def _set_order(self, order: list[Operator]) -> None:
        """Make ``order`` (a list this graph keeps) the whole order in one go."""
        nxt = dict(zip(order, order[1:] + [None]))
        if len(nxt) != len(order):
            seen: set[Operator] = set()
            dup = next(op for op in order if op in seen or seen.add(op))
            raise IRError(f"operator {dup.name!r} is already in the graph")
        self._next, self._prev = nxt, dict(zip(order, [None] + order[:-1]))
        self._head, self._tail = (order[0], order[-1]) if order else (None, None)
        self._list, self._pos = order, None

    def _ordered(self) -> list[Operator]:
        lst = self._list
        if lst is None:
            lst = []
            nxt = self._next
            op = self._head
            while op is not None:
                lst.append(op)
                op = nxt[op]
            self._list = lst
        return lst

    def _positions(self) -> dict[Operator, int]:
        if self._pos is None:
            self._pos = {op: i for i, op in enumerate(self._ordered())}
        return self._pos

    def _link(self, op: Operator, before: Operator | None = None, after: Operator | None = None) -> None:
        """Put ``op`` (not in the order yet) before / after an operator, or at the end."""
        if op in self._next:
            raise IRError(f"operator {op.name!r} is already in the graph")
        if before is not None:
            if before not in self._next:
                raise IRError(f"cannot insert before {before.name!r}: it is not in the graph")
            prev, nxt = self._prev[before], before
        elif after is not None:
            if after not in self._next:
                raise IRError(f"cannot insert after {after.name!r}: it is not in the graph")
            prev, nxt = after, self._next[after]
        else:
            prev, nxt = self._tail, None
        self._join(prev, op)
        self._join(op, nxt)
        self._list = self._pos = None  # the list and position forms are made again on use

    def _unlink(self, op: Operator) -> None:
        self._join(self._prev.pop(op), self._next.pop(op))
        self._list = self._pos = None  # the list and position forms are made again on use

    def _join(self, first: Operator | None, second: Operator | None) -> None:
        """Make ``second`` follow ``first`` (None: the start / the end of the order)."""
        if first is None:
            self._head = second
        else:
            self._next[first] = second
        if second is None:
            self._tail = first
        else:
            self._prev[second] = first

    def move_before(self, op: Operator, anchor: Operator) -> None:
        """Move ``op`` (in the graph) to just before ``anchor``."""
        if op is anchor:
            return
        self._unlink(op)
        self._link(op, before=anchor)

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
        op = Operator(type, name, list(inputs), list(outputs), TrackedDict(params or ()), TrackedDict(attrs or ()),
                      list(input_names or ()), provenance or _NO_PROVENANCE)
        for o in op.outputs:
            d = o.__dict__
            if d["producer"] is not None:
                raise IRError(f"operand {o.name!r} already produced by {o.producer.name!r}")
            d["producer"] = op  # not a field of the operand's line: no change to count
        for i in op.inputs:
            i.consumers.append(op)
        self._link(op, before=before, after=after)
        self._op_names[name] = op
        return op

    # ------------------------------------------------------------------ mutation
    def set_input(self, op: Operator, index: int, operand: Operand) -> None:
        old = op.inputs[index]
        old.consumers.remove(op)
        op.inputs[index] = operand
        operand.consumers.append(op)
        touch(op)

    def append_input(self, op: Operator, operand: Operand, name: str | None = None) -> None:
        op.inputs.append(operand)
        operand.consumers.append(op)
        if name is not None or op.input_names:
            op.input_names.append(name or "")
        touch(op)

    def remove_input(self, op: Operator, index: int) -> None:
        opd = op.inputs.pop(index)
        opd.consumers.remove(op)
        if op.input_names:
            op.input_names.pop(index)
        touch(op)

    def replace_all_uses(self, old: Operand, new: Operand) -> None:
        """Make every consumer of ``old`` read ``new`` instead."""
        for c in list(old.consumers):
            ins = c.inputs
            uses = ins.count(old)  # operands compare by identity
            if uses:
                ins[:] = [new if x is old else x for x in ins]
                new.consumers.extend([c] * uses)
            touch(c)
        old.consumers.clear()

    def remove_op(self, op: Operator, *, drop_outputs: bool = True) -> None:
        """Remove an operator. Its outputs must have no consumers left (as ``torch.fx``'s
        ``erase_node``)."""
        for o in op.outputs:
            if o.consumers:
                raise IRError(f"cannot remove {op.name!r}: output {o.name!r} is still used by "
                              + ", ".join(c.name for c in o.consumers))
        for i in op.inputs:
            try:
                i.consumers.remove(op)
            except ValueError:
                pass
        if op not in self._next:
            raise IRError(f"cannot remove {op.name!r}: it is not in the graph")
        for o in op.outputs:
            o.__dict__["producer"] = None  # not a field of the operand's line: no change to count
            if drop_outputs:
                self.operands.pop(o.name, None)
        self._unlink(op)
        self._op_names.pop(op.name, None)

    def bypass(self, op: Operator, input_index: int = 0, output_index: int = 0) -> None:
        """Remove a single-path operator (identity, dropout...), wiring its consumers to its input."""
        self.replace_all_uses(op.outputs[output_index], op.inputs[input_index])
        for o in op.outputs:
            if o.consumers:
                raise IRError(f"cannot bypass {op.name!r}: output {o.name!r} still used")
        self.remove_op(op)

    def rename_op(self, op: Operator, new_name: str) -> str:
        self._op_names.pop(op.name, None)
        op.name = self.unique_op_name(new_name)
        self._op_names[op.name] = op
        return op.name

    def rename_operand(self, opd: Operand, new_name: str) -> str:
        del self.operands[opd.name]
        opd.name = self.unique_operand_name(new_name)
        self.operands[opd.name] = opd
        return opd.name

    def take_over_output(self, old: Operand, new: Operand) -> None:
        """Make ``new``'s producer produce ``old`` in its place: ``old`` keeps its name and its
        readers, and takes ``new``'s dtype, shape and meta where ``new`` has them; ``new`` becomes
        an output of ``old``'s producer instead (which the caller is about to remove). What a
        lowering does when a replacement operand nobody reads yet stands for a single output —
        the same graph as rewiring every reader to ``new`` and renaming it, without touching the
        readers."""
        producer, emitter = old.producer, new.producer
        producer.outputs[producer.outputs.index(old)] = new
        emitter.outputs[emitter.outputs.index(new)] = old
        d = old.__dict__  # field by field, not through __setattr__: touch(emitter) counts the change
        d["producer"], new.__dict__["producer"] = emitter, producer
        if new.dtype is not None:
            d["dtype"] = new.dtype
        if new.shape is not None:
            d["shape"] = new.shape
        d["meta"] = {**d["meta"], **new.meta}
        touch(producer)
        touch(emitter)

    def dispose(self) -> None:
        """Unlink every operator from its operands and empty the graph, so that what it held
        is freed by reference counting at once: operators and operands refer to each other, and
        such cycles otherwise wait for a full cyclic collection (a second or more for a large
        model in a long-running app). For a graph nobody will read again."""
        # through __dict__: these are not changes a snapshot counts (the graph is going away)
        for op in self._ordered():
            op.__dict__["inputs"], op.__dict__["outputs"] = [], []
        for o in self.operands.values():
            o.__dict__["producer"], o.__dict__["consumers"] = None, []
        self.__dict__.clear()
        self.__init__()

    def remove_dead(self, keep: Callable[[Operator], bool] | None = None) -> int:
        """Remove operators whose outputs are all unused (except those ``keep`` protects and
        graph outputs). Returns how many were removed."""
        removed = 0
        # only unread operators can be removed; one becomes unread when its last reader is
        # removed, which queues it. Popped last first: readers before what they read.
        pending = [op for op in self._ordered() if _unread(op)]
        nxt = self._next
        while pending:
            op = pending.pop()
            if op not in nxt or not _unread(op) or op.type in _OUTPUTS or (keep and keep(op)):
                continue
            pending.extend(i.producer for i in op.inputs if i.producer is not None)
            self.remove_op(op)
            removed += 1
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
        op = self._op_names.get(name)
        if op is not None and op.name == name and op in self._next:
            return op
        for op in self.ops:  # an operator renamed by assigning ``op.name``
            if op.name == name:
                return op
        return None

    def ops_of_type(self, *types: str) -> list[Operator]:
        wanted = frozenset(types) if len(types) > 2 else types  # one lookup per operator, not a scan
        return [op for op in self._ordered() if op.type in wanted]

    def input_ops(self) -> list[Operator]:
        return [op for op in self.ops if op.type in ("pnnx.Input", "Input")]

    def output_ops(self) -> list[Operator]:
        return [op for op in self.ops if op.type in ("pnnx.Output", "Output")]

    def __iter__(self) -> Iterator[Operator]:
        return iter(self._ordered())

    def __len__(self) -> int:
        return len(self._next)

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
        if seen_names != set(self._op_names):
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
        order: list[Operator] = []
        for op in self._ordered():
            new_op = Operator(op.type, op.name, [mapping[id(i)] for i in op.inputs],
                              [mapping[id(o)] for o in op.outputs], TrackedDict(op.params), TrackedDict(op.attrs),
                              list(op.input_names), op.provenance, dict(op.meta))
            for i in new_op.inputs:
                i.consumers.append(new_op)
            for o in new_op.outputs:
                o.__dict__["producer"] = new_op  # a new operand: no change to count
            order.append(new_op)
            g._op_names[op.name] = new_op
        g._set_order(order)
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
