"""Make in-place writes through views reach the tensor viewed (TRAINING-dialect graphs).

``torch.export()`` keeps ``mask[0:-7, 0:-7] = 1`` as ``slice`` → ``slice`` → ``fill_``: the
write lands in ``mask`` through the views. The builder already makes later readers of the
*view* read the ``fill_`` result; this pass makes later readers of the *base* see the write, as
core ATen's functionalization does: the new view value is scattered back through the view
chain (``aten.slice_scatter``, ``aten.select_scatter``, a ``view`` back to the base shape, the
inverse ``permute``...) and every operator after the write that read the base (or a tensor the
base is itself a view of) reads the scattered result. A write through a view this pass cannot
invert (an ``expand``, an ``as_strided``) is reported as a diagnostic and left as it was.

Runs first, before ``normalize_inplace``; the scatter ops are ordinary ATen operators (so
``fold_constants`` computes a mask built this way from ``new_zeros`` into one constant, and
activations get the scatter converters).
"""
from __future__ import annotations

import logging

from ..diagnostics import Diagnostic
from ..ir import Graph, Operand, Operator
from ..ir.vocab import is_aten
from .manager import graph_pass

log = logging.getLogger(__name__)

_RESHAPES = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.unsqueeze.default",
             "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.flatten.using_ints",
             "aten.unflatten.int", "aten.view_copy.default")
_IDENTITY = ("aten.alias.default", "aten.detach.default", "aten.detach_.default", "aten.contiguous.default")
_VIEWS = _RESHAPES + _IDENTITY + ("aten.slice.Tensor", "aten.select.int", "aten.permute.default",
                                  "aten.transpose.int", "aten.t.default", "aten.narrow.default")


