"""Apply a converter registry to every operator of a graph.

For each operator (in order) the registry selects the first accepting rule; the rule emits
replacement operators before it and returns replacement operands; uses are rewired, the
replacement operands take over the old operand names (so blob names stay the ATen value
names), and the old operator is removed. A rule that refuses (``ctx.unsupported``), crashes,
returns something that is not an operand, or gives no value for an output that is used is
rolled back and recorded as a diagnostic; the operator stays in the graph under its own name,
marked ``meta["unsupported"]``, and conversion goes on so every problem is reported in one run.
A plug-in rule's failure names the rule, its file and line (``Diagnostic.plugin``). Every
operator a rule emitted records the rules that made it, outermost first, in
``meta["converted_by"]`` (:attr:`Converter.tag`: ``<file>::<function>`` for a plug-in's rule).

A rule may emit ATen operators (:meth:`ConversionContext.aten`: a decomposition into other
ATen ops); once it succeeded they are lowered in turn by the same registry, like the program's
own — so a rule can say "this op is these other ops" and let the built-in rules convert them.
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence

from ..ir import Graph, Operand, Operator
from ..ir.vocab import is_aten
from .context import ConversionContext, Unsupported
from .registry import Converter, Registry

log = logging.getLogger(__name__)

_TMP = "\x00lowering"

#: how deep rules may emit ATen operators that are lowered by rules emitting ATen operators...
MAX_REWRITE_DEPTH = 16


class _Failed(Exception):
    """A rule's failure, with the plug-in ``file:line`` at fault ("" for a built-in)."""

    def __init__(self, reason: str, where: str = ""):
        super().__init__(reason)
        self.where = where


def _normalize(result, op: Operator, conv: Converter) -> list[Operand | None]:
    if result is None:
        outs: list = [None] * len(op.outputs)
    elif isinstance(result, Operand):
        outs = [result]
    elif isinstance(result, (list, tuple)):
        outs = list(result)
    else:
        outs = [result]
    for o in outs:
        if o is not None and not isinstance(o, Operand):
            raise _Failed(f"{conv.label} returned {type(o).__name__} {o!r:.60}; a rule returns the operand "
                          "replacing the output (what ctx.emit returned), a list of them, or None",
                          conv.location())
    if len(outs) != len(op.outputs):
        raise _Failed(f"{conv.label} returned {len(outs)} outputs for {len(op.outputs)}", conv.location())
    return outs


def _rollback(g: Graph, emitted: Sequence[Operator]) -> None:
    for e in reversed(emitted):
        for o in e.outputs:
            for c in list(o.consumers):
                if c not in emitted:
                    raise AssertionError(f"rollback: {o.name} escaped to {c.name}")
        for o in e.outputs:
            o.consumers.clear()
        g.remove_op(e)


def _emitted_note(op: Operator) -> str:
    by = op.meta.get("emitted_by")
    return f" (an op emitted by {by})" if by else ""


def lower_graph(g: Graph, registry: Registry, ctx: ConversionContext,
                skip: Callable[[Operator], bool], check: Callable[[Operator], None] | None = None) -> int:
    """Lower every operator for which ``skip(op)`` is false. Returns how many were lowered.
    ``check(emitted_op)`` may refuse (raise ``Unsupported``) what a rule emitted."""
    lowered = 0
    for op in list(g.ops):
        if skip(op) or op.meta.get("unsupported"):
            continue
        emitted = _lower_one(g, registry, ctx, op, check)
        if emitted is None:
            continue
        lowered += 1
        if any(map(is_aten, emitted)):  # a rule emitted ATen ops to lower in turn
            lowered += _lower_emitted(g, registry, ctx, op, emitted, skip, check)
    return lowered


def _lower_emitted(g: Graph, registry: Registry, ctx: ConversionContext, op: Operator, emitted: list[Operator],
                   skip: Callable[[Operator], bool], check: Callable[[Operator], None] | None) -> int:
    """Lower the ATen operators a rule emitted for ``op`` (and those their rules emit, depth
    first, in order). Returns how many were lowered."""
    lowered = 0
    pending: list[tuple[Operator, list[Operator] | None]] = [(op, emitted)]
    while pending:
        cur, emitted = pending.pop(0)
        if emitted is None:
            emitted = _lower_one(g, registry, ctx, cur, check)
            if emitted is None:
                continue
            lowered += 1
        again = [e for e in emitted if is_aten(e) and not skip(e)]
        depth = cur.meta.get("rewrite_depth", 0) + 1
        for e in again:
            e.meta["rewrite_depth"] = depth
        if depth > MAX_REWRITE_DEPTH and again:
            for e in again:
                ctx.error(f"unsupported: rules kept emitting ATen ops {MAX_REWRITE_DEPTH} levels deep "
                          f"(a decomposition that emits the op it decomposes?){_emitted_note(e)}", e)
            continue
        pending[:0] = [(e, None) for e in again]
    return lowered


