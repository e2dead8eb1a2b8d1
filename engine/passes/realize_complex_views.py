"""Carry shape-only views of complex tensors out on their real layout (ATen level).

ncnn has no complex numbers: a complex tensor lives in ncnn as its ``view_as_real`` layout, the
real and imaginary parts innermost. A view that only moves or regroups the complex elements —
``squeeze``, ``unsqueeze``, ``permute``, ``transpose``, ``view``/``reshape``, ``select`` and
``slice`` on a complex dim — is the same view of that real layout with a trailing axis of 2
kept in place, so each becomes::

    view_as_complex(VIEW'(view_as_real(x)))

(``VIEW'``: negative dims resolved, ``permute`` keeping the last axis last, sizes ending in 2).
The complex value it produced is then only read through the views, which the spectral
converters take as no layers. Core ATen writes an ``stft`` of a 1-D signal as one of a batch of
one, squeezed afterwards; without this, the squeeze of the complex spectrum was refused.
"""
from __future__ import annotations

from ..convert.shapes import normalize_dim
from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
from .manager import graph_pass

#: the real dtype of each complex one
REAL_OF = {"c64": "f32", "c128": "f64", "c32": "f16"}


def _dims(op: Operator, rank: int) -> dict | None:
    """The params of ``op`` as the same view of the real layout (None: not a view handled)."""
    p, t = dict(op.params), op.type
    if t == "aten.squeeze.dims":
        p["dim"] = [normalize_dim(d, rank) for d in p["dim"]]
    elif t in ("aten.squeeze.dim", "aten.select.int", "aten.slice.Tensor"):
        p["dim"] = normalize_dim(p.get("dim", 0), rank)
    elif t == "aten.unsqueeze.default":
        p["dim"] = normalize_dim(p["dim"], rank + 1)
    elif t == "aten.permute.default":
        p["dims"] = [normalize_dim(d, rank) for d in p["dims"]] + [rank]
    elif t == "aten.transpose.int":
        p["dim0"], p["dim1"] = normalize_dim(p["dim0"], rank), normalize_dim(p["dim1"], rank)
    elif t in ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default"):
        key = "shape" if t == "aten.reshape.default" else "size"
        p[key] = list(p[key]) + [2]
    else:
        return None
    return p


def _realize(graph: Graph, op: Operator, reals: dict[int, Operand]) -> bool:
    x, out = op.inputs[0], op.outputs[0]
    if x.dtype not in REAL_OF or out.dtype != x.dtype or x.shape is None or out.shape is None or len(op.outputs) != 1:
        return False
    params = _dims(op, len(x.shape))
    if params is None:
        return False
    real = REAL_OF[x.dtype]
    em = AtenEmitter(graph, op)
    if id(x) not in reals:
        reals[id(x)] = em.op("aten.view_as_real.default", {"self": x}, shape=list(x.shape) + [2], dtype=real,
                             name=f"{x.name}_real")
    items = [("self", reals[id(x)])] + list(zip(op.input_names[1:], op.inputs[1:]))
    y = em.op(op.type, items, shape=list(out.shape) + [2], dtype=real, name=f"{op.name}_real")
    y.producer.params.update(params)  # (reshape's own "shape" param would clash with em.op's)
    em.replace(em.op("aten.view_as_complex.default", {"self": y}, shape=list(out.shape), dtype=out.dtype,
                     name=f"{op.name}_complex"))
    graph.remove_op(op)
    return True


@graph_pass("realize_complex_views", "carry views of complex tensors out on their real layout")
def run(graph: Graph, cx) -> None:
    reals: dict[int, Operand] = {}
    for op in list(graph.ops):
        if op.inputs and op.inputs[0].dtype in REAL_OF:
            _realize(graph, op, reals)
