"""Put decomposed activations back together (ATen level, before lowering).

``run_decompositions()`` (and hand-written code) spells several activations as elementwise
chains that ncnn would run as many layers — or cannot run at all (``where``/``gt``). Each chain
below is replaced by the single ATen op, which the activation converters turn into one ncnn
layer. Every intermediate value must have no other user; the new op takes over the chain's
output operand and the union of its provenance.

=========================================================  ============================
chain (``x`` the input, ``R`` = ``clamp(clamp(x + 3, 0), None, 6)``,
any clamp/clamp_min/clamp_max/hardtanh/relu chain whose
bounds are exactly [0, 6])
=========================================================  ============================
``x * sigmoid(x)``                                          ``aten.silu.default``
``R / 6``, ``R * (1/6)``                                    ``aten.hardsigmoid.default``
``x * R / 6``, ``x * (R / 6)``, ``x * hardsigmoid(x)``      ``aten.hardswish.default``
``where(x*b > t, x, log1p(exp(x*b)) / b)`` (b = 1: no mul)  ``aten.softplus.default``
``x * tanh(softplus(x))`` (beta 1, threshold 20)            ``aten.mish.default``
``where(x > 0, x, expm1(x / a) * a)``                       ``aten.celu.default``
``where(x > 0, x, w * x)``, ``w`` a per-channel constant    ``aten._prelu_kernel.default``
``where(x > 0, x, x * s)``, ``s`` a number                  ``aten.leaky_relu.default``
``minimum(0, x) - log1p(exp(-abs(x)))``                     ``aten.log_sigmoid.default``
=========================================================  ============================
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable

import numpy as np

from ..ir import Graph, Operand, Operator
from ..ir.vocab import is_aten
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

class _Match:
    """The ops of one matched chain (the root last) and the replacement's inputs/params."""

    def __init__(self) -> None:
        self.ops: list[Operator] = []

    def take(self, opd: Operand | None, *types: str, sole: bool = True) -> Operator | None:
        """The producer of ``opd`` if its type is one of ``types`` (and, with ``sole``, ``opd``
        has no other user); the op is recorded as part of the chain."""
        if opd is None or opd.producer is None or opd.producer.type not in types or not is_aten(opd.producer):
            return None
        if sole and len(opd.consumers) != 1:
            return None
        if opd.producer not in self.ops:
            self.ops.append(opd.producer)
        return opd.producer


def _arg(op: Operator, name: str) -> Operand | None:
    return op.inputs[op.input_names.index(name)] if name in op.input_names else None


def _number(op: Operator, name: str) -> Any:
    """A Python number argument, or a one-element constant tensor's value, else None."""
    opd = _arg(op, name)
    if opd is not None:
        return _const_scalar(opd)
    v = op.params.get(name)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _const_scalar(opd: Operand) -> Any:
    if "const" in opd.meta and isinstance(opd.meta["const"], (int, float)):
        return opd.meta["const"]
    p = opd.producer
    if p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs and int(np.prod(p.attrs["data"].shape)) == 1:
        return np.asarray(p.attrs["data"].data).reshape(-1)[0].item()
    return None


def _const_tensor(opd: Operand) -> bool:
    p = opd.producer
    return "const" in opd.meta or (p is not None and p.type == "pnnx.Attribute")


def _close(a: Any, b: float) -> bool:
    return a is not None and math.isclose(float(a), b, rel_tol=1e-6, abs_tol=1e-9)


def _binary_args(op: Operator) -> tuple[Operand | None, Any]:
    """``(tensor operand, other)`` of a binary op: ``other`` is a number or an operand."""
    return _arg(op, "self"), (_number(op, "other") if _number(op, "other") is not None else _arg(op, "other"))


def _commuted(op: Operator) -> list[tuple[Operand | None, Operand | None]]:
    """Both ``(x, y)`` orders of a commutative binary op's tensor operands."""
    a, b = _arg(op, "self"), _arg(op, "other")
    return [(a, b), (b, a)]


def _other_tensor(op: Operator, x: Operand) -> Operand | None:
    """The operand of commutative binary ``op`` that is not ``x`` (None if ``x`` is not one)."""
    a, b = _arg(op, "self"), _arg(op, "other")
    if a is x:
        return b
    if b is x:
        return a
    return None


# ----------------------------------------------------------------------------- relu6(x + 3)
_CLAMPS = ("aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default", "aten.hardtanh.default",
           "aten.relu.default", "aten.relu6.default")


def _bounds(op: Operator) -> tuple[Any, Any]:
    if op.type == "aten.relu.default":
        return 0, None
    if op.type == "aten.relu6.default":
        return 0, 6
    if op.type == "aten.hardtanh.default":
        return op.params.get("min_val"), op.params.get("max_val")
    lo = op.params.get("min") if op.type != "aten.clamp_max.default" else None
    hi = op.params.get("max") if op.type != "aten.clamp_min.default" else None
    return lo, hi


