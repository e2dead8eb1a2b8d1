"""Rewrite tensors of more than 4 dims (without the batch axis) into ≤4-D ones (pnnx level).

ncnn Mats have at most 4 dims, but window attention reshapes through 5-D and 6-D views: Swin's
window partition ``view(B, H/w, w, W/w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, w*w, C)``,
its head split ``reshape(N, L, 3, heads, d).permute(2, 0, 3, 1, 4)`` then ``qkv[0]``, MaxViT's
``reshape(B, C, H/P, P, W/P, P).permute(0, 2, 4, 3, 5, 1)``. This pass finds every operand whose
ncnn rank (:func:`engine.convert.shapes.ncnn_rank`) exceeds 4 and rewrites the operators around
it on a ≤4-D *physical* tensor holding the same data in the same row-major order:

* a reshape (``Tensor.reshape``/``view``, ``torch.flatten``/``squeeze``/``unsqueeze``) moves no
  data: a high-rank result is just the physical tensor of its input, and a ≤4-D result is one
  ``Tensor.reshape`` of it;
* a permute/transpose merges the dims that stay adjacent and in order (dims of size 1 dropped)
  — ``(1, 8, 7, 8, 7, 96)`` permuted ``(0, 1, 3, 2, 4, 5)`` is ``(8, 7, 8, 672)`` permuted
  ``(0, 2, 1, 3)``: one Reshape and one 4-D Permute. More than 4 merged blocks become the
  fewest permutations of at most 4 blocks (:mod:`._rank_plan`; MaxViT's partition: two);
* ``select``/``unbind`` of a permuted tensor are moved before the permutation first (Swin's
  ``qkv[0]``, ``qkv[1]``, ``qkv[2]`` become three crops of the linear output, each reshaped to
  4-D and permuted); a select, slice, chunk or split of a high-rank tensor crops the physical
  tensor along an axis that starts at the sliced dim (no data moved when one does), else along
  the middle axis of a ``(before, dim, after)`` view;
* elementwise ``pnnx.Expression`` merges runs of dims with the same broadcast pattern over its
  inputs (``(1, 64, 3, 49, 49) + (1, 64, 1, 49, 49)`` is ``(64, 3, 2401) + (64, 1, 2401)``);
  constants of any rank are reshaped in place (the 6-D offset normalizer of multi-scale
  deformable attention: Deformable DETR, Mask2Former);
* ``torch.cat``, ``F.softmax``/``F.log_softmax`` and reductions (``max``/``min`` over a dim whose
  indices nobody reads as ``amax``/``amin``: Hiera's query pooling) view their tensor as
  ``(before, dim(s), after)``; unary activations run on the physical tensor as it is, and
  ``nn.Linear`` (or ``torch.matmul`` by a matrix) on its ``(rows, features)`` view (Twins-SVT's
  qkv projection of its 6-D windows).

First, every chain of reshapes and permutes (≤4-D at both ends, inner results read once) that
holds a high-rank tensor or more than one permute is replaced by the fewest steps for the whole
chain (:mod:`._rearrange`): MaxViT's window departition, grid partition and axis swap — five
permutes op by op — are two.

An operator touching a high-rank tensor that none of these cover is left alone (its ncnn rule
then reports it). Shapes must be static inside the rewritten regions. Runs after the pnnx-level
fusions (ShuffleChannel/PixelShuffle patterns go first) and re-infers the batch axes.
"""
from __future__ import annotations

import logging
import math
from typing import Callable, Sequence

import numpy as np

from ..convert.shapes import ncnn_rank
from ..converters.shape import permute_dims
from ..ir import Graph, Operand, Operator
from . import infer_batch_axis
from ._rank_plan import MAX_DIMS, apply_plan, merge_kept_runs, plan_block_permutes
from ._rearrange import AtomView, NotRearrangement
from .manager import graph_pass

log = logging.getLogger(__name__)

