"""Give ATen's alias operators their canonical names (ATen level, first thing after in-place ops
become functional).

``torch.export`` keeps what the model called: ``torch.multiply`` is ``aten.multiply.Tensor``,
``torch.greater`` ``aten.greater.Tensor``, ``torch.clip`` ``aten.clip.default``,
``torch.special.expit`` ``aten.special_expit.default``. Each is the same operator as its
canonical form (``mul``, ``gt``, ``clamp``, ``sigmoid``), with the same arguments (a few rename
them: ``swapaxes``' ``axis0``/``axis1`` are ``transpose``'s ``dim0``/``dim1``). Renaming them here
lets every later pass (constant folding, the recompositions) and every converter see one name;
the original stays in ``meta["aten_op"]``.
"""
from __future__ import annotations

from ..ir.vocab import is_aten
from .manager import graph_pass

_SAME_OVERLOADS = {
    "multiply": "mul", "divide": "div", "subtract": "sub", "greater": "gt", "greater_equal": "ge",
    "less": "lt", "less_equal": "le", "not_equal": "ne",
}
_UNARY = {
    "negative": "neg", "absolute": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan",
    "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh", "arctan2": "atan2",
    "special_expit": "sigmoid", "special_erf": "erf", "special_expm1": "expm1", "special_log1p": "log1p",
}

#: alias overload → (canonical overload, {alias argument name: canonical name})
ALIASES: dict[str, tuple[str, dict[str, str]]] = {
    **{f"aten.{a}.{o}": (f"aten.{c}.{o}", {}) for a, c in _SAME_OVERLOADS.items() for o in ("Tensor", "Scalar")},
    "aten.divide.Tensor_mode": ("aten.div.Tensor_mode", {}), "aten.divide.Scalar_mode": ("aten.div.Scalar_mode", {}),
    **{f"aten.{a}.default": (f"aten.{c}.default", {}) for a, c in _UNARY.items()},
    "aten.true_divide.Scalar": ("aten.div.Scalar", {}),
    "aten.clip.default": ("aten.clamp.default", {}), "aten.clip.Tensor": ("aten.clamp.Tensor", {}),
    "aten.concatenate.default": ("aten.cat.default", {}),
    "aten.special_softmax.default": ("aten.softmax.int", {}),
    "aten.special_log_softmax.default": ("aten.log_softmax.int", {}),
    "aten.swapaxes.default": ("aten.transpose.int", {"axis0": "dim0", "axis1": "dim1"}),
    "aten.swapdims.default": ("aten.transpose.int", {}),
    "aten.special_round.default": ("aten.round.decimals", {}),
}


@graph_pass("normalize_aliases", "rename ATen alias ops (multiply, greater, clip, arctan2, special_expit...) "
                                 "to their canonical ops")
def run(graph, cx) -> None:
    for op in graph.ops:
        alias = ALIASES.get(op.type)
        if alias is None or not is_aten(op):
            continue
        canonical, renamed = alias
        op.meta.setdefault("aten_op", op.type)
        op.type = canonical
        for old, new in renamed.items():
            if old in op.params:
                op.params[new] = op.params.pop(old)
        if renamed and any(n in renamed for n in op.input_names):
            op.input_names = [renamed.get(n, n) for n in op.input_names]