def _select(registry: Registry, ctx: ConversionContext, op: Operator) -> Converter | None:
    """The accepting rule for ``op``, or None after reporting why there is none — or after
    folding it, when constant folding left its value for ncnn to compute at run time and no rule
    can compute it there."""
    if op.meta.get("layout_error"):  # the batch layout solver found the op's shapes contradictory
        ctx.error(str(op.meta["layout_error"]), op)
        return None
    conv, reasons = registry.select(op, ctx)
    if conv is not None:
        return conv
    if op.meta.get("fold_skipped") and not op.meta.get("fold_over_budget") and _fold_late(ctx, op):
        return None
    if reasons:
        reason = "; ".join(reasons)
    elif op.meta.get("unsupported_reason"):
        reason = str(op.meta["unsupported_reason"])
    else:
        reason = f"unsupported: no {registry.name} converter registered for {op.type}"
    if op.meta.get("fold_skipped"):  # why constant folding left it
        reason += f" ({op.meta['fold_skipped']})"
    ctx.error(reason + _emitted_note(op), op, plugin=next((r.where for r in reasons if getattr(r, "where", "")), ""))
    return None


def _fold_late(ctx: ConversionContext, op: Operator) -> bool:
    from ..passes.fold_constants import fold_late  # the pass's evaluator (passes import this module)

    name = op.name
    n = fold_late(ctx.graph, op, getattr(ctx.options, "fold_budget", None))
    if n is None:
        return False
    ctx.warn(f"folded into a constant of {n:,} elements ({4 * n / 1e6:.1f} MB of fp32): no rule computes it at "
             "run time", op)
    log.debug("%s folded at lowering (%d elements)", name, n)
    return True


def _lower_one(g: Graph, registry: Registry, ctx: ConversionContext, op: Operator,
               check: Callable[[Operator], None] | None) -> list[Operator] | None:
    """Replace ``op`` by what its rule emits; returns the emitted operators (None: not lowered,
    reported)."""
    conv = _select(registry, ctx, op)
    if conv is None:
        return None
    original_name = op.name
    g.rename_op(op, original_name + _TMP)
    op.meta["lowering_name"] = original_name
    ctx.current, ctx.emitted = op, []
    try:
        result = conv.fn(ctx, op)
        # the usual answer, one operand for one output, as _normalize would pass it
        outs = [result] if isinstance(result, Operand) and len(op.outputs) == 1 else _normalize(result, op, conv)
        for old, new in zip(op.outputs, outs):
            if (new is None or new is old) and old.consumers:
                raise _Failed(f"{conv.label} gave no value for output {old.name}, which is used", conv.location())
        for e in ctx.emitted if check is not None else ():
            check(e)
    except Exception as e:  # a rule's refusal or bug never crashes the conversion
        _rollback(g, ctx.emitted)
        g.rename_op(op, original_name)
        op.meta.pop("lowering_name", None)
        if isinstance(e, _Failed):
            reason, where = str(e), e.where
        elif isinstance(e, Unsupported):
            reason, where = str(e), conv.location(e)
        else:
            log.debug("converter %s crashed on %s", conv.name, original_name, exc_info=True)
            where = conv.location(e)
            label = f"plug-in rule {conv.fn.__qualname__} ({where})" if where else conv.label
            reason = f"{label} failed: {type(e).__name__}: {e}"
        ctx.error(reason + _emitted_note(op), op, plugin=where)
        return None
    finally:
        ctx.current = None
    emitted = ctx.emitted
    if len(outs) == 1 and outs[0] is not None and not outs[0].consumers and outs[0].producer in emitted:
        g.take_over_output(op.outputs[0], outs[0])  # the usual case: nothing to rewire or rename
        outs = ()
    for old, new in zip(op.outputs, outs):
        if new is None:
            continue
        g.replace_all_uses(old, new)
        if new.producer is not None and new.producer in emitted:
            old_name = old.name
            g.rename_operand(old, old_name + _TMP)
            g.rename_operand(new, old_name)
            if new.dtype is None:
                new.dtype = old.dtype
            if new.shape is None and old.shape is not None:
                new.shape = list(old.shape)
            new.meta = {**old.meta, **new.meta}
    g.remove_op(op)
    # which rules made each emitted operator: those that made ``op``, then this one
    prior = op.meta.get("converted_by")
    made_by = tuple(dict.fromkeys((*prior, conv.tag))) if prior else (conv.tag,)
    for e in emitted:
        meta = e.meta
        meta["converted_by"] = made_by
        meta.pop("lowering_name", None)
        # a rule that named something after op.name (renamed while it ran) must not leak
        # the temporary suffix into layer or blob names
        if _TMP in e.name:
            g.rename_op(e, e.name.replace(_TMP, ""))
        for o in e.outputs:
            if _TMP in o.name:
                g.rename_operand(o, o.name.replace(_TMP, ""))
        if is_aten(e):
            meta.setdefault("emitted_by", f"{conv.label} for {original_name}")
    return emitted