_RESHAPES = ("Tensor.reshape", "Tensor.view", "torch.flatten", "torch.squeeze", "torch.unsqueeze")
_PERMUTES = ("Tensor.permute", "torch.permute", "torch.transpose")
_SOFTMAX = ("F.softmax", "F.log_softmax")
_REDUCTIONS = ("torch.sum", "torch.mean", "torch.amax", "torch.amin", "torch.prod")
#: ``max``/``min`` over a dim whose indices nobody reads (one output): ``amax``/``amin`` there
_VALUES_ONLY = {"torch.max": "torch.amax", "torch.min": "torch.amin"}
#: ops computed element by element, whatever the layout
_UNARY = ("F.relu", "F.relu6", "F.gelu", "F.silu", "F.sigmoid", "F.tanh", "F.hardswish", "F.hardsigmoid", "F.elu",
          "F.leaky_relu", "F.mish", "F.selu", "F.celu", "F.softplus", "F.hardtanh", "F.logsigmoid", "torch.clamp")
_META = ("source", "module_stack", "aten_op")


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _norm(d: int, rank: int) -> int:
    return d % rank if rank else 0


def _is_high(opd: Operand) -> bool:
    r = ncnn_rank(opd) if opd.shape is not None else None
    return r is not None and r > MAX_DIMS


def _stored(opd: Operand) -> bool:
    """Whether ``opd`` is a constant held by a ``pnnx.Attribute``."""
    p = opd.producer
    return p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs


class _Skip(Exception):
    """This operator cannot be rewritten here."""