def _relu6_plus3(m: _Match, opd: Operand) -> Operand | None:
    """``x`` when ``opd`` is ``clamp(x + 3, 0, 6)`` spelled as a chain of clamps."""
    lo, hi, cur = -math.inf, math.inf, opd
    while True:
        c = m.take(cur, *_CLAMPS)
        if c is None:
            break
        a, b = _bounds(c)
        if any(v is not None and not isinstance(v, (int, float)) for v in (a, b)):
            return None
        if a is not None:
            lo = max(lo, a)
        if b is not None:
            hi = min(hi, b)
        cur = c.inputs[0]
    if lo != 0 or hi != 6 or cur is opd:
        return None
    add = m.take(cur, "aten.add.Tensor", "aten.add.Scalar")
    if add is None or add.params.get("alpha", 1) != 1:
        return None
    x, three = _binary_args(add)
    return x if isinstance(three, (int, float)) and three == 3 else None


def _div6(m: _Match, op: Operator) -> Operand | None:
    """The dividend of ``y / 6`` or ``y * (1/6)``."""
    if op.type in ("aten.div.Tensor", "aten.div.Scalar") and _close(_number(op, "other"), 6.0):
        return _arg(op, "self")
    if op.type in ("aten.mul.Tensor", "aten.mul.Scalar") and _close(_number(op, "other"), 1 / 6):
        return _arg(op, "self")
    return None


# ----------------------------------------------------------------------------- patterns
def _times_chain_of(m: _Match, root: Operator, chain: Callable[[_Match, Operand | None], Operand | None]):
    """``x`` when ``root`` is ``x * y`` (either order) with ``chain(y)`` matching and returning ``x``."""
    if root.type != "aten.mul.Tensor":
        return None
    for x, y in _commuted(root):
        sub = _Match()
        if x is not None and chain(sub, y) is x:
            m.ops += sub.ops
            return x
    return None


def _sigmoid_of(m: _Match, y: Operand | None) -> Operand | None:
    sig = m.take(y, "aten.sigmoid.default")
    return sig.inputs[0] if sig else None


def _hardsigmoid_of(m: _Match, y: Operand | None) -> Operand | None:
    hs = m.take(y, "aten.hardsigmoid.default", "aten.div.Tensor", "aten.div.Scalar", "aten.mul.Tensor",
                "aten.mul.Scalar")
    if hs is None:
        return None
    if hs.type == "aten.hardsigmoid.default":
        return hs.inputs[0]
    y2 = _div6(m, hs)
    return _relu6_plus3(m, y2) if y2 is not None else None


def _tanh_softplus_of(m: _Match, y: Operand | None) -> Operand | None:
    tanh = m.take(y, "aten.tanh.default")
    sp = m.take(tanh.inputs[0] if tanh else None, "aten.softplus.default")
    if sp is None or sp.params.get("beta", 1) != 1 or sp.params.get("threshold", 20) != 20:
        return None
    return sp.inputs[0]


def _silu(m: _Match, root: Operator):
    x = _times_chain_of(m, root, _sigmoid_of)
    return ("aten.silu.default", [x], {}) if x is not None else None


def _hardsigmoid(m: _Match, root: Operator):
    y = _div6(m, root)
    x = _relu6_plus3(m, y) if y is not None else None
    return ("aten.hardsigmoid.default", [x], {}) if x is not None else None


def _hardswish(m: _Match, root: Operator):
    y = _div6(m, root)
    if y is not None:  # (x * R) / 6
        prod = m.take(y, "aten.mul.Tensor")
        x = _times_chain_of(m, prod, _relu6_plus3) if prod is not None else None
    else:  # x * (R / 6), x * hardsigmoid(x)
        x = _times_chain_of(m, root, _hardsigmoid_of)
    return ("aten.hardswish.default", [x], {}) if x is not None else None


def _where_parts(m: _Match, root: Operator):
    """``(x, threshold operand value, other branch operand)`` of ``where(gt(v, t), x, y)``."""
    if root.type != "aten.where.self":
        return None
    cond, x, y = _arg(root, "condition"), _arg(root, "self"), _arg(root, "other")
    gt = m.take(cond, "aten.gt.Scalar")
    if gt is None or x is None or y is None:
        return None
    return gt, x, y


def _softplus(m: _Match, root: Operator):
    parts = _where_parts(m, root)
    if parts is None:
        return None
    gt, x, y = parts
    t = _number(gt, "other")
    if t is None:
        return None
    beta, scaled = 1, x
    if gt.inputs[0] is not x:  # beta != 1: gt(x * beta, t) with the product shared by exp
        mul = gt.inputs[0].producer
        if mul is None or mul.type not in ("aten.mul.Tensor", "aten.mul.Scalar") or _arg(mul, "self") is not x:
            return None
        beta, scaled = _number(mul, "other"), gt.inputs[0]
        if beta is None or len(scaled.consumers) != 2:
            return None
        m.ops.append(mul)
        div = m.take(y, "aten.div.Tensor", "aten.div.Scalar")
        if div is None or not _close(_number(div, "other"), float(beta)):
            return None
        y = _arg(div, "self")
    log1p = m.take(y, "aten.log1p.default")
    exp = m.take(log1p.inputs[0] if log1p else None, "aten.exp.default")
    if exp is None or exp.inputs[0] is not scaled:
        return None
    return "aten.softplus.default", [x], {"beta": beta, "threshold": t}


