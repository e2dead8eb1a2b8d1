"""Matrix products between computed tensors: matmul, mm, bmm, baddbmm, addmm, einsum.

(A product with a constant 2-D right operand is a linear layer: :mod:`.linear` takes those;
each validator here refuses what the other family accepts, so both live in the registry.)

ATen → pnnx:

* ``aten.matmul.default``, ``aten.mm.default``, ``aten.bmm.default`` → ``torch.matmul``;
* ``aten.baddbmm.default`` / ``aten.addmm.default`` (``beta * self + alpha * (a @ b)``) →
  ``torch.matmul`` and a ``pnnx.Expression`` for the scaling and the sum;
* ``aten.einsum.default`` (an implicit output is numpy's: the indices that appear once, in
  alphabetical order): indices only one operand has and the output does not are summed first
  (``torch.sum``); then operands are multiplied left to right, two at a time — permuted to
  ``(batch..., free..., summed...)`` / ``(batch..., summed..., free...)``, the free and summed
  groups reshaped to one axis each when there are several, ``torch.matmul`` — keeping the
  indices later operands or the output read; the last result is permuted to the output order
  (a one-operand equation that only reorders axes is just that permute). An equation with a
  diagonal (an index repeated within an operand, a trace) → ``torch.einsum`` (``equation``,
  explicit). Static shapes only.

pnnx → ncnn: ``torch.einsum`` → ``Einsum`` (a direct loop over every index: slower than
``MatMul``, used only where the decomposition does not apply), its equation over the
batch-less blobs — the batch index dropped from the terms that carry it, the output's indices
renamed ``i j k l`` in order and the summed ones ``m``… (the runtime's convention); the result
needs 1 to 4 dims (or is a trace ``ii``). ``torch.matmul`` → ``MatMul`` (ncnn broadcasts the batch-less leading dims as numpy does). A right
operand that is a ``Permute`` swapping its last two axes, read by nothing else, is taken
unpermuted with ``transB=1`` (pnnx's ``fuse_transpose_matmul``). When ncnn's result rank
differs from PyTorch's batch-less one (vector operands, a batch axis that became a plain 1), a
``Reshape`` follows.
"""
from __future__ import annotations

import logging
import math
import string
from numbers import Number

import numpy as np

from ..convert.context import Unsupported
from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import batch_dim, ncnn_shape
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
def parse_einsum(equation: str) -> tuple[list[str], str]:
    """The operand terms and the output term of ``equation`` (numpy's implicit output when it
    has no ``->``: the indices that appear once, in alphabetical order)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if not arrow:
        letters = "".join(ins)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return ins, out


def expand_ellipsis(equation: str, ranks: list[int]) -> str:
    """``equation`` with each ``...`` spelled out as letters it does not use, for operands of
    ``ranks`` (the ellipsis dims broadcast right-aligned, numpy's rule; with no ``->`` they lead
    the output)."""
    eq = equation.replace(" ", "")
    if "..." not in eq:
        return eq
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ranks):
        raise ValueError(f"{len(ins)} terms for {len(ranks)} operands")
    free = [c for c in string.ascii_letters if c not in eq]
    widths = [r - len(t.replace("...", "")) if "..." in t else 0 for t, r in zip(ins, ranks)]
    if min(widths) < 0:
        raise ValueError("an operand has fewer dims than its term")
    letters = "".join(free[:max(widths)])
    spelled = [t.replace("...", letters[len(letters) - w:]) for t, w in zip(ins, widths)]
    if not arrow:
        joined = "".join(t.replace("...", "") for t in ins)
        out = "..." + "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    return ",".join(spelled) + "->" + out.replace("...", letters)


class _Einsum:
    """A parsed einsum over operands of static shapes: index sizes, output, and whether it
    needs the runtime's Einsum layer (``general``)."""

    def __init__(self, ctx, equation: str, operands: list[Operand]):
        try:
            equation = expand_ellipsis(equation, [len(o.shape or ()) for o in operands])
        except ValueError as e:
            ctx.unsupported(f"einsum {equation!r}: {e}")
        self.ins, self.out = parse_einsum(equation)
        self.equation = ",".join(self.ins) + "->" + self.out
        if len(self.ins) != len(operands) or not operands:
            ctx.unsupported(f"einsum {equation!r} with {len(operands)} operands")
        for term, opd in zip(self.ins, operands):
            if opd.shape is None or len(opd.shape) != len(term) or not _static(opd):
                ctx.unsupported(f"einsum operand {opd.name} {opd.shape} does not have a static shape matching {term!r}")
        if len(set(self.out)) != len(self.out) or not set(self.out) <= set("".join(self.ins)):
            ctx.unsupported(f"einsum {equation!r}: bad output indices")
        self.size = {}
        for term, opd in zip(self.ins, operands):
            for ch, d in zip(term, opd.shape):
                if self.size.setdefault(ch, d) != d:
                    ctx.unsupported(f"einsum {equation!r}: index {ch} has sizes {self.size[ch]} and {d}")

    @property
    def general(self) -> bool:
        """Whether the equation takes a diagonal (an index repeated within an operand): the
        rest are sums, permutations and products of pairs."""
        return any(len(set(t)) != len(t) for t in self.ins)

    @property
    def order(self) -> str:
        """Every index, the output's first (the order of the grouped axes of each product)."""
        seen = dict.fromkeys(self.out + "".join(self.ins))
        return "".join(seen)


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


