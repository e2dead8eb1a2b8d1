"""Fuse same-shape sums into one ncnn ``Eltwise`` SUM (ncnn level).

A tensor–tensor ``BinaryOp`` ADD/SUB is the root of a weighted sum whose terms are found by
following, through values read by nothing else, further ADD/SUB ``BinaryOp``s and Eltwise SUMs
(their terms, signed) and scalar multiplications ``BinaryOp MUL with_scalar=1`` (a
coefficient). When the sum absorbs at least one layer and every term has the result's shape
(Eltwise does not broadcast), the chain becomes ``Eltwise op_type=SUM coeffs=[...]`` (no
coeffs when all are 1): ``a*2 + b`` (pnnx's ``fuse_binaryop_eltwise``), ``add(x, y, alpha=2)``,
``a - b*0.5``, ``a + b + c``. A plain ``a + b`` / ``a - b`` stays a BinaryOp (one layer either way).
"""
from __future__ import annotations

from ..convert.shapes import ncnn_shape
from ..ir import Operand, Operator
from ..ncnn.enums import BinaryOpType, EltwiseOp
from ..ncnn.layers import make_params, resolve_params
from ._rewrite import replace_chain
from .manager import graph_pass


def _sole_reader(opd: Operand, graph_outputs: set[int]) -> bool:
    return len(opd.consumers) == 1 and id(opd) not in graph_outputs


def _is_sum(op: Operator) -> bool:
    if op.type == "BinaryOp" and len(op.inputs) == 2:
        p = resolve_params("BinaryOp", op.params)
        return p["with_scalar"] == 0 and p["op_type"] in (BinaryOpType.ADD, BinaryOpType.SUB)
    return op.type == "Eltwise" and resolve_params("Eltwise", op.params)["op_type"] == EltwiseOp.SUM


def _scale_of(op: Operator) -> float | None:
    if op.type == "BinaryOp" and len(op.inputs) == 1:
        p = resolve_params("BinaryOp", op.params)
        if p["with_scalar"] == 1 and p["op_type"] == BinaryOpType.MUL:
            return float(p["b"])
    return None


def _signed_inputs(op: Operator) -> list[tuple[Operand, float]]:
    if op.type == "Eltwise":
        coeffs = list(resolve_params("Eltwise", op.params)["coeffs"]) or [1.0] * len(op.inputs)
        return list(zip(op.inputs, coeffs))
    sub = resolve_params("BinaryOp", op.params)["op_type"] == BinaryOpType.SUB
    return [(op.inputs[0], 1.0), (op.inputs[1], -1.0 if sub else 1.0)]


class _Sum:
    """The terms ``(operand, coefficient)`` of a sum rooted at one layer, and the layers it absorbs."""

    def __init__(self, shape, graph_outputs: set[int]):
        self.shape, self.graph_outputs = shape, graph_outputs
        self.terms: list[tuple[Operand, float]] = []
        self.absorbed: list[Operator] = []

    def add(self, opd: Operand, coeff: float) -> None:
        p = opd.producer
        if p is not None and _sole_reader(opd, self.graph_outputs) and ncnn_shape(opd) == self.shape:
            scale = _scale_of(p)
            if scale is not None:
                self.absorbed.append(p)
                self.add(p.inputs[0], coeff * scale)
                return
            if _is_sum(p):
                self.absorbed.append(p)
                for x, c in _signed_inputs(p):
                    self.add(x, coeff * c)
                return
        self.terms.append((opd, coeff))


def _reads_a_layer_to_absorb(op: Operator) -> bool:
    """Whether an input comes from a layer a sum can absorb (a scale or a sum: a BinaryOp or an
    Eltwise); without one nothing fuses, whatever the params (not resolved then)."""
    return any(x.producer is not None and x.producer.type in ("BinaryOp", "Eltwise") for x in op.inputs)


def _known(shape) -> bool:
    return shape is not None and all(d is not None for d in shape)


@graph_pass("fuse_binaryop_eltwise", "fuse same-shape weighted sums (a*2 + b, a + b + c...) into one Eltwise SUM")
def run(graph, cx):
    graph_outputs = {id(o.inputs[0]) for o in graph.ops if o.type == "Output" and o.inputs}
    removed: set[int] = set()
    for op in list(graph.ops):
        if id(op) in removed or op.type != "BinaryOp" or not _reads_a_layer_to_absorb(op) or not _is_sum(op):
            continue
        shape = ncnn_shape(op.outputs[0])
        if not _known(shape):
            continue
        s = _Sum(shape, graph_outputs)
        for x, c in _signed_inputs(op):
            s.add(x, c)
        if not s.absorbed or any(ncnn_shape(t) != shape for t, _ in s.terms):
            continue
        coeffs = [c for _, c in s.terms]
        params = make_params("Eltwise", op_type=EltwiseOp.SUM,
                             coeffs=None if all(c == 1.0 for c in coeffs) else coeffs)
        replace_chain(graph, op, s.absorbed, "Eltwise", [t for t, _ in s.terms], params=params)
        removed.update(id(o) for o in [op, *s.absorbed])