class _Rewriter:
    def __init__(self, graph: Graph):
        self.graph = graph
        #: high-rank operand → a ≤4-D operand holding the same data (row-major)
        self.phys: dict[int, Operand] = {}
        self.handled: list[Operator] = []
        self.renames: list[tuple[Operand, str, str]] = []
        self.at: Operator | None = None
        self.pending: list[tuple[Operator, int, Operand]] = []
        self.created: list[Operator] = []
        #: constants read in another shape (:meth:`constant`)
        self.reshaped: list[Operator] = []

    # ------------------------------------------------------------------ emission
    def emit(self, type_: str, inputs: Sequence[Operand], shape: Sequence[int], params: dict | None = None,
             dtype: str | None = None, suffix: str = "", attrs: dict | None = None) -> Operand:
        src = self.at
        name = self.graph.unique_op_name(f"{src.name}_r{suffix}")
        out = self.graph.new_operand(name, dtype=dtype or src.outputs[0].dtype, shape=list(shape))
        op = self.graph.add_op(type_, name, list(inputs), [out], params=params, attrs=attrs, provenance=src.provenance,
                               before=src)
        op.meta.update({k: src.meta[k] for k in _META if k in src.meta})
        op.meta["legalized_rank"] = True
        self.created.append(op)
        return out

    def reshape(self, x: Operand, shape: Sequence[int]) -> Operand:
        """``x`` viewed as ``shape`` (a reshape of a reshape made here reads the first input)."""
        shape = list(shape) or [1]
        if list(x.shape) == shape:
            return x
        p = x.producer
        if p is not None and p.type == "Tensor.reshape" and p.meta.get("legalized_rank") and len(x.consumers) == 0:
            x = p.inputs[0]
            if list(x.shape) == shape:
                return x
        return self.emit("Tensor.reshape", [x], shape, {"shape": shape}, dtype=x.dtype)

    def constant(self, x: Operand, shape: Sequence[int]) -> Operand:
        self.reshaped.append(x.producer)  # removed at the end if nothing else reads it
        attr = x.producer.attrs["data"]
        shape = list(shape) or [1]
        data = attr.map(lambda a: np.ascontiguousarray(np.asarray(a).reshape(shape)), shape=shape)
        name = self.graph.unique_op_name(f"{x.name}_r")
        out = self.graph.new_operand(name, dtype=x.dtype, shape=shape)
        made = self.graph.add_op("pnnx.Attribute", name, [], [out], attrs={"data": data},
                                 provenance=x.producer.provenance, before=self.at)
        made.meta["legalized_rank"] = True
        self.created.append(made)
        return out

    def source(self, x: Operand) -> Operand:
        if _is_high(x):
            if id(x) not in self.phys:
                raise _Skip(f"{x.name} has no ≤4-D form")
            return self.phys[id(x)]
        return x

    def view(self, x: Operand, shape: Sequence[int]) -> Operand:
        src = x if _stored(x) else self.source(x)  # a constant is reshaped in place, whatever its rank
        if _stored(src):
            return src if list(src.shape) == list(shape) else self.constant(src, shape)
        return self.reshape(src, shape)

    def result(self, op: Operator, k: int, value: Operand) -> None:
        """``value`` (same data as output ``k``) will stand for it (applied once the whole
        operator is rewritten)."""
        self.pending.append((op, k, value))

    def _apply(self, op: Operator, k: int, value: Operand) -> None:
        """Output ``k`` is ``value``: its physical form when high rank, else ``value``
        reshaped to its shape, used in its place."""
        y = op.outputs[k]
        if _is_high(y):
            self.phys[id(y)] = value
            return
        value = self.reshape(value, y.shape)
        if value is y:
            return
        self.graph.replace_all_uses(y, value)
        if value.producer is not None and value.producer.meta.get("legalized_rank"):
            self.renames.append((value, y.name, op.name))  # blob and layer keep the ATen names

    # ------------------------------------------------------------------ per operator
    def rewrite(self, op: Operator) -> bool:
        touches = [o for o in list(op.inputs) + list(op.outputs) if _is_high(o)]
        if not touches:
            return False
        if not all(_static(o.shape) for o in list(op.inputs) + list(op.outputs) if o.shape is not None):
            log.debug("legalize_tensor_rank: %s has dynamic shapes", op.name)
            return False
        handler = self._handler(op)
        if handler is None:
            return False
        self.at, self.pending, mark = op, [], len(self.created)
        try:
            handler(op)
        except Exception as e:  # a refusal (or a bug) leaves the operator as it is
            if isinstance(e, _Skip):
                log.debug("legalize_tensor_rank: %s left as it is: %s", op.name, e)
            else:
                log.warning("legalize_tensor_rank: %s left as it is", op.name, exc_info=True)
            for made in reversed(self.created[mark:]):  # what this attempt emitted, users first
                if made in self.graph.ops and not any(o.consumers for o in made.outputs):
                    self.graph.remove_op(made)
            del self.created[mark:]
            return False
        for k_op, k, value in self.pending:
            self._apply(k_op, k, value)
        self.handled.append(op)
        return True

    def _handler(self, op: Operator) -> Callable[[Operator], None] | None:
        t = op.type
        if t in _RESHAPES:
            return self.do_reshape
        if t in _PERMUTES:
            return self.do_permute
        if t == "pnnx.Expression":
            return self.do_elementwise
        if t in ("Tensor.select", "Tensor.slice", "torch.unbind", "torch.chunk", "torch.split"):
            return self.do_crop
        if t == "torch.cat":
            return self.do_cat
        if t in _SOFTMAX:
            return self.do_softmax
        if t in _REDUCTIONS or (t in _VALUES_ONLY and len(op.outputs) == 1 and op.params.get("dim") is not None):
            return self.do_reduce
        if t in _UNARY:
            return self.do_unary
        if t in ("nn.Linear", "torch.matmul"):
            return self.do_linear
        return None

    def do_reshape(self, op: Operator) -> None:
        self.result(op, 0, self.source(op.inputs[0]))

    def do_unary(self, op: Operator) -> None:
        src = self.source(op.inputs[0])
        self.result(op, 0, self.emit(op.type, [src], src.shape, dict(op.params)))

    def do_linear(self, op: Operator) -> None:
        """A linear layer, or a product with a constant-shaped weight, reads its input's last dim
        alone: on the rows of a 2-D view (core ATen spells Twins' Linear as a matmul with the
        weight); a weight with a batch dim (per head) on a ``(rest, heads, M, K)`` view."""
        x, out = op.inputs[0], op.outputs[0]
        weights = list(op.inputs[1:])
        if op.type == "nn.Linear":
            if weights:
                raise _Skip("weights computed in the graph")
            heads = []
        else:
            w = weights[0] if len(weights) == 1 else None
            if w is None or _is_high(w) or len(w.shape) not in (2, 3) or len(x.shape) < len(w.shape):
                raise _Skip("not a product with a weight of at most one batch dim")
            heads = list(w.shape[:-2])
            if heads and x.shape[-3] != heads[0]:
                raise _Skip("the weight's batch dim is not the input's last")
        if heads:
            view = [math.prod(x.shape[:-3]), heads[0], x.shape[-2], x.shape[-1]]
        else:
            view = [math.prod(x.shape[:-1]), x.shape[-1]]
        shape = view[:-1] + [out.shape[-1]]
        y = self.emit(op.type, [self.view(x, view), *weights], shape, dict(op.params), attrs=dict(op.attrs) or None)
        self.result(op, 0, y)

    def do_permute(self, op: Operator) -> None:
        x = op.inputs[0]
        dims = permute_dims(op)
        kept = [d for d in range(len(x.shape)) if x.shape[d] != 1]
        order = [d for d in dims if x.shape[d] != 1]
        groups = merge_kept_runs(order, kept)
        sizes = [math.prod(x.shape[d] for d in g) for g in groups]
        target = [sorted(range(len(groups)), key=lambda i: order.index(groups[i][0]))]
        self.result(op, 0, self.rearrange(self.view(x, sizes), sizes, target[0]))

    def rearrange(self, y: Operand, sizes: list[int], order: Sequence[int]) -> Operand:
        """``y`` (viewed as blocks of ``sizes``) with its blocks in ``order``: the fewest
        reshape + ≤4-D permute steps."""
        for cuts, block_order in plan_block_permutes(tuple(order)):
            bounds = (0,) + cuts + (len(sizes),)
            merged = [math.prod(sizes[bounds[i]:bounds[i + 1]]) for i in range(len(bounds) - 1)]
            y = self.reshape(y, merged)
            if len(merged) > 1:
                y = self.emit("Tensor.permute", [y], [merged[i] for i in block_order], {"dims": list(block_order)})
            sizes = apply_plan(sizes, [(cuts, block_order)])
        return y

    def compose(self, chain: list[Operator]) -> bool:
        """Replace a chain of reshapes/permutes (≤4-D at both ends) by its fewest steps, when
        that has fewer permutes or avoids a high-rank tensor."""
        x, last = chain[0].inputs[0], chain[-1]
        view = _atoms(chain)
        if view is None or _is_high(x) or _is_high(last.outputs[0]):
            return False
        plan = view.result()
        steps = len(plan_block_permutes(tuple(plan.order)))
        permutes = sum(op.type in _PERMUTES for op in chain)
        if steps >= permutes and not any(_is_high(op.outputs[0]) for op in chain):
            return False
        self.at, self.pending = last, []
        y = self.rearrange(self.reshape(x, plan.sizes), plan.sizes, plan.order)
        self.result(last, 0, y)
        for k_op, k, value in self.pending:
            self._apply(k_op, k, value)
        for op in reversed(chain):
            if not any(o.consumers for o in op.outputs):
                self.graph.remove_op(op)
        return True

    def do_elementwise(self, op: Operator) -> None:
        out = op.outputs[0]
        rank = len(out.shape)
        padded = []
        for i in op.inputs:
            if i.shape is None or len(i.shape) > rank:
                raise _Skip(f"input {i.name} {i.shape}")
            padded.append([1] * (rank - len(i.shape)) + list(i.shape))
        inputs = list(op.inputs)
        groups = _broadcast_groups(out.shape, padded)
        while len(groups) > MAX_DIMS:  # materialize the cheapest broadcast that merges two groups
            k, j, group = min(((k, j, g) for k in range(len(groups) - 1)
                               for j, g in self._merge_cost(groups[k], groups[k + 1], padded)),
                              key=lambda c: math.prod(padded[c[1]]) * math.prod(out.shape[d] for d in c[2]))
            inputs[j], padded[j] = self._tile(inputs[j], padded[j], group, out.shape), \
                [out.shape[d] if d in group else s for d, s in enumerate(padded[j])]
            groups = _broadcast_groups(out.shape, padded)
        views = [self.view(i, [math.prod(p[d] for d in g) for g in groups]) for i, p in zip(inputs, padded)]
        shape = [math.prod(out.shape[d] for d in g) for g in groups]
        self.result(op, 0, self.emit("pnnx.Expression", views, shape, dict(op.params)))

    @staticmethod
    def _merge_cost(a: list[int], b: list[int], padded: list[list[int]]):
        """(input, group) pairs: input ``j`` broadcast along ``group`` makes groups ``a`` and
        ``b`` share a pattern (only one input differing is considered)."""
        differ = [j for j, p in enumerate(padded) if (p[a[0]] != 1) != (p[b[0]] != 1)]
        if len(differ) == 1:
            j = differ[0]
            yield j, (a if padded[j][a[0]] == 1 else b)

    def _tile(self, x: Operand, padded: list[int], group: list[int], out_shape) -> Operand:
        """``x`` (of right-aligned shape ``padded``, 1 along ``group``) repeated along ``group``."""
        before, after = math.prod(padded[:group[0]]), math.prod(padded[group[-1] + 1:])
        n = math.prod(out_shape[d] for d in group)
        v = self.view(x, [before, 1, after])
        return self.emit("Tensor.repeat", [v], [before, n, after], {"sizes": [1, n, 1]}, dtype=x.dtype)

    def _axis_view(self, x: Operand, dim: int) -> tuple[Operand, int, int]:
        """``x`` viewed so that ``dim`` starts an axis: (the view, that axis, elements per index
        of ``dim`` along it). The physical tensor itself when one of its axes starts at ``dim``
        and ends at a dim boundary; else the ``(before, dim, after)`` view (1 element per index)."""
        src = self.source(x)
        before, n = math.prod(x.shape[:dim]), x.shape[dim]
        acc = 1
        for axis, size in enumerate(src.shape):
            if acc == before and not (size == 1 and n != 1):
                covered = 1
                for e in range(dim, len(x.shape)):
                    covered *= x.shape[e]
                    if covered == size:
                        return src, axis, size // n
                    if covered > size:
                        break
                break
            acc *= size
            if acc > before:
                break
        return self._plain_view(x, dim)

    def _plain_view(self, x: Operand, dim: int) -> tuple[Operand, int, int]:
        """``x`` as ``(before, dim, after)`` (``before`` left out when 1): (view, axis of dim, 1)."""
        before, after = math.prod(x.shape[:dim]), math.prod(x.shape[dim + 1:])
        lead = [before] if before != 1 else []
        return self.view(x, lead + [x.shape[dim], after]), len(lead), 1

    def _crop(self, x: Operand, dim: int, start: int, end: int, step: int = 1) -> Operand:
        """The data of ``x[..., start:end:step, ...]`` (along ``dim``) as a ≤4-D tensor."""
        n = x.shape[dim]
        count = len(range(start, end, step))
        if count == n:
            return self.source(x)
        v, axis, unit = self._axis_view(x, dim) if step == 1 else self._plain_view(x, dim)
        shape = list(v.shape)
        shape[axis] = count * unit
        return self.emit("Tensor.slice", [v], shape, {"dim": axis, "start": start * unit, "end": end * unit,
                                                      "step": step})

    def do_crop(self, op: Operator) -> None:
        x = op.inputs[0]
        rank = len(x.shape)
        dim = _norm(op.params["dim"], rank)
        n = x.shape[dim]
        if op.type == "Tensor.select":
            i = op.params["index"] % n
            self.result(op, 0, self._crop(x, dim, i, i + 1))
        elif op.type == "Tensor.slice":
            step = op.params.get("step", 1)
            start, end = op.params["start"], op.params["end"]
            start, end, _ = slice(start, end, step).indices(n)
            self.result(op, 0, self._crop(x, dim, start, end, step))
        elif op.type == "torch.unbind":
            for k in range(len(op.outputs)):
                self.result(op, k, self._crop(x, dim, k, k + 1))
        else:
            offset = 0
            for k, o in enumerate(op.outputs):
                size = o.shape[dim]
                self.result(op, k, self._crop(x, dim, offset, offset + size))
                offset += size

    def do_cat(self, op: Operator) -> None:
        out = op.outputs[0]
        rank = len(out.shape)
        dim = _norm(op.params.get("dim", 0), rank)
        before, after = math.prod(out.shape[:dim]), math.prod(out.shape[dim + 1:])
        lead = [before] if before != 1 else []
        parts = [self.view(i, lead + [i.shape[dim], after]) for i in op.inputs]
        self.result(op, 0, self.emit("torch.cat", parts, lead + [out.shape[dim], after], {"dim": len(lead)}))

    def do_softmax(self, op: Operator) -> None:
        x = op.inputs[0]
        dim = _norm(op.params["dim"], len(x.shape))
        v, axis, _ = self._plain_view(x, dim)
        self.result(op, 0, self.emit(op.type, [v], v.shape, {**op.params, "dim": axis}))

    def do_reduce(self, op: Operator) -> None:
        x = op.inputs[0]
        kind = _VALUES_ONLY.get(op.type, op.type)
        rank = len(x.shape)
        dims = op.params.get("dim")
        dims = set(range(rank)) if dims is None else {_norm(d, rank) for d in
                                                      (dims if isinstance(dims, list) else [dims])}
        groups: list[list[int]] = []
        for d in range(rank):
            if x.shape[d] == 1:
                continue
            if groups and (groups[-1][-1] in dims) == (d in dims):
                groups[-1].append(d)
            else:
                groups.append([d])
        if len(groups) > MAX_DIMS:  # one run of reduced dims at a time, each a (before, run, after) view
            v, shape = self.source(x), list(x.shape)
            for g in (g for g in groups if g[0] in dims):
                before, after = math.prod(shape[:g[0]]), math.prod(shape[g[-1] + 1:])
                v = self.emit(kind, [self.reshape(v, [before, math.prod(shape[d] for d in g), after])],
                              [before, 1, after], {**op.params, "dim": [1], "keepdim": True})
                shape = [1 if d in g else n for d, n in enumerate(shape)]
            self.result(op, 0, v)
            return
        shape = [math.prod(x.shape[d] for d in g) for g in groups]
        reduced = [k for k, g in enumerate(groups) if g[0] in dims]
        v = self.view(x, shape)
        kept = [1 if k in reduced else s for k, s in enumerate(shape)]
        self.result(op, 0, self.emit(kind, [v], kept, {**op.params, "dim": reduced, "keepdim": True}))

    # ------------------------------------------------------------------ finishing
    def finish(self) -> None:
        for op in [*reversed(self.handled), *self.reshaped]:  # readers first
            if all(not o.consumers for o in op.outputs) and op in self.graph.ops:
                self.graph.remove_op(op)
        for value, name, op_name in self.renames:
            if name not in self.graph.operands and value.name in self.graph.operands:
                self.graph.rename_operand(value, name)
            if value.producer is not None and self.graph.find_op(op_name) is None:
                self.graph.rename_op(value.producer, op_name)
        self.graph.remove_dead(keep=lambda o: not o.meta.get("legalized_rank"))


