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
``where(abs(x) <= l, 0, x)``, ``where(abs(x) > l, x, 0)``     ``aten.hardshrink.default``
``where(abs(x) > l, x - sign(x) * l, x * 0)``                 ``aten.softshrink.default``
``x[..., :h] * sigmoid(x[..., h:])`` (two halves of one dim)  ``aten.glu.default``
``0.5*x * (1 + tanh(sqrt(2/pi) * (x + 0.044715*x**3)))``     ``aten.gelu.default``
(Hugging Face's ``gelu_new``)                               (``approximate='tanh'``)
=========================================================  ============================
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable

from ..ir import Graph, Operand, Operator
from ..ir.vocab import is_aten
from ._match import Match, arg, commuted, const_scalar, number
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

#: tried in order (of definition) on every op as the chain's last op; later ones see earlier results
PATTERNS: list[Callable[[Match, Operator], Any]] = []
#: the op types each pattern's chain can end in (its root); an op of another type is not
#: offered to it (test_recompose_activations checks each pattern refuses every other type)
ROOTS: dict[Callable, tuple[str, ...]] = {}
_BY_ROOT: dict[str, list[Callable]] = {}  #: root type → its patterns, in order

_MUL = ("aten.mul.Tensor", "aten.mul.Scalar")
_DIV = ("aten.div.Tensor", "aten.div.Scalar")
_WHERE = ("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther")


def _pattern(*roots: str):
    def register(fn):
        PATTERNS.append(fn)
        ROOTS[fn] = roots
        for t in roots:
            _BY_ROOT.setdefault(t, []).append(fn)
        return fn
    return register


def _const_tensor(opd: Operand) -> bool:
    p = opd.producer
    return "const" in opd.meta or (p is not None and p.type == "pnnx.Attribute")


def _close(a: Any, b: float) -> bool:
    return a is not None and math.isclose(float(a), b, rel_tol=1e-6, abs_tol=1e-9)


def _binary_args(op: Operator) -> tuple[Operand | None, Any]:
    """``(tensor operand, other)`` of a binary op: ``other`` is a number or an operand."""
    return arg(op, "self"), (number(op, "other") if number(op, "other") is not None else arg(op, "other"))


def _other_tensor(op: Operator, x: Operand) -> Operand | None:
    """The operand of commutative binary ``op`` that is not ``x`` (None if ``x`` is not one)."""
    a, b = arg(op, "self"), arg(op, "other")
    if a is x:
        return b
    if b is x:
        return a
    return None


# ----------------------------------------------------------------------------- relu6(x + 3)
#: ops splitting a tensor into several outputs (the two halves of a GLU)
_SPLITS = ("aten.chunk.default", "aten.split.Tensor", "aten.split_with_sizes.default")

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


def _relu6_plus3(m: Match, opd: Operand) -> Operand | None:
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


def _div6(m: Match, op: Operator) -> Operand | None:
    """The dividend of ``y / 6`` or ``y * (1/6)``."""
    if op.type in ("aten.div.Tensor", "aten.div.Scalar") and _close(number(op, "other"), 6.0):
        return arg(op, "self")
    if op.type in ("aten.mul.Tensor", "aten.mul.Scalar") and _close(number(op, "other"), 1 / 6):
        return arg(op, "self")
    return None


# ----------------------------------------------------------------------------- patterns
def _times_chain_of(m: Match, root: Operator, chain: Callable[[Match, Operand | None], Operand | None]):
    """``x`` when ``root`` is ``x * y`` (either order) with ``chain(y)`` matching and returning ``x``."""
    if root.type != "aten.mul.Tensor":
        return None
    for x, y in commuted(root):
        sub = Match()
        if x is not None and chain(sub, y) is x:
            m.ops += sub.ops
            return x
    return None


def _sigmoid_of(m: Match, y: Operand | None) -> Operand | None:
    sig = m.take(y, "aten.sigmoid.default")
    return sig.inputs[0] if sig else None


def _hardsigmoid_of(m: Match, y: Operand | None) -> Operand | None:
    hs = m.take(y, "aten.hardsigmoid.default", "aten.div.Tensor", "aten.div.Scalar", "aten.mul.Tensor",
                "aten.mul.Scalar")
    if hs is None:
        return None
    if hs.type == "aten.hardsigmoid.default":
        return hs.inputs[0]
    y2 = _div6(m, hs)
    return _relu6_plus3(m, y2) if y2 is not None else None


def _tanh_softplus_of(m: Match, y: Operand | None) -> Operand | None:
    tanh = m.take(y, "aten.tanh.default")
    sp = m.take(tanh.inputs[0] if tanh else None, "aten.softplus.default")
    if sp is None or sp.params.get("beta", 1) != 1 or sp.params.get("threshold", 20) != 20:
        return None
    return sp.inputs[0]


@_pattern(*_MUL)
def _silu(m: Match, root: Operator):
    x = _times_chain_of(m, root, _sigmoid_of)
    return ("aten.silu.default", [x], {}) if x is not None else None


@_pattern(*_MUL, *_DIV)
def _hardsigmoid(m: Match, root: Operator):
    y = _div6(m, root)
    x = _relu6_plus3(m, y) if y is not None else None
    return ("aten.hardsigmoid.default", [x], {}) if x is not None else None


@_pattern(*_MUL, *_DIV)
def _hardswish(m: Match, root: Operator):
    y = _div6(m, root)
    if y is not None:  # (x * R) / 6
        prod = m.take(y, "aten.mul.Tensor")
        x = _times_chain_of(m, prod, _relu6_plus3) if prod is not None else None
    else:  # x * (R / 6), x * hardsigmoid(x)
        x = _times_chain_of(m, root, _hardsigmoid_of)
    return ("aten.hardswish.default", [x], {}) if x is not None else None


def _where_parts(m: Match, root: Operator):
    """``(x, threshold operand value, other branch operand)`` of ``where(gt(v, t), x, y)``."""
    if root.type != "aten.where.self":
        return None
    cond, x, y = arg(root, "condition"), arg(root, "self"), arg(root, "other")
    gt = m.take(cond, "aten.gt.Scalar")
    if gt is None or x is None or y is None:
        return None
    return gt, x, y


@_pattern(*_WHERE)
def _softplus(m: Match, root: Operator):
    parts = _where_parts(m, root)
    if parts is None:
        return None
    gt, x, y = parts
    t = number(gt, "other")
    if t is None:
        return None
    beta, scaled = 1, x
    if gt.inputs[0] is not x:  # beta != 1: gt(x * beta, t) with the product shared by exp
        mul = gt.inputs[0].producer
        if mul is None or mul.type not in ("aten.mul.Tensor", "aten.mul.Scalar") or arg(mul, "self") is not x:
            return None
        beta, scaled = number(mul, "other"), gt.inputs[0]
        if beta is None or len(scaled.consumers) != 2:
            return None
        m.ops.append(mul)
        div = m.take(y, "aten.div.Tensor", "aten.div.Scalar")
        if div is None or not _close(number(div, "other"), float(beta)):
            return None
        y = arg(div, "self")
    log1p = m.take(y, "aten.log1p.default")
    exp = m.take(log1p.inputs[0] if log1p else None, "aten.exp.default")
    if exp is None or exp.inputs[0] is not scaled:
        return None
    return "aten.softplus.default", [x], {"beta": beta, "threshold": t}


@_pattern(*_MUL)
def _mish(m: Match, root: Operator):
    x = _times_chain_of(m, root, _tanh_softplus_of)
    return ("aten.mish.default", [x], {}) if x is not None else None


def _positive_branch(gt: Operator, x: Operand) -> bool:
    return gt.inputs[0] is x and number(gt, "other") == 0


@_pattern(*_WHERE)
def _celu(m: Match, root: Operator):
    parts = _where_parts(m, root)
    if parts is None or not _positive_branch(parts[0], parts[1]):
        return None
    _, x, y = parts
    alpha, inner = 1, y  # alpha 1 decomposes without the mul and the div
    mul = m.take(y, "aten.mul.Tensor", "aten.mul.Scalar")
    if mul is not None:
        alpha, inner = number(mul, "other"), arg(mul, "self")
    expm1 = m.take(inner, "aten.expm1.default")
    if expm1 is None or not alpha:
        return None
    if expm1.inputs[0] is not x:
        div = m.take(expm1.inputs[0], "aten.div.Tensor", "aten.div.Scalar")
        if div is None or arg(div, "self") is not x or not _close(number(div, "other"), float(alpha)):
            return None
    elif alpha != 1:
        return None
    return "aten.celu.default", [x], {"alpha": alpha}


@_pattern(*_WHERE)
def _prelu_or_leaky(m: Match, root: Operator):
    parts = _where_parts(m, root)
    if parts is None or not _positive_branch(parts[0], parts[1]):
        return None
    _, x, y = parts
    mul = m.take(y, "aten.mul.Tensor", "aten.mul.Scalar")
    if mul is None:
        return None
    w = _other_tensor(mul, x)
    slope = number(mul, "other") if arg(mul, "self") is x else None
    if slope is not None:
        return "aten.leaky_relu.default", [x], {"negative_slope": slope}
    if w is not None and _const_tensor(w):
        return "aten._prelu_kernel.default", [x, w], {}
    return None


@_pattern("aten.sub.Tensor")
def _log_sigmoid(m: Match, root: Operator):
    if root.type != "aten.sub.Tensor" or root.params.get("alpha", 1) != 1:
        return None
    mn = m.take(arg(root, "self"), "aten.minimum.default")
    if mn is None:
        return None
    a, b = arg(mn, "self"), arg(mn, "other")
    x = b if a is not None and const_scalar(a) == 0 else a if b is not None and const_scalar(b) == 0 else None
    log1p = m.take(arg(root, "other"), "aten.log1p.default")
    exp = m.take(log1p.inputs[0] if log1p else None, "aten.exp.default")
    neg = m.take(exp.inputs[0] if exp else None, "aten.neg.default")
    ab = m.take(neg.inputs[0] if neg else None, "aten.abs.default")
    if x is None or ab is None or ab.inputs[0] is not x:
        return None
    return "aten.log_sigmoid.default", [x], {}


def _abs_compared(m: Match, cond: Operand | None, *types: str) -> tuple[Operand, Any] | None:
    """``(x, l)`` when ``cond`` is ``cmp(abs(x), l)`` for a comparison in ``types``."""
    cmp = m.take(cond, *types)
    ab = m.take(cmp.inputs[0] if cmp else None, "aten.abs.default")
    lambd = number(cmp, "other") if ab else None
    return (ab.inputs[0], lambd) if lambd is not None else None


@_pattern(*_WHERE)
def _hardshrink(m: Match, root: Operator):
    if root.type not in ("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther"):
        return None
    cond, a, b = arg(root, "condition"), arg(root, "self"), arg(root, "other")
    if number(root, "self") == 0:  # where(abs(x) <= l, 0, x)
        found = _abs_compared(m, cond, "aten.le.Scalar")
        kept = b
    elif number(root, "other") == 0:  # where(abs(x) > l, x, 0)
        found = _abs_compared(m, cond, "aten.gt.Scalar")
        kept = a
    else:
        return None
    if found is None or kept is None or found[0] is not kept:
        return None
    return "aten.hardshrink.default", [kept], {"lambd": found[1]}


@_pattern(*_WHERE)
def _softshrink(m: Match, root: Operator):
    parts = _where_parts(m, root)
    ab = m.take(parts[0].inputs[0], "aten.abs.default") if parts else None
    if ab is None:
        return None
    gt, shrunk, zeroed = parts
    x, lambd = ab.inputs[0], number(gt, "other")
    sub = m.take(shrunk, "aten.sub.Tensor")
    mul = m.take(arg(sub, "other") if sub and sub.params.get("alpha", 1) == 1 else None, "aten.mul.Tensor",
                 "aten.mul.Scalar")
    sign = m.take(arg(mul, "self") if mul else None, "aten.sign.default")
    zero = m.take(zeroed, "aten.mul.Tensor", "aten.mul.Scalar")
    if sign is None or lambd is None or not _close(number(mul, "other"), float(lambd)) or arg(sub, "self") is not x \
            or sign.inputs[0] is not x or zero is None or arg(zero, "self") is not x or number(zero, "other") != 0:
        return None
    return "aten.softshrink.default", [x], {"lambd": lambd}


def _half(m: Match, opd: Operand | None, first: bool) -> tuple[Operand, int] | None:
    """``(x, dim)`` when ``opd`` is the first / second half of ``x`` along ``dim``: a slice (step
    1), or output 0 / 1 of a two-way chunk or split into equal halves."""
    op = m.take(opd, "aten.slice.Tensor", *_SPLITS)
    x = op.inputs[0] if op else None
    if x is None or x.shape is None:
        return None
    dim = int(op.params.get("dim", 0)) % len(x.shape)
    size = x.shape[dim]
    if not isinstance(size, int) or size % 2:
        return None
    if op.type in _SPLITS:
        halves = {"aten.chunk.default": op.params.get("chunks") == 2,
                  "aten.split.Tensor": op.params.get("split_size") == size // 2,
                  "aten.split_with_sizes.default": list(op.params.get("split_sizes") or []) == [size // 2] * 2}
        if len(op.outputs) != 2 or not halves[op.type]:
            return None
        return (x, dim) if op.outputs.index(opd) == (0 if first else 1) else None
    start, end = op.params.get("start") or 0, op.params.get("end")
    if op.params.get("step", 1) != 1 or not isinstance(start, int):
        return None
    end = size if end is None or (isinstance(end, int) and end >= size) else end
    return (x, dim) if (start, end) == ((0, size // 2) if first else (size // 2, size)) else None


@_pattern(*_MUL)
def _glu(m: Match, root: Operator):
    if root.type != "aten.mul.Tensor":
        return None
    for a, g in commuted(root):
        sub = Match()
        sig = sub.take(g, "aten.sigmoid.default")
        first, second = _half(sub, a, True), _half(sub, sig.inputs[0] if sig else None, False)
        if first is not None and second is not None and first[0] is second[0] and first[1] == second[1]:
            m.ops += sub.ops
            return "aten.glu.default", [first[0]], {"dim": first[1]}
    return None


@_pattern(*_MUL)
def _gelu_tanh(m: Match, root: Operator):
    """``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` (Hugging Face's ``gelu_new``)."""
    if root.type != "aten.mul.Tensor":
        return None
    for half_opd, rest in commuted(root):
        trial = Match()
        half = trial.take(half_opd, "aten.mul.Tensor", "aten.mul.Scalar")
        one = trial.take(rest, "aten.add.Tensor", "aten.add.Scalar")
        if half is None or one is None or not _close(number(half, "other"), 0.5) or one.params.get("alpha", 1) != 1:
            continue
        x = arg(half, "self")
        tanh = trial.take(arg(one, "self"), "aten.tanh.default")
        scale = trial.take(tanh.inputs[0] if tanh else None, "aten.mul.Tensor", "aten.mul.Scalar")
        if not _close(number(one, "other"), 1.0) or scale is None or \
                not _close(number(scale, "other"), math.sqrt(2 / math.pi)):
            continue
        inner = trial.take(arg(scale, "self"), "aten.add.Tensor")
        cubic = trial.take(arg(inner, "other") if inner else None, "aten.mul.Tensor", "aten.mul.Scalar")
        power = trial.take(arg(cubic, "self") if cubic else None, "aten.pow.Tensor_Scalar")
        if power is None or arg(inner, "self") is not x or power.inputs[0] is not x or \
                number(power, "exponent") != 3 or not _close(number(cubic, "other"), 0.044715) or \
                inner.params.get("alpha", 1) != 1:
            continue
        m.ops += trial.ops
        return "aten.gelu.default", [x], {"approximate": "tanh"}
    return None


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
            patterns = _BY_ROOT.get(root.type)
            if patterns is None or id(root) in removed or not is_aten(root) or len(root.outputs) != 1:
                continue
            for pattern in patterns:
                m = Match()
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
