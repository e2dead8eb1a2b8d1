"""Solve, for every pnnx-level value, which of its axes is ncnn's batch axis (or none), and make
every operator see its inputs in a layout it can compute on.

An ncnn Mat carries a batch count ``n`` beside its ``w/h/d/c`` dims, and every layer computes one
sample at a time (``ncnn.Mat(a, batch_index=k)`` feeds axis ``k`` of an array as the batch).
So each operand gets ``meta["batch_dim"]``: the torch axis held as the batch (dropped from the
blob's dims, see :mod:`engine.convert.shapes`), or None (every dim is in the blob). The facts
come from :mod:`engine.convert.layout`: which axes an operator links from inputs to outputs
(computing independently along them) and which axis it requires as the batch (a convolution's
N). Solving:

1. **Seeds.** Every required axis (convolutions, pooling, normalisations, embeddings over
   ``(N, L)`` ids, SDPA, recurrent layers...) is the batch of its operand.
2. **Propagation**, forward and backward through links, breadth first: an operand takes the
   axis a linked neighbour has, unless it already has one (the first wins). A constant can
   only take an axis of size 1 (a MemoryData blob has one sample).
3. **Weak seeds**, once the seeds are spread: a model input of more than 4 dims takes dim 0
   (ncnn holds 4 dims and a batch); then a model input of rank ≥ 2 whose dim 0 is a static
   1, and a reshape-like result with a leading static 1 whose input has no batch axis, take dim
   0 (dropping a size-1 axis is always exact and keeps blobs small) when every reader computes
   along that dim independently — also propagated. Last, a computed value of more than 4 dims
   still without one takes dim 0 when every reader computes along it independently.
   Everything else has no batch axis: a model ``torch.mm(a[23, 14], b[14, 35])`` keeps every
   dim; nothing is assumed about a leading dim.
4. **Legalisation**, in graph order: each operator's inputs must agree with it — a required
   axis must be the batch, and a batched input's axis must link to each output's batch axis.
   Where they do not, a ``Tensor.reshape`` to the same shape (``meta["layout_conversion"]``)
   converts the input: batch to a plain dim, a dim to the batch, or one to another. In ncnn it
   is a ``Reshape`` with ``12=``/``13=`` (batch axis in/out) when the batch can hold more than
   one sample, and a plain reshape of unit dims when it is a static 1. Reshape-like operators
   never need one (their own ncnn Reshape moves the batch).

Run as a pass it annotates and inserts the conversions; :func:`infer` only annotates (the
rank legalisation uses it on graphs it is still rewriting). A model input's batch axis is
part of the model's interface: it is fed with ``ncnn.Mat(x, batch_index=b)``, any number of
samples (``graph.meta["inputs"]`` records ``b`` per input, see ``name_blobs``).
"""
from __future__ import annotations

from collections import deque
from typing import Sequence

from ..convert.layout import OpLayout, layout_of, reshape_axis
from ..convert.shapes import set_batch_dim
from ..ir import Dim, Graph, Operand, Operator
from ..ir.graph import InputPositions
from .manager import graph_pass

_RESHAPES = ("Tensor.reshape", "Tensor.view", "torch.flatten", "torch.squeeze", "torch.unsqueeze",
             "Tensor.reshape_as", "Tensor.unflatten")


def reshaped_batch_dim(src: Sequence[Dim], b: int, dst: Sequence[Dim]) -> int | None:
    """Where batch dim ``b`` of shape ``src`` is in the reshape to ``dst`` (None: merged)."""
    return reshape_axis(src, b, dst)


def _is_const(opd: Operand) -> bool:
    p = opd.producer
    return p is not None and p.type == "pnnx.Attribute"


