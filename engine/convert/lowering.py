"""Apply a converter registry to every operator of a graph.

For each operator (in order) the registry selects the first accepting rule; the rule emits
replacement operators before it and returns replacement operands; uses are rewired, the
replacement operands take over the old operand names (so blob names stay the ATen value
names), and the old operator is removed. A rule that refuses (``ctx.unsupported``), crashes or
gives no value for an output that is used is rolled back and recorded as a diagnostic; the
operator stays in the graph under its own name, marked ``meta["unsupported"]``, and conversion
goes on so every problem is reported in one run.
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence

from ..ir import Graph, Operand, Operator
from .context import ConversionContext, Unsupported
from .registry import Registry

log = logging.getLogger(__name__)

_TMP = "\x00lowering"


def _normalize(result, op: Operator) -> list[Operand | None]:
    if result is None:
        return [None] * len(op.outputs)
    if isinstance(result, Operand):
        return [result]
    return list(result)


def _rollback(g: Graph, emitted: Sequence[Operator]) -> None:
    for e in reversed(emitted):
        for o in e.outputs:
            for c in list(o.consumers):
                if c not in emitted:
                    raise AssertionError(f"rollback: {o.name} escaped to {c.name}")
        for o in e.outputs:
            o.consumers.clear()
        g.remove_op(e)


def lower_graph(g: Graph, registry: Registry, ctx: ConversionContext,
                skip: Callable[[Operator], bool], check: Callable[[Operator], None] | None = None) -> int:
    """Lower every operator for which ``skip(op)`` is false. Returns how many were lowered.
    ``check(emitted_op)`` may refuse (raise ``Unsupported``) what a rule emitted."""
    lowered = 0
    for op in list(g.ops):
        if skip(op) or op.meta.get("unsupported"):
            continue
        if op.meta.get("layout_error"):  # the batch layout solver found the op's shapes contradictory
            ctx.error(str(op.meta["layout_error"]), op)
            continue
        conv, reasons = registry.select(op, ctx)
        if conv is None:
            if reasons:
                reason = "; ".join(reasons)
            elif op.meta.get("unsupported_reason"):
                reason = str(op.meta["unsupported_reason"])
            else:
                reason = f"unsupported: no {registry.name} converter registered for {op.type}"
            if op.meta.get("fold_skipped"):  # why constant folding left it
                reason += f" ({op.meta['fold_skipped']})"
            ctx.error(reason, op)
            continue
        original_name = op.name
        g.rename_op(op, original_name + _TMP)
        op.meta["lowering_name"] = original_name
        ctx.current, ctx.emitted = op, []
        try:
            outs = _normalize(conv.fn(ctx, op), op)
            if len(outs) != len(op.outputs):
                raise Unsupported(f"converter {conv.name} returned {len(outs)} outputs for {len(op.outputs)}")
            for old, new in zip(op.outputs, outs):
                if (new is None or new is old) and old.consumers:
                    raise Unsupported(f"converter {conv.name} gave no value for output {old.name}, which is used")
            for e in ctx.emitted if check is not None else ():
                check(e)
        except Exception as e:  # a rule's refusal or bug never crashes the conversion
            _rollback(g, ctx.emitted)
            g.rename_op(op, original_name)
            op.meta.pop("lowering_name", None)
            if isinstance(e, Unsupported):
                reason = str(e)
            else:
                log.debug("converter %s crashed on %s", conv.name, original_name, exc_info=True)
                reason = f"converter {conv.name} failed: {type(e).__name__}: {e}"
            ctx.error(reason, op)
            continue
        finally:
            ctx.current = None
        for old, new in zip(op.outputs, outs):
            if new is None:
                continue
            g.replace_all_uses(old, new)
            if new.producer is not None and new.producer in ctx.emitted:
                old_name = old.name
                g.rename_operand(old, old_name + _TMP)
                g.rename_operand(new, old_name)
                if new.dtype is None:
                    new.dtype = old.dtype
                if new.shape is None and old.shape is not None:
                    new.shape = list(old.shape)
                new.meta = {**old.meta, **new.meta}
        g.remove_op(op)
        for e in ctx.emitted:
            e.meta.pop("lowering_name", None)
            # a rule that named something after op.name (renamed while it ran) must not leak
            # the temporary suffix into layer or blob names
            if _TMP in e.name:
                g.rename_op(e, e.name.replace(_TMP, ""))
            for o in e.outputs:
                if _TMP in o.name:
                    g.rename_operand(o, o.name.replace(_TMP, ""))
        lowered += 1
    return lowered