def _broadcast_groups(out_shape, padded: list[list[int]]) -> list[list[int]]:
    """Runs of the output's non-1 dims along which every input is either full or 1."""
    groups: list[list[int]] = []
    for d in range(len(out_shape)):
        if out_shape[d] == 1:
            continue
        pattern = tuple(p[d] != 1 for p in padded)
        if groups and tuple(p[groups[-1][-1]] != 1 for p in padded) == pattern:
            groups[-1].append(d)
        else:
            groups.append([d])
    return groups


def sink_selects(graph: Graph) -> int:
    """``select(permute(x, dims), s, i)`` → ``permute(select(x, dims[s], i), rest)`` (and
    unbind alike) when every user of a high-rank permutation selects along one dim."""
    moved = 0
    for op in list(graph.ops):
        if op.type != "Tensor.permute" or op not in graph.ops or not _is_high(op.outputs[0]):
            continue
        y = op.outputs[0]
        users = list(y.consumers)
        if not users or any(u.type not in ("Tensor.select", "torch.unbind") for u in users):
            continue
        rank = len(y.shape)
        sel = {_norm(u.params["dim"], rank) for u in users}
        if len(sel) != 1:
            continue
        s = sel.pop()
        x = op.inputs[0]
        dims = [_norm(d, rank) for d in op.params["dims"]]
        src_dim = dims[s]
        rest = [d - (1 if d > src_dim else 0) for d in dims if d != src_dim]
        for u in users:
            outs = u.outputs
            indices = [u.params["index"]] if u.type == "Tensor.select" else list(range(len(outs)))
            for o, index in zip(outs, indices):
                piece = [v for k, v in enumerate(x.shape) if k != src_dim]
                p_out = graph.new_operand(f"{o.name}_sel", dtype=o.dtype, shape=piece)
                p = graph.add_op("Tensor.select", graph.unique_op_name(f"{u.name}_sel"), [x], [p_out],
                                 params={"dim": src_dim, "index": index}, provenance=u.provenance, before=u)
                p.meta.update({k: u.meta[k] for k in _META if k in u.meta})
                if rest == list(range(len(rest))):
                    new = p_out
                else:
                    new = graph.new_operand(f"{o.name}_perm", dtype=o.dtype, shape=list(o.shape))
                    q = graph.add_op("Tensor.permute", graph.unique_op_name(f"{u.name}_perm"), [p_out], [new],
                                     params={"dims": rest}, provenance=op.provenance.union(u.provenance), before=u)
                    q.meta.update({k: u.meta[k] for k in _META if k in u.meta})
                graph.replace_all_uses(o, new)
            graph.remove_op(u)
        moved += 1
        graph.remove_op(op)
    return moved