class _Solver:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.layouts: dict[int, OpLayout] = {id(op): layout_of(op) for op in graph.ops}
        self.axis: dict[int, int] = {}  #: id(operand) → batch axis chosen by propagation
        self.queue: deque[Operand] = deque()
        self.uses = InputPositions()  # the solve changes no inputs

    def layout(self, op: Operator) -> OpLayout:
        lay = self.layouts.get(id(op))
        if lay is None:
            lay = self.layouts[id(op)] = layout_of(op)
        return lay

    # ------------------------------------------------------------------ propagation
    def can_hold(self, opd: Operand, a: int) -> bool:
        s = opd.shape
        if s is None or not 0 <= a < len(s):
            return False
        return not _is_const(opd) or s[a] == 1

    def assign(self, opd: Operand, a: int) -> None:
        if id(opd) in self.axis or not self.can_hold(opd, a):
            return
        self.axis[id(opd)] = a
        self.queue.append(opd)

    def spread(self) -> None:
        axis, queue, layout, assign, uses = self.axis, self.queue, self.layout, self.assign, self.uses
        while queue:
            opd = queue.popleft()
            a = axis[id(opd)]
            p = opd.producer
            if p is not None:
                lay = layout(p)
                for k, o in enumerate(p.outputs):
                    if o is opd:
                        for ln in lay.links_to(k, a):
                            assign(p.inputs[ln.i], ln.a)
            for c, i in uses(opd):
                for ln in layout(c).links_from(i, a):
                    assign(c.outputs[ln.k], ln.b)

    def seed(self) -> None:
        for op in self.graph.ops:
            lay = self.layout(op)
            for i, a in lay.required.items():
                if i < len(op.inputs):
                    self.assign(op.inputs[i], a)
            for k, b in lay.required_out.items():
                if k < len(op.outputs):
                    self.assign(op.outputs[k], b)
        self.spread()
        for op in self.graph.ops_of_type("pnnx.Input"):  # ncnn holds 4 dims and a batch
            self._seed_wide(op)
        for op in self.graph.ops:
            for o in op.outputs:
                if id(o) not in self.axis and self._weak(op, o):
                    self.assign(o, 0)
                    self.spread()
        for op in self.graph.ops:  # then a computed value of more dims (a reshape to 5-D) left without one
            if op.type not in ("pnnx.Input", "pnnx.Attribute"):
                self._seed_wide(op, readers_take_dim0=True)

    def _seed_wide(self, op: Operator, readers_take_dim0: bool = False) -> None:
        """Dim 0 as the batch of ``op``'s outputs that have more dims than an ncnn blob holds —
        for a computed value only when every reader computes along dim 0 independently (a
        reader that selects or reduces along it would have to undo the batch, leaving the 5-D
        value the rank legalisation could otherwise have squeezed)."""
        for o in op.outputs:
            if id(o) not in self.axis and o.shape is not None and len(o.shape) > 4 \
                    and (not readers_take_dim0 or self._readers_take_dim0(o)):
                self.assign(o, 0)
                self.spread()

    def _weak(self, op: Operator, o: Operand) -> bool:
        s = o.shape
        if s is None or len(s) < 2 or s[0] != 1 or not self._readers_take_dim0(o):
            return False
        if op.type == "pnnx.Input":
            return True
        return op.type in _RESHAPES and bool(op.inputs) and id(op.inputs[0]) not in self.axis

    def _readers_take_dim0(self, o: Operand) -> bool:
        """Whether every reader of ``o`` computes along its dim 0 independently (a weak seed
        that some reader must undo only costs a layer)."""
        for c in o.consumers:
            lay = self.layout(c)
            if lay.neutral or lay.free:  # a reshape drops a size-1 batch for nothing
                continue
            if not any(lay.links_from(i, 0) for i, x in enumerate(c.inputs) if x is o):
                return False
        return True

    # ------------------------------------------------------------------ legalisation
    def legalize(self) -> list[tuple[Operator, int, int | None]]:
        """Fix every operand's batch axis in graph order; return the conversions needed
        (operator, input index, batch axis the input must have)."""
        final: dict[int, int | None] = {}
        needed: list[tuple[Operator, int, int | None]] = []
        for op in self.graph.ops:
            if not op.inputs:
                for o in op.outputs:
                    final[id(o)] = self.axis.get(id(o))
                continue
            have = [final.get(id(x), self.axis.get(id(x))) for x in op.inputs]
            self._check_required(op)
            want, outs = self._decide(op, have)
            for i, (h, w) in enumerate(zip(have, want)):
                if h != w:
                    needed.append((op, i, w))
            for o, b in zip(op.outputs, outs):
                final[id(o)] = b
        self.final = final
        return needed

    def _check_required(self, op: Operator) -> None:
        """A batch-first operator whose input and output disagree on the batch size (a broken
        or hand-edited program) is refused by name rather than converted."""
        lay = self.layout(op)
        if 0 not in lay.required or 0 not in lay.required_out or not op.outputs:
            return
        x, y = op.inputs[0], op.outputs[0]
        a, b = lay.required[0], lay.required_out[0]
        if x.shape is None or y.shape is None:
            return
        sx, sy = x.shape[a], y.shape[b]
        if isinstance(sx, int) and isinstance(sy, int) and sx != sy:
            op.meta["layout_error"] = (f"unsupported: {op.type} input {x.name} {list(x.shape)} and output {y.name} "
                                       f"{list(y.shape)} disagree on the batch size (dim {a}: {sx}, dim {b}: {sy})")

    def _decide(self, op: Operator, have: list[int | None]) -> tuple[list[int | None], list[int | None]]:
        """The batch axis each input must have and each output gets."""
        lay = self.layout(op)
        n_out = len(op.outputs)
        if lay.neutral:
            return list(have), [None] * n_out
        if lay.free:
            b_out = self.axis.get(id(op.outputs[0])) if op.outputs else None
            if b_out is None and have[0] is not None:
                links = lay.links_from(0, have[0])
                b_out = links[0].b if links else None
            return list(have), [b_out] + [None] * (n_out - 1)
        # the outputs' batch axes: required, else what propagation chose when some batched input
        # supplies it, else what the first batched input links to
        outs: list[int | None] = [None] * n_out
        for k in range(n_out):
            if k in lay.required_out:
                outs[k] = lay.required_out[k]
                continue
            intended = self.axis.get(id(op.outputs[k]))
            supplied = [ln.b for i, a in enumerate(have) if a is not None and i not in lay.required
                        for ln in lay.links_from(i, a) if ln.k == k]
            supplied += [ln.b for i, a in lay.required.items() for ln in lay.links_from(i, a) if ln.k == k]
            if intended is not None and intended in supplied:
                outs[k] = intended
            elif supplied:
                outs[k] = supplied[0]
        if not self._feasible(op, lay, outs):
            outs = [lay.required_out.get(k) for k in range(n_out)]
        want: list[int | None] = []
        for i, a in enumerate(have):
            if i in lay.measured:
                want.append(a)
            elif i in lay.required:
                want.append(lay.required[i])
            elif a is not None and self._consistent(lay, i, a, outs):
                want.append(a)
            else:
                want.append(self._needed_axis(op, lay, i, outs))
        return want, outs

    def _consistent(self, lay: OpLayout, i: int, a: int, outs: list[int | None]) -> bool:
        """Whether input ``i`` batched at ``a`` lines up with every output's batch axis."""
        links = lay.links_from(i, a)
        if not links:
            return False
        for k, b in enumerate(outs):
            hits = [ln for ln in links if ln.k == k]
            if b is None:
                if hits:  # the output has no batch: this input cannot have one along a linked axis
                    return False
            elif not any(ln.b == b for ln in hits):
                return False
        return True

    def _needed_axis(self, op: Operator, lay: OpLayout, i: int, outs: list[int | None]) -> int | None:
        """An input without a usable batch axis: the axis it must take because it varies along
        an output's batch axis (not a broadcast of size 1; an ``exact`` op broadcasts nothing),
        else None."""
        x = op.inputs[i]
        for k, b in enumerate(outs):
            if b is None:
                continue
            for ln in lay.links_to(k, b):
                if ln.i == i and x.shape is not None and (lay.exact or x.shape[ln.a] != 1):
                    return ln.a
        return None

    def _feasible(self, op: Operator, lay: OpLayout, outs: list[int | None]) -> bool:
        """An output batch axis is usable only when no constant input varies along it."""
        for k, b in enumerate(outs):
            if b is None or k in lay.required_out:
                continue
            for ln in lay.links_to(k, b):
                x = op.inputs[ln.i]
                if _is_const(x) and x.shape is not None and x.shape[ln.a] != 1:
                    return False
        return True


