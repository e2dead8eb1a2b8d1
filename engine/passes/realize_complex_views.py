"""Carry views and linear ops of complex tensors out on their real layout (ATen level).

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

Linear ops are the same on the real layout too: a complex zero tensor (``full``) is a real one
ending in 2; ``index_put`` of complex values into a complex tensor (core ATen's overlap-add in
a complex ``istft``) scatters their real layouts; a complex tensor times or divided by a real
one multiplies both parts (the real one given a trailing axis of 1); complex sums and
differences add the layouts (so does a product with a real number).
"""
from __future__ import annotations

import numpy as np

from ..convert.shapes import normalize_dim
from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
from ._match import number
from .fold_constants import NUMPY_DTYPES
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


def _real_layout(em: AtenEmitter, opd: Operand, reals: dict[int, Operand]) -> Operand:
    """``view_as_real(opd)``, once per operand; what a ``view_as_complex`` read, itself."""
    p = opd.producer
    if p is not None and p.type == "aten.view_as_complex.default":
        return p.inputs[0]
    if id(opd) not in reals:
        reals[id(opd)] = em.op("aten.view_as_real.default", {"self": opd}, shape=list(opd.shape) + [2],
                               dtype=REAL_OF[opd.dtype], name=f"{opd.name}_real")
    return reals[id(opd)]


def _realize(graph: Graph, op: Operator, reals: dict[int, Operand]) -> bool:
    x, out = op.inputs[0], op.outputs[0]
    if x.dtype not in REAL_OF or out.dtype != x.dtype or x.shape is None or out.shape is None or len(op.outputs) != 1:
        return False
    params = _dims(op, len(x.shape))
    if params is None:
        return False
    real = REAL_OF[x.dtype]
    em = AtenEmitter(graph, op)
    items = [("self", _real_layout(em, x, reals))] + list(zip(op.input_names[1:], op.inputs[1:]))
    y = em.op(op.type, items, shape=list(out.shape) + [2], dtype=real, name=f"{op.name}_real", param_dict=params)
    _replace_by_complex(graph, em, op, y)
    return True


def _replace_by_complex(graph: Graph, em: AtenEmitter, op: Operator, y: Operand) -> None:
    """``op``'s complex output becomes ``view_as_complex(y)`` (``y``: its real layout)."""
    out = op.outputs[0]
    em.replace(em.op("aten.view_as_complex.default", {"self": y}, shape=list(out.shape), dtype=out.dtype,
                     name=f"{op.name}_complex"))
    graph.remove_op(op)


#: linear ops and which of their tensor arguments are complex ("c") or real ("r") then
_LINEAR = {"aten.index_put.default": {"self": "c", "values": "c"}, "aten.add.Tensor": {"self": "c", "other": "c"},
           "aten.sub.Tensor": {"self": "c", "other": "c"}, "aten.mul.Tensor": {"self": "c", "other": "r"},
           "aten.div.Tensor": {"self": "c", "other": "r"}}


def _realize_linear(graph: Graph, op: Operator, reals: dict[int, Operand]) -> bool:
    out = op.outputs[0] if len(op.outputs) == 1 else None
    kinds = _LINEAR.get(op.type)
    if out is None or out.dtype not in REAL_OF or out.shape is None or kinds is None:
        return False
    args = dict(zip(op.input_names, op.inputs))
    if kinds.get("other") == "r" and "other" not in args and number(op, "other") is not None:
        kinds = {"self": "c"}  # times / divided by a real number: both parts alike
    if op.params.get("alpha", 1) != 1 or any(
            a is None or a.shape is None or (a.dtype in REAL_OF) != (kinds[k] == "c") for k, a in
            ((k, args.get(k)) for k in kinds)):
        return False
    real = REAL_OF[out.dtype]
    em = AtenEmitter(graph, op)
    items = []
    for name, opd in zip(op.input_names, op.inputs):
        if kinds.get(name) == "c":
            opd = _real_layout(em, opd, reals)
        elif kinds.get(name) == "r":
            opd = em.op("aten.unsqueeze.default", {"self": opd}, shape=list(opd.shape) + [1], dtype=opd.dtype,
                        name=f"{opd.name}_pair", dim=len(opd.shape))
        items.append((name, opd))
    y = em.op(op.type, items, shape=list(out.shape) + [2], dtype=real, name=f"{op.name}_real",
              param_dict=dict(op.params))
    _replace_by_complex(graph, em, op, y)
    return True


def _realize_zeros(graph: Graph, op: Operator) -> bool:
    """A complex ``full`` of a real value: a real one ending in 2 (imaginary parts zero)."""
    out = op.outputs[0]
    value = op.params.get("fill_value")
    if out.dtype not in REAL_OF or out.shape is None or not isinstance(value, (int, float)) or value != 0:
        return False
    if not all(isinstance(d, int) for d in out.shape):
        return False
    em = AtenEmitter(graph, op)
    y = em.constant(np.zeros(list(out.shape) + [2], NUMPY_DTYPES[REAL_OF[out.dtype]]), name=f"{op.name}_real")
    _replace_by_complex(graph, em, op, y)
    return True


@graph_pass("realize_complex_views", "carry views and linear ops of complex tensors out on their real layout")
def run(graph: Graph, cx) -> None:
    reals: dict[int, Operand] = {}
    for op in list(graph.ops):
        if op.type == "aten.full.default" and not op.inputs:
            _realize_zeros(graph, op)
        elif op.inputs and op.inputs[0].dtype in REAL_OF and not _realize(graph, op, reals):
            _realize_linear(graph, op, reals)