def _segments(chain: list[Operator]) -> list[list[Operator]]:
    """The chain cut, greedily from the front, into the longest pieces between ≤4-D tensors
    that are each one rearrangement of atoms (window departition then a grid partition of
    another factorization are two)."""
    pieces, i = [], 0
    while i < len(chain):
        for j in range(len(chain), i, -1):
            part = chain[i:j]
            if _is_high(part[-1].outputs[0]) or _atoms(part) is None:
                continue
            if sum(op.type in _PERMUTES for op in part) >= 2 or any(_is_high(op.outputs[0]) for op in part):
                pieces.append(part)
            i = j
            break
        else:
            i += 1
    return pieces


def _atoms(chain: list[Operator]) -> AtomView | None:
    """The chain followed atom by atom, or None (dynamic shapes, not one rearrangement)."""
    x = chain[0].inputs[0]
    if not all(_static(sh) for sh in [x.shape] + [op.outputs[0].shape for op in chain]):
        return None
    view = AtomView(x.shape)
    try:
        for op in chain:
            if op.type in _PERMUTES:
                view.permute(permute_dims(op))
            else:
                view.reshape(op.outputs[0].shape)
    except NotRearrangement as e:
        log.debug("legalize_tensor_rank: chain at %s is not one rearrangement: %s", chain[0].name, e)
        return None
    return view


