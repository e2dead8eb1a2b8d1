"""Matrix products between computed tensors: matmul, mm, bmm, baddbmm, addmm, einsum.

(A product with a constant 2-D right operand is a linear layer: :mod:`.linear` takes those;
each validator here refuses what the other family accepts, so both live in the registry.)

ATen → pnnx:

* ``aten.matmul.default``, ``aten.mm.default``, ``aten.bmm.default`` → ``torch.matmul``;
* ``aten.baddbmm.default`` / ``aten.addmm.default`` (``beta * self + alpha * (a @ b)``) →
  ``torch.matmul`` and a ``pnnx.Expression`` for the scaling and the sum;
* ``aten.einsum.default`` with one or two operands whose equation is a contraction (every
  index appears in at most two places, none repeated within an operand): the operands are
  permuted to ``(batch..., free..., summed...)`` / ``(batch..., summed..., free...)``, the free
  and summed groups reshaped to one axis each when there are several, multiplied with
  ``torch.matmul``, and the result reshaped/permuted to the output order. A one-operand
  equation that only reorders axes is a permute. Static shapes only.

pnnx → ncnn: ``MatMul`` (ncnn broadcasts the batch-less leading dims as numpy does). A right
operand that is a ``Permute`` swapping its last two axes, read by nothing else, is taken
unpermuted with ``transB=1`` (pnnx's ``fuse_transpose_matmul``). When ncnn's result rank
differs from PyTorch's batch-less one (vector operands, a batch axis that became a plain 1), a
``Reshape`` follows.
"""
from __future__ import annotations

import logging
import math
from numbers import Number

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_shape
from ..ir import Operand
from ._expression import ExpressionBuilder
from ._weights import matmul_weight
from .shape import intermediate, reshape_to

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- ATen → pnnx
def _static(opd: Operand) -> bool:
    return opd.shape is not None and all(isinstance(d, int) for d in opd.shape)


def _mark(opd: Operand, shape) -> Operand:
    opd.shape = list(shape)
    return opd


def matmul_result_shape(a, b) -> list:
    """numpy's matmul result shape (static or symbolic dims)."""
    if len(a) == 1 and len(b) == 1:
        return []
    a2 = [1] + list(a) if len(a) == 1 else list(a)
    b2 = list(b) + [1] if len(b) == 1 else list(b)
    batch_a, batch_b = a2[:-2], b2[:-2]
    n = max(len(batch_a), len(batch_b))
    batch_a, batch_b = [1] * (n - len(batch_a)) + batch_a, [1] * (n - len(batch_b)) + batch_b
    batch = [y if x == 1 else x for x, y in zip(batch_a, batch_b)]
    out = batch + [a2[-2], b2[-1]]
    if len(a) == 1:
        out.pop(-2)
    if len(b) == 1:
        out.pop(-1)
    return out


def emit_matmul(ctx, a: Operand, b: Operand) -> Operand:
    """``torch.matmul(a, b)`` with its output shape set (usable by other families)."""
    y = ctx.emit("torch.matmul", [a, b], input_names=["input", "other"])
    return _mark(y, matmul_result_shape(a.shape, b.shape)) if a.shape is not None and b.shape is not None else y


def _computed_right(op, ctx):
    """Refuse what :mod:`.linear` converts (a constant 2-D right operand)."""
    right = op.inputs[2] if op.type == "aten.addmm.default" else op.inputs[1]
    if op.type != "aten.bmm.default" and matmul_weight(ctx, right) is not None:
        return f"unsupported: {op.type} with a constant 2-D right operand is a linear layer (linear family)"
    for x in op.inputs:
        if x.shape is None:
            return f"unsupported: {op.type} operand {x.name} of unknown shape"
    return None


@aten_converter("aten.matmul.default", "aten.mm.default", "aten.bmm.default", validator=_computed_right)
def matmul(ctx, op):
    return emit_matmul(ctx, op.inputs[0], op.inputs[1])


