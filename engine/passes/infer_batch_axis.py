"""Track where the model's batch axis is in every pnnx-level operand (``meta["batch_dim"]``, an
int or None; ``meta["batch"]`` = "it is dim 0" for the older rules — see
:mod:`engine.convert.shapes`), so ncnn rules can drop it (ncnn has no batch axis).

Where the batch starts:

* a model input of rank ≥ 2 is batched at dim 0;
* a constant (``pnnx.Attribute``) of rank ≥ 2 with a leading 1 is batched at dim 0 (a ViT
  position embedding ``(1, 197, 768)`` lines up with a batched activation);
* a reshape or unsqueeze whose input has no batch axis and whose output starts with a 1 (or
  with the symbolic batch size of a model input) is batched at dim 0 again: the batch that an
  earlier reshape merged into another dim (Swin's ``(B*nW, ...)`` viewed back as
  ``(B, nW, ...)``) comes back out.

How it moves (``batch_dim`` ``b`` of the input, ``r`` ranks):

* ``Tensor.permute``/``torch.transpose``: to where the permutation puts ``b``;
* ``torch.unsqueeze``/``torch.squeeze``/``Tensor.select``/unbind and reductions without
  ``keepdim``: shifted by the dims inserted or removed before it (gone if removed itself);
* reshapes (``Tensor.reshape``/``view``, ``torch.flatten``): kept when the output has a dim of
  the same size after the same number of elements (the batch stays a dim of its own), else
  merged away;
* elementwise ``pnnx.Expression`` (broadcasting): the inputs' batch dims right-aligned to the
  output, where the output keeps that size;
* any other op: dim 0 stays the batch when the output's dim 0 equals the input's; a batch
  elsewhere stays where it is when the output has the input's rank and the same size there.

An operator may state its outputs' batch dims in ``op.meta["batch_out"]`` (a list with one entry
per output: an int or None, or a bool meaning dim 0 / none); that wins over the rules above.
"""
from __future__ import annotations

from typing import Sequence

from ..convert.shapes import set_batch_dim
from ..diagnostics import Diagnostic
from ..ir import Dim, Graph, Operand, Operator
from .manager import graph_pass

_RESHAPES = ("Tensor.reshape", "Tensor.view", "torch.flatten")
_REDUCTIONS = ("torch.sum", "torch.mean", "torch.amax", "torch.amin", "torch.max", "torch.min", "torch.prod",
               "torch.var", "torch.std", "torch.logsumexp", "torch.norm")


def _bd(opd: Operand) -> int | None:
    b = opd.meta.get("batch_dim")
    return b if isinstance(b, int) and not isinstance(b, bool) else None


def _norm(d: int, rank: int) -> int:
    return d % rank if rank else 0


def _prod(dims: Sequence[Dim]) -> tuple:
    """A product of dims as a comparable key: (static product, sorted symbolic factors)."""
    n, syms = 1, []
    for d in dims:
        if isinstance(d, int):
            n *= d
        else:
            syms.append(str(d))
    return n, tuple(sorted(syms))


def reshaped_batch_dim(src: Sequence[Dim], b: int, dst: Sequence[Dim]) -> int | None:
    """Where batch dim ``b`` of shape ``src`` is in the reshape to ``dst`` (None: merged)."""
    before = _prod(src[:b])
    for j in range(len(dst)):
        if dst[j] == src[b] and _prod(dst[:j]) == before:
            return j
    return None


