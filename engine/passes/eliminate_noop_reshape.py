"""Remove ncnn ``Reshape``/``Flatten`` layers that do nothing and merge chains of them (pnnx's
``eliminate_noop`` / ``fuse_adjacent_reshape``, for the cases our rules create).

* a Reshape/Flatten whose input already has the output's ncnn shape is bypassed;
* Reshape/Flatten → Reshape/Flatten (the first used only by the second) becomes one layer
  (unless the second copies a dim from its input with 0, which would then mean another dim).

A Reshape that moves the batch axis (``12=``/``13=``) moves data between samples: it is never
a no-op and never merged.
"""
from __future__ import annotations

from ..convert.shapes import batch_dim, ncnn_shape
from ..ncnn.enums import ReshapeDim
from ..ncnn.layers import param_values
from .manager import graph_pass

_RESHAPES = ("Reshape", "Flatten")


def _only_consumer(opd, op) -> bool:
    return opd.producer is not None and len(opd.consumers) == 1 and opd.consumers[0] is op


def _copies_dims(op) -> bool:
    """A Reshape with a 0 (copy from the input) dim: its meaning depends on its input."""
    if op.type != "Reshape":
        return False
    values = param_values("Reshape", op.params)
    return any(values.get(k) == int(ReshapeDim.KEEP) for k in ("w", "h", "d", "c")) or bool(values.get("shape_expr"))


def _moves_batch(op) -> bool:
    return op.type == "Reshape" and (12 in op.params or 13 in op.params)


def _is_noop(op) -> bool:
    src, dst = ncnn_shape(op.inputs[0]), ncnn_shape(op.outputs[0])
    return src is not None and src == dst and all(isinstance(d, int) for d in src)


def _note_relabel(x, y) -> None:
    """A no-op Reshape between a batch on one axis and the same samples on another (a permute
    that only moves the batch axis: ViTDet's decomposed einsum) leaves ``x`` holding ``y``'s
    value with that axis moved: say so (``aten_layout``, see :mod:`engine.verify.mapping`), so
    verify lays PyTorch's value out along the right batch axis instead of comparing ``x`` with
    it in another order."""
    bx, by = batch_dim(x), batch_dim(y)
    if bx is None or by is None or bx == by or x.shape is None or y.shape is None or len(x.shape) != len(y.shape):
        return
    dims = [d for d in range(len(y.shape)) if d != by]
    dims.insert(bx, by)  # x == y.permute(dims)
    if [y.shape[d] for d in dims] != list(x.shape) or "aten_layout" in x.meta:
        return
    note = y.meta.get("aten_layout")
    if note is None:
        value = y.name
    elif isinstance(note, dict) and note.get("dims") is None and "view_of" not in note:
        value = note.get("value")
    else:  # y is itself re-laid out: its layout and this move are not composed here
        return
    if value is not None:
        x.meta["aten_layout"] = {"value": value, "dims": dims}


@graph_pass("eliminate_noop_reshape", "drop no-op Reshape/Flatten layers, merge chains of them")
def run(graph, cx):
    changed = True
    while changed:
        changed = False
        for op in list(graph.ops):
            if op.type not in _RESHAPES or op not in graph.ops or len(op.inputs) != 1 or _moves_batch(op):
                continue
            x = op.inputs[0]
            prev = x.producer
            if _is_noop(op):
                _note_relabel(x, op.outputs[0])
                graph.bypass(op)
                changed = True
            elif (prev is not None and prev.type in _RESHAPES and _only_consumer(x, op) and not _copies_dims(op)
                  and not _moves_batch(prev)):
                graph.set_input(op, 0, prev.inputs[0])
                op.provenance = prev.provenance.union(op.provenance)
                graph.remove_op(prev)
                changed = True