def _annotate(graph: Graph, final: dict[int, int | None]) -> None:
    for op in graph.ops:
        for o in op.outputs:
            set_batch_dim(o, final.get(id(o)))


def _insert_conversions(graph: Graph, needed) -> int:
    """One ``Tensor.reshape`` (same shape) per input and wanted batch axis, shared by the
    operators that want the same."""
    made: dict[tuple[int, int | None], Operand] = {}
    for op, i, b in needed:
        x = op.inputs[i]
        key = (id(x), b)
        y = made.get(key)
        if y is None:
            name = graph.unique_op_name(f"{x.name}_layout")
            y = graph.new_operand(name, dtype=x.dtype, shape=x.shape)
            conv = graph.add_op("Tensor.reshape", name, [x], [y], params={"shape": list(x.shape or [])},
                                provenance=(x.producer.provenance if x.producer is not None else op.provenance),
                                before=op)
            conv.meta["layout_conversion"] = True
            for k in ("source", "module_stack"):
                if x.producer is not None and k in x.producer.meta:
                    conv.meta[k] = x.producer.meta[k]
            set_batch_dim(y, b)
            made[key] = y
        graph.set_input(op, i, y)
    return len(made)


#: ``cx.state`` key of a solve the pass just before this one left (see :func:`hand_over`)
_SOLVED = "batch_layout_solved"


def infer(graph: Graph) -> list[tuple[Operator, int, int | None]]:
    """Annotate every operand of ``graph`` (no conversions; used by passes before this one);
    returns the conversions the solve found needed (for :func:`solve`, :func:`hand_over`)."""
    s = _Solver(graph)
    s.seed()
    needed = s.legalize()
    _annotate(graph, s.final)
    return needed


def solve(graph: Graph, *, convert: bool) -> int:
    """Annotate every operand's batch axis; with ``convert``, insert the layout conversions
    (returns how many)."""
    needed = infer(graph)
    return _insert_conversions(graph, needed) if convert and needed else 0


def hand_over(graph: Graph, cx, needed: list[tuple[Operator, int, int | None]]) -> None:
    """The pass right before this one solved ``graph`` (``needed``: :func:`infer`'s answer) and
    changed nothing since: this pass inserts those conversions instead of solving again (a
    solve is the costliest step of both passes)."""
    if cx is not None:
        cx.state[_SOLVED] = (graph, len(graph.ops), needed)


@graph_pass("infer_batch_axis", "solve which axis of every value is ncnn's batch; convert where operators disagree")
def run(graph, cx):
    solved = cx.state.pop(_SOLVED, None) if cx is not None else None
    if solved is not None and solved[0] is graph and solved[1] == len(graph.ops):
        if solved[2]:
            _insert_conversions(graph, solved[2])
        return
    solve(graph, convert=True)
