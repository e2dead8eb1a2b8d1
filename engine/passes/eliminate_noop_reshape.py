"""Remove ncnn ``Reshape``/``Flatten`` layers that do nothing, merge chains of them, and fold a
flatten after a 1×1 adaptive pooling into global pooling (pnnx's ``eliminate_noop`` and
``legalize_global_pooling_layout``, for the cases our rules create).

* a Reshape/Flatten whose input already has the output's ncnn shape is bypassed;
* Reshape/Flatten → Reshape/Flatten (the first used only by the second) becomes one layer
  (unless the second copies a dim from its input with 0, which would then mean another dim);
* ``Pooling`` (adaptive 1×1) → Flatten/Reshape to (C) becomes ``Pooling`` (global), whose
  result is already (C).
"""
from __future__ import annotations

from ..convert.shapes import ncnn_shape
from ..ncnn.enums import ReshapeDim
from ..ncnn.layers import make_params, param_values
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


def _adopt_output(graph, keep, drop) -> None:
    """``keep`` takes over ``drop``'s output (uses, shape, meta) and provenance; ``drop`` goes."""
    out, old = keep.outputs[0], drop.outputs[0]
    graph.replace_all_uses(old, out)
    out.shape = None if old.shape is None else list(old.shape)
    out.meta = dict(old.meta)
    keep.provenance = keep.provenance.union(drop.provenance)
    graph.remove_op(drop)


def _is_noop(op) -> bool:
    src, dst = ncnn_shape(op.inputs[0]), ncnn_shape(op.outputs[0])
    return src is not None and src == dst and all(isinstance(d, int) for d in src)


def _adaptive_1x1(op) -> bool:
    if op.type != "Pooling":
        return False
    v = param_values("Pooling", op.params)
    return v.get("adaptive_pooling") == 1 and v.get("out_w") == 1 and v.get("out_h", 1) == 1


@graph_pass("eliminate_noop_reshape", "drop no-op Reshape/Flatten, merge reshape chains, pool+flatten → global pool")
def run(graph, cx):
    changed = True
    while changed:
        changed = False
        for op in list(graph.ops):
            if op.type not in _RESHAPES or op not in graph.ops or len(op.inputs) != 1:
                continue
            x = op.inputs[0]
            prev = x.producer
            if _is_noop(op):
                graph.bypass(op)
                prev = None
                changed = True
            elif prev is not None and prev.type in _RESHAPES and _only_consumer(x, op) and not _copies_dims(op):
                graph.set_input(op, 0, prev.inputs[0])
                op.provenance = prev.provenance.union(op.provenance)
                graph.remove_op(prev)
                changed = True
            elif prev is not None and _adaptive_1x1(prev) and _only_consumer(x, op) and len(ncnn_shape(op.outputs[0]) or []) == 1:
                kind = param_values("Pooling", prev.params).get("pooling_type", 0)
                prev.params = make_params("Pooling", pooling_type=kind, global_pooling=1)
                _adopt_output(graph, prev, op)
                changed = True