def _mish(m: _Match, root: Operator):
    x = _times_chain_of(m, root, _tanh_softplus_of)
    return ("aten.mish.default", [x], {}) if x is not None else None


def _positive_branch(gt: Operator, x: Operand) -> bool:
    return gt.inputs[0] is x and _number(gt, "other") == 0


def _celu(m: _Match, root: Operator):
    parts = _where_parts(m, root)
    if parts is None or not _positive_branch(parts[0], parts[1]):
        return None
    _, x, y = parts
    alpha, inner = 1, y  # alpha 1 decomposes without the mul and the div
    mul = m.take(y, "aten.mul.Tensor", "aten.mul.Scalar")
    if mul is not None:
        alpha, inner = _number(mul, "other"), _arg(mul, "self")
    expm1 = m.take(inner, "aten.expm1.default")
    if expm1 is None or not alpha:
        return None
    if expm1.inputs[0] is not x:
        div = m.take(expm1.inputs[0], "aten.div.Tensor", "aten.div.Scalar")
        if div is None or _arg(div, "self") is not x or not _close(_number(div, "other"), float(alpha)):
            return None
    elif alpha != 1:
        return None
    return "aten.celu.default", [x], {"alpha": alpha}


def _prelu_or_leaky(m: _Match, root: Operator):
    parts = _where_parts(m, root)
    if parts is None or not _positive_branch(parts[0], parts[1]):
        return None
    _, x, y = parts
    mul = m.take(y, "aten.mul.Tensor", "aten.mul.Scalar")
    if mul is None:
        return None
    w = _other_tensor(mul, x)
    slope = _number(mul, "other") if _arg(mul, "self") is x else None
    if slope is not None:
        return "aten.leaky_relu.default", [x], {"negative_slope": slope}
    if w is not None and _const_tensor(w):
        return "aten._prelu_kernel.default", [x, w], {}
    return None


def _log_sigmoid(m: _Match, root: Operator):
    if root.type != "aten.sub.Tensor" or root.params.get("alpha", 1) != 1:
        return None
    mn = m.take(_arg(root, "self"), "aten.minimum.default")
    if mn is None:
        return None
    a, b = _arg(mn, "self"), _arg(mn, "other")
    x = b if a is not None and _const_scalar(a) == 0 else a if b is not None and _const_scalar(b) == 0 else None
    log1p = m.take(_arg(root, "other"), "aten.log1p.default")
    exp = m.take(log1p.inputs[0] if log1p else None, "aten.exp.default")
    neg = m.take(exp.inputs[0] if exp else None, "aten.neg.default")
    ab = m.take(neg.inputs[0] if neg else None, "aten.abs.default")
    if x is None or ab is None or ab.inputs[0] is not x:
        return None
    return "aten.log_sigmoid.default", [x], {}


#: tried in order on every op (as the chain's last op); later ones see earlier results
PATTERNS: list[Callable[[_Match, Operator], Any]] = [
    _silu, _hardsigmoid, _hardswish, _softplus, _mish, _celu, _prelu_or_leaky, _log_sigmoid,
]

_INPUT_NAMES = {"aten._prelu_kernel.default": ["self", "weight"]}


# ----------------------------------------------------------------------------- rewriting
def _replace(graph: Graph, root: Operator, ops: list[Operator], new_type: str, inputs: list[Operand],
             params: dict) -> Operator:
    new = replace_chain(graph, root, ops, new_type, inputs, params=params,
                        input_names=_INPUT_NAMES.get(new_type, ["self"]))
    new.meta["target"] = new_type
    new.meta["recomposed_from"] = [o.name for o in ops] + [new.name]
    return new


@graph_pass("recompose_activations", "turn decomposed activation chains (hardswish, silu, mish...) into one op")
def run(graph: Graph, cx) -> None:
    changed = True
    while changed:
        changed = False
        removed: set[int] = set()
        for root in list(graph.ops):
            if id(root) in removed or not is_aten(root) or len(root.outputs) != 1:
                continue
            for pattern in PATTERNS:
                m = _Match()
                found = pattern(m, root)
                if found is None:
                    continue
                new_type, inputs, params = found
                if any(o is root for o in m.ops) or any(i.producer in m.ops for i in inputs):
                    continue
                _replace(graph, root, m.ops, new_type, inputs, params)
                removed.update(id(o) for o in [root] + m.ops)
                log.debug("recomposed %s into %s", root.name, new_type)
                changed = True
                break