class _Rewriter:
    def __init__(self, graph: Graph, cx):
        self.graph = graph
        self.cx = cx
        #: the operators this rewriter added since :meth:`placed` last ran
        self.added: list[Operator] = []

    def placed(self, position: dict[int, float], here: int) -> None:
        """Give the operators added for the write at position ``here`` a position: they all sit
        right after it, before the next operator that was already there (``here + 0.5`` keeps
        every comparison with an earlier or later write as a recount of the order would)."""
        for op in self.added:
            position[id(op)] = here + 0.5
        self.added.clear()

    def _aten(self, type_: str, where: Operator, inputs: list[Operand], names: list[str], params: dict,
              like: Operand, after: Operator) -> Operand:
        out = self.graph.new_operand(f"{where.name}_{type_.split('.')[1]}", dtype=like.dtype, shape=like.shape)
        op = self.graph.add_op(type_, out.name, inputs, [out], params=params, input_names=names,
                               provenance=where.provenance, after=after)
        op.meta.update({"target": f"torch.ops.{type_}", "defaulted": []})
        op.meta.update({k: where.meta[k] for k in ("source", "module_stack") if k in where.meta})
        self.added.append(op)
        return out

    def scatter(self, view: Operator, base: Operand, value: Operand, after: Operator) -> Operand | None:
        """The value of ``base`` once ``view``'s output has become ``value``."""
        t, p = view.type, view.params
        if t in _IDENTITY:
            return value
        if t in _RESHAPES:
            if base.shape is None or not all(isinstance(d, int) for d in base.shape):
                return None
            return self._aten("aten.view.default", view, [value], ["self"], {"size": list(base.shape)}, base, after)
        if t in ("aten.slice.Tensor", "aten.narrow.default"):
            if t == "aten.narrow.default":
                start = p["start"]
                params = {"dim": p["dim"], "start": start, "end": start + p["length"], "step": 1}
            else:
                params = {k: p.get(k) for k in ("dim", "start", "end", "step")}
            if any(isinstance(v, str) for v in params.values()):
                return None
            return self._aten("aten.slice_scatter.default", view, [base, value], ["self", "src"], params, base, after)
        if t == "aten.select.int":
            if isinstance(p.get("index"), str):
                return None
            return self._aten("aten.select_scatter.default", view, [base, value], ["self", "src"],
                              {"dim": p["dim"], "index": p["index"]}, base, after)
        if t in ("aten.permute.default", "aten.transpose.int", "aten.t.default"):
            rank = len(base.shape or [])
            if t == "aten.permute.default":
                dims = [d % rank for d in p["dims"]]
            else:
                dims = list(range(rank))
                d0, d1 = (p["dim0"] % rank, p["dim1"] % rank) if t == "aten.transpose.int" else (0, 1)
                dims[d0], dims[d1] = dims[d1], dims[d0]
            inverse = [dims.index(i) for i in range(rank)]
            return self._aten("aten.permute.default", view, [value], ["self"], {"dims": inverse}, base, after)
        return None

    def refresh_views(self, old: Operand, new: Operand, here: int, position: dict[int, float],
                      after: Operator) -> None:
        """Views of ``old`` taken before the write at ``here`` and read after it (``xx = x[1]``,
        then ``x[..., 1] = ...``, then ``xx[2:4] += 1``) must see the write, as PyTorch's
        aliasing views do: each such view is taken again from ``new`` right after the write,
        and its readers after the write read that one (views of views likewise)."""
        for c in list(old.consumers):
            if not (is_aten(c) and c.type in _VIEWS and len(c.outputs) == 1 and c.inputs and c.inputs[0] is old) \
                    or position.get(id(c), here) >= here:
                continue
            out = c.outputs[0]
            if not self._read_after(out, here, position):
                continue
            fresh = self.graph.new_operand(f"{out.name}_fresh", dtype=out.dtype, shape=out.shape)
            again = self.graph.add_op(c.type, self.graph.unique_op_name(f"{c.name}_fresh"), [new, *c.inputs[1:]],
                                      [fresh], params=dict(c.params), input_names=list(c.input_names),
                                      provenance=c.provenance, after=after)
            again.meta.update({k: c.meta[k] for k in ("target", "defaulted", "source", "module_stack") if k in c.meta})
            position[id(again)] = here
            self.added.append(again)
            self.refresh_views(out, fresh, here, position, again)
            for u in list(out.consumers):
                if u is not again and position.get(id(u), -1) > here:
                    for i, x in enumerate(u.inputs):
                        if x is out:
                            self.graph.set_input(u, i, fresh)

    def _read_after(self, opd: Operand, here: int, position: dict[int, float]) -> bool:
        """Whether ``opd`` (or a view of it) is read by an operator after position ``here``."""
        for u in opd.consumers:
            if position.get(id(u), -1) > here:
                return True
            if is_aten(u) and u.type in _VIEWS and len(u.outputs) == 1 and self._read_after(u.outputs[0], here, position):
                return True
        return False

    def functionalize(self, op: Operator, position: dict[int, float]) -> None:
        written = op.meta.get("inplace") or {}
        if len(written) != 1 or not op.outputs:
            return
        arg = next(iter(written))
        if arg not in op.input_names:
            return
        current = op.inputs[op.input_names.index(arg)]
        value, last = op.outputs[0], op
        touched: list[tuple[Operand, Operand]] = []
        while current.producer is not None and is_aten(current.producer) and current.producer.type in _VIEWS:
            view = current.producer
            base = view.inputs[0]
            new = self.scatter(view, base, value, last)
            if new is None:
                reason = (f"unsupported: in-place {op.meta.get('aten_op', op.type)} writes through {view.type} "
                          f"({view.name}); the write is not seen by {base.name}")
                if self.cx is not None:
                    self.cx.diagnostics.add(Diagnostic.for_operator(op, reason, stage="functionalize_view_mutations"))
                log.warning("%s: %s", op.name, reason)
                return
            if new.producer is not None:
                last = new.producer
            touched.append((base, new))
            current, value = base, new
        here = position[id(op)]
        for base, new in touched:
            self.refresh_views(base, new, here, position, new.producer or last)
        for base, new in touched:
            for c in list(base.consumers):
                if c is new.producer or position.get(id(c), -1) <= here:
                    continue
                for i, x in enumerate(c.inputs):
                    if x is base:
                        self.graph.set_input(c, i, new)


@graph_pass("functionalize_view_mutations", "make in-place writes through views (x[a:b] = v) update the base tensor")
def run(graph: Graph, cx) -> None:
    targets = [op for op in graph.ops if op.meta.get("inplace_on_view") and is_aten(op)]
    if not targets:
        return
    rewriter = _Rewriter(graph, cx)
    # counted once: a rewrite only adds operators right after its write (Swin-T: 45 writes,
    # the order was counted again for each)
    position: dict[int, float] = {id(o): i for i, o in enumerate(graph.ops)}
    for op in targets:
        rewriter.functionalize(op, position)
        rewriter.placed(position, position[id(op)])
