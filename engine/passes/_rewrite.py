"""Shared graph surgery for the rewriting passes: find an operator's sole reader, replace a chain
of operators by one, try a rewrite at every chain end."""
from __future__ import annotations

import logging
from typing import Any, Callable, Collection, Sequence

from ..ir import Attribute, Graph, IRError, Operand, Operator, Provenance

_TMP = "\x00rewrite"

#: source metadata the replacement takes over from the chain's last operator
_KEPT_META = ("source", "module_stack", "aten_op")


def sole_consumer(op: Operator, types: Sequence[str]) -> Operator | None:
    """The one operator reading ``op``'s single output if its type is in ``types``, else None
    (a graph output or a second reader blocks fusion)."""
    if len(op.outputs) != 1 or len(op.outputs[0].consumers) != 1:
        return None
    user = op.outputs[0].consumers[0]
    if user.type not in types or len(user.inputs) != 1 or len(user.outputs) != 1:
        return None
    return user


def rewrite_from_roots(graph: Graph, rewrite: Callable[[Graph, Operator], bool], what: str,
                       roots: Collection[str]) -> None:
    """Try ``rewrite(graph, root)`` with every ATen operator whose type is in ``roots`` as a
    chain's last op, the last ones first (a chain's end comes after its start); operators a
    rewrite removed are skipped."""
    from ..ir.vocab import is_aten

    ops = graph.ops
    for root in reversed(list(ops)):
        if root.type in roots and root in ops and is_aten(root) and rewrite(graph, root):
            logging.getLogger(__name__).debug("%s at %s", what, root.name)


def replace_chain(graph: Graph, root: Operator, absorbed: Sequence[Operator], type: str, inputs: Sequence[Operand],
                  *, params: dict[Any, Any] | None = None, attrs: dict[str, Attribute] | None = None,
                  input_names: Sequence[str] | None = None) -> Operator:
    """Replace single-output ``root`` and the operators ``absorbed`` (which only feed the
    chain) by one operator of ``root``'s name and position, producing ``root``'s output operand
    (same name, shape and meta) from ``inputs``, with the union of their provenance."""
    old = root.outputs[0]
    fresh = graph.new_operand(old.name + _TMP, dtype=old.dtype, shape=old.shape)
    fresh.meta = dict(old.meta)
    name = root.name
    graph.rename_op(root, name + _TMP)
    new = graph.add_op(type, name, list(inputs), [fresh], params=params, attrs=attrs, input_names=input_names,
                       provenance=Provenance.merge(o.provenance for o in [root, *absorbed]), before=root, exact=True)
    new.meta.update({k: root.meta[k] for k in _KEPT_META if k in root.meta})
    graph.replace_all_uses(old, fresh)
    graph.remove_op(root)
    pending = list(absorbed)
    while pending:  # users before producers (the chain is small)
        ready = [op for op in pending if not any(o.consumers for o in op.outputs)]
        if not ready:
            raise IRError(f"replace_chain: {[op.name for op in pending]} still feed operators outside the chain")
        for op in ready:
            graph.remove_op(op)
            pending.remove(op)
    graph.rename_operand(fresh, old.name)
    return new