def _number(ctx, op, key) -> float:
    v = op.params.get(key, 1)
    if not isinstance(v, Number) or isinstance(v, bool):
        ctx.unsupported(f"{key}={v!r} is not a constant number")
    return float(v)


def _scaled(e: ExpressionBuilder, term: str, factor: float) -> str:
    return term if factor == 1.0 else e.call("mul", term, e.literal(factor))


@aten_converter("aten.baddbmm.default", "aten.addmm.default", validator=_computed_right)
def add_matmul(ctx, op):
    bias, a, b = op.inputs[:3]
    beta, alpha = _number(ctx, op, "beta"), _number(ctx, op, "alpha")
    prod = emit_matmul(ctx, a, b)
    if beta == 0.0:  # PyTorch ignores self (even NaN) when beta is 0
        if alpha == 1.0:
            return prod
        e = ExpressionBuilder()
        return ctx.emit("pnnx.Expression", [prod], params={"expr": _scaled(e, e.input(prod), alpha)})
    e = ExpressionBuilder()
    p = _scaled(e, e.input(prod), alpha)
    value = ctx.const_value(bias)
    if value is not None and np.size(value) == 1 and len(bias.shape or []) <= len(op.outputs[0].shape or []):
        s = e.literal(float(np.asarray(value).reshape(-1)[0]) * beta)
    else:
        s = _scaled(e, e.input(bias), beta)
    return ctx.emit("pnnx.Expression", e.inputs, params={"expr": e.call("add", p, s)})


# ---------------------------------------------------------------------------- einsum
class _Einsum:
    """A parsed two-operand contraction, or a one-operand permutation."""

    def __init__(self, ctx, equation: str, operands: list[Operand]):
        eq = equation.replace(" ", "")
        if "..." in eq:
            ctx.unsupported(f"einsum {equation!r} with an ellipsis")
        if "->" not in eq:
            ctx.unsupported(f"einsum {equation!r} without an explicit output")
        lhs, self.out = eq.split("->")
        self.ins = lhs.split(",")
        if len(self.ins) != len(operands) or len(operands) not in (1, 2):
            ctx.unsupported(f"einsum {equation!r} with {len(operands)} operands (1 or 2 supported)")
        for term, opd in zip(self.ins, operands):
            if len(set(term)) != len(term):
                ctx.unsupported(f"einsum {equation!r} repeats an index within an operand (a diagonal)")
            if opd.shape is None or len(opd.shape) != len(term) or not _static(opd):
                ctx.unsupported(f"einsum operand {opd.name} {opd.shape} does not have a static shape matching {term!r}")
        if len(set(self.out)) != len(self.out) or not set(self.out) <= set("".join(self.ins)):
            ctx.unsupported(f"einsum {equation!r}: bad output indices")
        self.size = {}
        for term, opd in zip(self.ins, operands):
            for ch, d in zip(term, opd.shape):
                if self.size.setdefault(ch, d) != d:
                    ctx.unsupported(f"einsum {equation!r}: index {ch} has sizes {self.size[ch]} and {d}")


def _permute(ctx, x: Operand, dims: list[int]) -> Operand:
    if dims == list(range(len(dims))):
        return x
    y = ctx.emit("Tensor.permute", [x], params={"dims": dims}, shape=[x.shape[d] for d in dims])
    if dims[0] != 0:
        y.producer.meta["batch_out"] = [False]
    return y


def _reshape(ctx, x: Operand, shape: list[int]) -> Operand:
    if list(x.shape) == list(shape):
        return x
    y = ctx.emit("Tensor.reshape", [x], params={"shape": list(shape)}, shape=shape)
    if not shape or not x.shape or shape[0] != x.shape[0]:
        y.producer.meta["batch_out"] = [False]
    return y