def rearrangement_chains(graph: Graph):
    """Maximal chains of reshapes/permutes whose inner results have one reader each."""
    kinds = _RESHAPES + _PERMUTES
    for op in list(graph.ops):
        if op not in graph.ops or op.type not in kinds or len(op.inputs) != 1:
            continue
        x = op.inputs[0]
        if x.producer is not None and x.producer.type in kinds and len(x.consumers) == 1:
            continue  # not the head of its chain
        chain = [op]
        while len(chain[-1].outputs[0].consumers) == 1:
            nxt = chain[-1].outputs[0].consumers[0]
            if nxt.type not in kinds or len(nxt.inputs) != 1:
                break
            chain.append(nxt)
        yield chain


@graph_pass("legalize_tensor_rank", "rewrite >4-D reshape/permute/select/elementwise regions into ≤4-D ones")
def run(graph: Graph, cx) -> None:
    needed = infer_batch_axis.infer(graph)
    high = any(_is_high(o) for o in graph.operands.values())
    if high and sink_selects(graph):
        needed = infer_batch_axis.infer(graph)
    rewriter = _Rewriter(graph)
    composed = 0
    for chain in list(rearrangement_chains(graph)):
        composed += sum(rewriter.compose(part) for part in _segments(chain))
    if composed:
        needed = infer_batch_axis.infer(graph)
    n_ops = len(graph.ops)
    rewritten = 0
    if high:
        for op in list(graph.ops):
            if op in graph.ops:
                rewritten += bool(rewriter.rewrite(op))
    rewriter.finish()
    if rewritten:  # else the annotations above still hold (a solve is the costliest step here)
        needed = infer_batch_axis.infer(graph)
    if rewritten or len(graph.ops) == n_ops:  # nothing changed since the last solve: the next pass reuses it
        infer_batch_axis.hand_over(graph, cx, needed)