class _Inference:
    def __init__(self, graph: Graph):
        self.graph = graph
        #: sizes a batch dim may have: 1 and the symbolic batch sizes of the model inputs
        self.batch_sizes: set = {1}

    def start(self, op: Operator) -> bool:
        if op.type == "pnnx.Input":
            for o in op.outputs:
                batched = o.shape is not None and len(o.shape) >= 2
                set_batch_dim(o, 0 if batched else None)
                if batched:
                    self.batch_sizes.add(o.shape[0])
            return True
        if op.type == "pnnx.Attribute":
            for o in op.outputs:
                set_batch_dim(o, 0 if (o.shape and len(o.shape) >= 2 and o.shape[0] == 1) else None)
            return True
        forced = op.meta.get("batch_out")
        if forced is not None:
            for o, b in zip(op.outputs, forced):
                set_batch_dim(o, (0 if b else None) if isinstance(b, bool) else b)
            return True
        return False

    def run(self) -> None:
        for op in self.graph.ops:
            if self.start(op):
                continue
            for k, o in enumerate(op.outputs):
                b = self.infer(op, k, o)
                if b is None and self._reemerges(op, o):
                    b = 0
                if b is not None and (o.shape is None or not 0 <= b < len(o.shape)):
                    b = None
                set_batch_dim(o, b)

    # ------------------------------------------------------------------ rules
    def _first(self, op: Operator) -> tuple[Operand | None, int | None]:
        for i in op.inputs:
            b = _bd(i)
            if b is not None and i.shape is not None:
                return i, b
        return (op.inputs[0] if op.inputs else None), None

    def _reemerges(self, op: Operator, o: Operand) -> bool:
        if op.type not in _RESHAPES + ("torch.unsqueeze",) or not op.inputs:
            return False
        x = op.inputs[0]
        return (_bd(x) is None and x.shape is not None and o.shape is not None and len(o.shape) >= 2
                and o.shape[0] in self.batch_sizes and len(x.shape) > 0 and x.shape[0] != o.shape[0])

    def infer(self, op: Operator, k: int, o: Operand) -> int | None:
        x, b = self._first(op)
        if x is None or o.shape is None:
            return None
        t, p, rank = op.type, op.params, len(x.shape or [])
        if op.type == "pnnx.Expression":
            return self._broadcast(op, o)
        if b is None:
            return None
        if t == "Tensor.permute":
            dims = [_norm(d, rank) for d in p["dims"]]
            return dims.index(b) if b in dims else None
        if t == "torch.transpose":
            d0, d1 = _norm(p["dim0"], rank), _norm(p["dim1"], rank)
            return d1 if b == d0 else d0 if b == d1 else b
        if t == "torch.unsqueeze":
            d = _norm(p["dim"], rank + 1)
            return b + 1 if d <= b else b
        if t == "torch.squeeze":
            dims = p.get("dim")
            dims = list(range(rank)) if dims is None else dims if isinstance(dims, list) else [dims]
            return _removed(b, [_norm(d, rank) for d in dims if x.shape[_norm(d, rank)] == 1])
        if t in ("Tensor.select", "torch.unbind"):
            return _removed(b, [_norm(p["dim"], rank)])
        if t in _REDUCTIONS and len(o.shape) != rank:
            dims = p.get("dim")
            dims = list(range(rank)) if dims is None else dims if isinstance(dims, list) else [dims]
            return _removed(b, [_norm(d, rank) for d in dims])
        if t in _RESHAPES:
            return reshaped_batch_dim(x.shape, b, o.shape)
        if b == 0:  # the old rule, for ops of any rank (linear, embedding, pooling...)
            return 0 if o.shape and o.shape[0] == x.shape[0] else None
        if len(o.shape) == rank and o.shape[b] == x.shape[b]:
            return b
        return None

    def _broadcast(self, op: Operator, o: Operand) -> int | None:
        r = len(o.shape)
        best = None
        for i in op.inputs:
            b = _bd(i)
            if b is None or i.shape is None:
                continue
            pos = b + r - len(i.shape)
            if 0 <= pos < r and o.shape[pos] == i.shape[b] and (best is None or len(i.shape) > best[1]):
                best = (pos, len(i.shape))
        return None if best is None else best[0]


def _removed(b: int, dims: Sequence[int]) -> int | None:
    if b in dims:
        return None
    return b - sum(1 for d in dims if d < b)


def infer(graph: Graph) -> None:
    """Annotate every operand of ``graph`` (also used by passes that run before this one)."""
    _Inference(graph).run()


def _batch_warnings(graph: Graph, cx) -> None:
    """A warning for each model input exported with a static batch larger than 1: the ncnn
    model has no batch axis and runs one sample at a time."""
    diagnostics = getattr(cx, "diagnostics", None)
    if diagnostics is None:
        return
    for op in graph.ops_of_type("pnnx.Input"):
        for o in op.outputs:
            if _bd(o) == 0 and isinstance(o.shape[0], int) and o.shape[0] > 1:
                sample = "×".join(str(d) for d in o.shape[1:])
                diagnostics.add(Diagnostic.for_operator(
                    op, f"exported with a batch of {o.shape[0]}: the ncnn model has no batch axis and takes one "
                        f"{sample} sample at a time", severity="warning", stage="infer_batch_axis"))


@graph_pass("infer_batch_axis", "mark where the batch axis is in every operand (dropped in ncnn)")
def run(graph, cx):
    infer(graph)
    _batch_warnings(graph, cx)
