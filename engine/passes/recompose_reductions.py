"""Put decomposed reductions back together (ATen level, before lowering).

=====================================================================  ===========================
chain (``x`` the input)                                                 becomes
=====================================================================  ===========================
``log(sum(exp(x - m), dims, keepdim)) + squeeze(m, dims)`` with         ``aten.logsumexp.default``
``m = where(abs(a) == inf, 0, a)``, ``a = amax(x, dims, keepdim=True)``  (``dims, keepdim``)
(core ATen's ``logsumexp``; no squeeze when ``keepdim``)
=====================================================================  ===========================

The guard ``where`` is what keeps core ATen's form from converting op by op (ncnn has no
comparison or selection layer); the recomposed op is lowered to the same stable computation
without it. Every intermediate value must have no user outside the chain; the new op takes over
the chain's output operand and the union of its provenance.
"""
from __future__ import annotations

import logging
import math

from ..ir import Graph, Operand, Operator
from ._match import Match, arg, const_scalar, number
from ._rewrite import replace_chain, rewrite_from_roots
from .manager import graph_pass

log = logging.getLogger(__name__)


def _dims(op: Operator, rank: int) -> list[int] | None:
    """The dims ``op`` reduces or squeezes (its ``dim``: an int or a list), sorted, non-negative."""
    dim = op.params.get("dim")
    dim = [dim] if isinstance(dim, int) else dim
    if not rank or not isinstance(dim, (list, tuple)) or not all(isinstance(d, int) for d in dim):
        return None
    return sorted(d % rank for d in dim)


def _guarded_max(m: Match, opd: Operand | None) -> tuple[Operand, list[int]] | None:
    """``(x, dims)`` when ``opd`` is ``where(abs(a) == inf, 0, a)`` with ``a = amax(x, dims, keepdim)``."""
    where = m.take(opd, "aten.where.self", sole=False)
    if where is None or const_scalar(arg(where, "self")) != 0:
        return None
    a = arg(where, "other")
    eq = m.take(arg(where, "condition"), "aten.eq.Scalar")
    ab = m.take(eq.inputs[0] if eq else None, "aten.abs.default")
    amax = m.take(a, "aten.amax.default", sole=False) if ab is not None and ab.inputs[0] is a else None
    if amax is None or number(eq, "other") != math.inf or not amax.params.get("keepdim") or len(a.consumers) != 2:
        return None
    x = amax.inputs[0]
    dims = _dims(amax, len(x.shape or []))
    return (x, dims) if dims else None


def _logsumexp(graph: Graph, root: Operator) -> bool:
    if root.type != "aten.add.Tensor" or root.params.get("alpha", 1) != 1:
        return False
    m = Match()
    log_ = m.take(arg(root, "self"), "aten.log.default")
    total = m.take(log_.inputs[0] if log_ else None, "aten.sum.dim_IntList")
    exp = m.take(total.inputs[0] if total else None, "aten.exp.default")
    sub = m.take(exp.inputs[0] if exp else None, "aten.sub.Tensor")
    if sub is None or sub.params.get("alpha", 1) != 1:
        return False
    keepdim = bool(total.params.get("keepdim"))
    shift, squeeze = arg(root, "other"), None
    if not keepdim:
        squeeze = m.take(shift, "aten.squeeze.dims", "aten.squeeze.dim")
        shift = squeeze.inputs[0] if squeeze else None
    found = _guarded_max(m, shift) if shift is not None and arg(sub, "other") is shift else None
    if found is None or len(shift.consumers) != 2:
        return False
    x, dims = found
    if arg(sub, "self") is not x or _dims(total, len(x.shape)) != dims:
        return False
    if squeeze is not None and _dims(squeeze, len(shift.shape or [])) != dims:
        return False
    replace_chain(graph, root, m.ops, "aten.logsumexp.default", [x], input_names=["self"],
                  params={"dim": dims, "keepdim": keepdim}).meta["target"] = "aten.logsumexp.default"
    return True


@graph_pass("recompose_reductions", "turn core ATen's guarded logsumexp chain back into one op")
def run(graph: Graph, cx) -> None:
    rewrite_from_roots(graph, _logsumexp, "recomposed logsumexp", ("aten.add.Tensor",))
