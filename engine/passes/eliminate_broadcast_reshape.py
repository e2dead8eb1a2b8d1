"""Drop a ``Reshape`` that only lines a vector up for a ``BinaryOp`` when ncnn's own broadcast
already does it (pnnx's binaryop broadcast cleanup).

``y.reshape(4, 1, 1) * x`` with ``x`` a ``(4, 5, 7)`` blob: ncnn's BinaryOp expands a 1-D
operand of length ``n`` to ``(n, 1, 1)`` when ``n`` is the other operand's outermost dim
(:func:`engine.converters._broadcast.implicit_expansion`), which is what the Reshape made. A
``Reshape``/``ExpandDims`` from a 1-D blob whose result is read only by two-input BinaryOps for
which that holds is bypassed.
"""
from __future__ import annotations

from ..converters._broadcast import implicit_expansion
from ..convert.shapes import ncnn_shape
from .manager import graph_pass

_LINERS = ("Reshape", "ExpandDims")


def _implicit_for_every_reader(opd, src: list, made: list) -> bool:
    """Whether every reader of ``opd`` (``made``, from the 1-D ``src``) is a BinaryOp whose other
    operand makes ncnn expand ``src`` to ``made`` by itself."""
    for c in opd.consumers:
        if c.type != "BinaryOp" or len(c.inputs) != 2 or c.inputs[0] is c.inputs[1]:
            return False
        other = c.inputs[1] if c.inputs[0] is opd else c.inputs[0]
        ref = ncnn_shape(other)
        if ref is None or len(ref) != len(made) or implicit_expansion(src, ref, len(ref)) != made:
            return False
    return True


@graph_pass("eliminate_broadcast_reshape", "drop Reshapes that line a vector up where ncnn's BinaryOp broadcast does")
def run(graph, cx):
    for op in list(graph.ops):
        if op.type not in _LINERS or len(op.inputs) != 1 or len(op.outputs) != 1 or 12 in op.params or 13 in op.params:
            continue
        src, out = ncnn_shape(op.inputs[0]), op.outputs[0]
        made = ncnn_shape(out)
        if src is None or made is None or len(src) != 1 or len(made) < 2 or not out.consumers:
            continue
        if _implicit_for_every_reader(out, src, made):
            graph.bypass(op)