def _sum_own(ctx, es: _Einsum, term: str, x: Operand, needed: set) -> tuple[str, Operand]:
    """Sum away the indices of ``x`` that nothing else needs."""
    dims = [i for i, c in enumerate(term) if c not in needed]
    if not dims:
        return term, x
    kept = "".join(c for c in term if c in needed)
    y = ctx.emit("torch.sum", [x], params={"dim": dims, "keepdim": False}, shape=[es.size[c] for c in kept])
    if not kept or 0 in dims:
        y.producer.meta["batch_out"] = [False]
    return kept, y


def _einsum_pair(ctx, es: _Einsum, ta: str, a: Operand, tb: str, b: Operand, needed: set) -> tuple[str, Operand]:
    """Contract two operands into the indices ``needed`` later: a ``torch.matmul`` of
    ``(batch, free_a, summed)`` by ``(batch, summed, free_b)`` (groups in output order)."""
    rank = {c: i for i, c in enumerate(es.order)}
    batch = sorted((c for c in ta if c in tb and c in needed), key=rank.get)
    free_a = sorted((c for c in ta if c not in tb), key=rank.get)
    free_b = sorted((c for c in tb if c not in ta), key=rank.get)
    summed = [c for c in ta if c in tb and c not in needed]
    a = _permute(ctx, a, [ta.index(c) for c in batch + free_a + summed])
    b = _permute(ctx, b, [tb.index(c) for c in batch + summed + free_b])
    bs = [es.size[c] for c in batch]
    m, k, n = (math.prod(es.size[c] for c in g) for g in (free_a, summed, free_b))
    a = _reshape(ctx, a, bs + [m, k])
    b = _reshape(ctx, b, bs + [k, n])
    y = emit_matmul(ctx, a, b)
    grouped = batch + free_a + free_b
    return "".join(grouped), _reshape(ctx, y, [es.size[c] for c in grouped])


@aten_converter("aten.einsum.default")
def einsum(ctx, op):
    es = _Einsum(ctx, str(op.params.get("equation", "")), list(op.inputs))
    if es.general:
        return ctx.emit("torch.einsum", list(op.inputs), params={"equation": es.equation})
    terms = list(zip(es.ins, op.inputs))
    for k, (term, x) in enumerate(terms):
        others = set(es.out).union(*(t for j, (t, _) in enumerate(terms) if j != k))
        terms[k] = _sum_own(ctx, es, term, x, others)
    while len(terms) > 1:  # left to right, each product keeping what later operands and the output read
        (ta, a), (tb, b), rest = terms[0], terms[1], terms[2:]
        terms = [_einsum_pair(ctx, es, ta, a, tb, b, set(es.out).union(*(t for t, _ in rest)))] + rest
    term, y = terms[0]
    return _permute(ctx, y, [term.index(c) for c in es.out])


#: index letters of ncnn's Einsum: the output's (in order), then the summed ones
_NCNN_OUT, _NCNN_SUMMED = "ijkl", "mnopqrstuvwx"


def ncnn_einsum_equation(op) -> str:
    """The runtime's equation for ``torch.einsum`` ``op`` over batch-less blobs (raises
    :class:`Unsupported` when it has none)."""
    ins, out = parse_einsum(op.params["equation"])
    terms = []
    for term, x in zip(ins, op.inputs):
        b = batch_dim(x)
        terms.append(term if b is None else term[:b] + term[b + 1:])
    bo = batch_dim(op.outputs[0])
    out = out if bo is None else out[:bo] + out[bo + 1:]
    if not all(1 <= len(t) <= 4 for t in terms):
        raise Unsupported(f"unsupported: einsum {op.params['equation']!r} of blobs with 0 or more than 4 dims")
    if not out:
        if len(terms) == 1 and len(terms[0]) == 2 and terms[0][0] == terms[0][1]:
            return "ii"  # the runtime's trace
        raise Unsupported(f"unsupported: einsum {op.params['equation']!r} to a scalar (ncnn's Einsum needs a tensor)")
    summed = sorted(set("".join(terms)) - set(out))
    if len(out) > len(_NCNN_OUT) or len(summed) > len(_NCNN_SUMMED):
        raise Unsupported(f"unsupported: einsum {op.params['equation']!r} with more than 4 output or 12 summed indices")
    rename = dict(zip(out, _NCNN_OUT)) | dict(zip(summed, _NCNN_SUMMED))
    return ",".join("".join(rename[c] for c in t) for t in terms) + "->" + "".join(rename[c] for c in out)


def _check_einsum(op, ctx):
    try:
        ncnn_einsum_equation(op)
    except Unsupported as e:
        return str(e)
    return None


@ncnn_rule("torch.einsum", validator=_check_einsum)
def einsum_layer(ctx, op):
    equation = ncnn_einsum_equation(op)
    y = ctx.layer("Einsum", list(op.inputs), equation=[ord(c) for c in equation])
    want = ncnn_shape(op.outputs[0])
    if equation == "ii" and want != [1]:
        return reshape_to(ctx, intermediate(y, [1]), want, final=True)
    return y


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


def _static_size(shape) -> int | None:
    return math.prod(shape) if shape and all(isinstance(d, int) for d in shape) else None


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
    if _static_size(natural) != _static_size(want):  # a layout that ncnn's MatMul cannot compute
        ctx.unsupported(f"matmul of {a.name} and {b.name}: ncnn's MatMul of the samples gives {natural}, "
                        f"not the {want} of each output sample")
    y = intermediate(ctx.layer("MatMul", [a, b], **params), natural or [1])
    return reshape_to(ctx, y, want, final=True)
