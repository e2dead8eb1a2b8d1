"""Remove ATen operators that do nothing at inference: detach, clone, alias, contiguous,
dropout (eval), lift_fresh_copy, identity casts, and assertion-only nodes."""
from __future__ import annotations

from ..ir.vocab import is_aten
from .manager import graph_pass

#: ops whose first output equals their first input
IDENTITY = {
    "aten.detach.default", "aten.detach_.default", "aten.clone.default", "aten.alias.default",
    "aten.contiguous.default", "aten.lift_fresh_copy.default", "aten.dropout.default",
    "aten.feature_dropout.default", "aten.alpha_dropout.default", "aten.feature_alpha_dropout.default",
    "aten.native_dropout.default", "aten.identity.default", "aten._to_copy.default", "aten.to.dtype",
    "aten.to.dtype_layout", "aten.to.device", "aten.type_as.default",
}

#: ops with no tensor result used at inference (runtime checks)
ASSERTS = {
    "aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten.sym_constrain_range.default",
    "aten.sym_constrain_range_for_size.default", "aten._assert_async.msg", "aten._assert_async.default",
    "aten._functional_assert_async.msg", "aten._functional_sym_constrain_range.default",
    "aten._functional_sym_constrain_range_for_size.default", "aten._print.default",
}

_CASTS = {"aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device", "aten.type_as.default"}


def _is_noop(op) -> bool:
    if op.type not in IDENTITY or not op.inputs or not op.outputs:
        return False
    if op.type in ("aten.dropout.default", "aten.feature_dropout.default", "aten.alpha_dropout.default",
                   "aten.feature_alpha_dropout.default") and op.params.get("train"):
        return False
    if op.type == "aten.native_dropout.default":
        if op.params.get("train"):
            return False
        # second output (mask) must be unused
        if len(op.outputs) > 1 and op.outputs[1].consumers:
            return False
    if op.type in _CASTS:
        i, o = op.inputs[0], op.outputs[0]
        return i.dtype is not None and i.dtype == o.dtype
    return True


@graph_pass("remove_noops", "remove detach/clone/alias/contiguous/dropout/identity casts and assertion nodes")
def run(graph, cx):
    for op in list(graph.ops):
        if not is_aten(op):
            continue
        if op.type in ASSERTS and all(not o.consumers for o in op.outputs):
            graph.remove_op(op)
        elif _is_noop(op):
            graph.replace_all_uses(op.outputs[0], op.inputs[0])
            if all(not o.consumers for o in op.outputs):
                graph.remove_op(op)