def _einsum_pair(ctx, es: _Einsum, a: Operand, b: Operand) -> Operand:
    ta, tb, out = es.ins[0], es.ins[1], es.out
    for ch in set(ta + tb):
        if ch not in out and (ch not in ta or ch not in tb):
            ctx.unsupported(f"einsum sums index {ch} of one operand only")
    batch = [c for c in out if c in ta and c in tb]
    free_a = [c for c in out if c in ta and c not in tb]
    free_b = [c for c in out if c in tb and c not in ta]
    summed = [c for c in ta if c in tb and c not in out]
    a = _permute(ctx, a, [ta.index(c) for c in batch + free_a + summed])
    b = _permute(ctx, b, [tb.index(c) for c in batch + summed + free_b])
    bs = [es.size[c] for c in batch]
    m, k, n = (math.prod(es.size[c] for c in g) for g in (free_a, summed, free_b))
    a = _reshape(ctx, a, bs + [m, k])
    b = _reshape(ctx, b, bs + [k, n])
    y = emit_matmul(ctx, a, b)
    grouped = batch + free_a + free_b
    y = _reshape(ctx, y, [es.size[c] for c in grouped])
    return _permute(ctx, y, [grouped.index(c) for c in out])


@aten_converter("aten.einsum.default")
def einsum(ctx, op):
    es = _Einsum(ctx, str(op.params.get("equation", "")), list(op.inputs))
    if len(op.inputs) == 1:
        if sorted(es.ins[0]) != sorted(es.out):
            ctx.unsupported(f"einsum {op.params['equation']!r} on one operand that is not a permutation")
        return _permute(ctx, op.inputs[0], [es.ins[0].index(c) for c in es.out])
    return _einsum_pair(ctx, es, op.inputs[0], op.inputs[1])


# ---------------------------------------------------------------------------- pnnx → ncnn
#: Permute order_type that swaps the two innermost axes, for every blob rank (lexicographic
#: numbering of the permutations: (1, 0), (0, 2, 1), (0, 1, 3, 2) are all number 1)
_SWAP_LAST_TWO = 1


def _untransposed(b: Operand) -> Operand | None:
    """The input of a last-two-axes ``Permute`` producing ``b`` that nothing else reads."""
    p = b.producer
    if p is None or p.type != "Permute" or len(b.consumers) != 1:
        return None
    shape = ncnn_shape(p.inputs[0])
    if shape is None or len(shape) < 2 or int(p.params.get(0, 0)) != _SWAP_LAST_TWO:
        return None
    return p.inputs[0]


def _ncnnmatmul_result_shape(a: list, b: list, trans_b: bool) -> list:
    """The shape ncnn's MatMul gives (matmul.cpp): numpy's, except a vector against a stack."""
    if trans_b and len(b) >= 2:
        b = b[:-2] + [b[-1], b[-2]]
    if len(a) == 1 and len(b) > 2:
        return b[:-3] + [b[-3], b[-1]] if len(b) == 4 else [b[-3], b[-1]]
    if len(b) == 1 and len(a) > 2:
        return a[:-1]
    return matmul_result_shape(a, b)


def _check_ranks(op, ctx):
    for x in op.inputs[:2]:
        s = ncnn_shape(x)
        if s is None:
            return f"unsupported: matmul operand {x.name} of unknown shape"
        if not 1 <= len(s) <= 4:
            return f"unsupported: matmul operand {x.name} {x.shape} has {len(s)} dims without the batch axis"
    return None


@ncnn_rule("torch.matmul", validator=_check_ranks)
def matmul_layer(ctx, op):
    a, b = op.inputs[:2]
    trans_b = False
    src = _untransposed(b)
    if src is not None:
        b, trans_b = src, True
    natural = _ncnnmatmul_result_shape(ncnn_shape(a), ncnn_shape(b), trans_b)
    want = ncnn_shape(op.outputs[0])
    params = {"transB": 1} if trans_b else {}
    if natural == want:
        return ctx.layer("MatMul", [a, b], **params)
    y = intermediate(ctx.layer("MatMul", [a, b], **params), natural or [1])
    return reshape_to(ctx, y, want, final=True)
