"""Rich-text tooltips of graph nodes and edges (built when the cursor rests on one)."""
from __future__ import annotations

import html
from typing import Any

from engine.ir import Operator

from .model import INPUT, OUTPUT, PARAM, DisplayEdge, DisplayNode, shape_text

_KIND_NAMES = {INPUT: "input", OUTPUT: "output", PARAM: "parameter"}


def _e(x: Any) -> str:
    return html.escape(str(x))


def node_tooltip(node: DisplayNode, op: Operator | None) -> str:
    kind = _KIND_NAMES.get(node.kind, "")
    if node.kind == PARAM and op is not None:
        kind = str(op.params.get("kind") or "parameter")
    lines = [f"<b>{_e(node.type)}</b>" + (f" &nbsp;<i>{_e(kind)}</i>" if kind else ""),
             f"<span style='font-family:monospace'>{_e(node.name)}</span>"]
    if node.module:
        lines.append(f"module: <span style='font-family:monospace'>{_e(node.module)}</span>")
    if op is not None:
        for o in op.outputs[:4]:
            lines.append(f"→ {_e(o.name)}: {_e(shape_text(o.shape, o.dtype) or '?')}")
        if len(op.outputs) > 4:
            lines.append(f"… {len(op.outputs) - 4} more outputs")
        src = op.meta.get("source")
        if src:
            lines.append(f"source: {_e(src)}")
    elif node.detail:
        lines.append(_e(node.detail))
    if node.provenance and node.provenance != (node.name,):
        shown = ", ".join(node.provenance[:6]) + (" …" if len(node.provenance) > 6 else "")
        lines.append(f"from ATen: {_e(shown)}")
    if node.ghost:
        lines.append("<i>removed by this pass</i>")
    if node.problem:
        lines.append(f"<span style='color:#d62828'><b>unsupported:</b> {_e(node.problem)}</span>")
    return "<br>".join(lines)


def edge_tooltip(edge: DisplayEdge, src: DisplayNode, dst: DisplayNode) -> str:
    shape = edge.shape or "?"
    dtype = edge.dtype or "?"
    return (f"<b>{_e(edge.operand)}</b><br>shape {_e(shape)} &nbsp; dtype {_e(dtype)}"
            f"<br>{_e(src.name)} → {_e(dst.name)}")


def group_tooltip(group, expanded: bool) -> str:
    """A module box: path, class, what it holds, and what a click does."""
    lines = [f"<b>{_e(group.title or 'model')}</b>" + (f" &nbsp;<i>{_e(group.type)}</i>" if group.type else ""),
             f"{group.ops:,} operators, {group.size - group.ops:,} parameters/constants"]
    if group.children:
        lines.append(f"{len(group.children)} submodule group{'s' if len(group.children) != 1 else ''}")
    lines.append("<i>click the header to collapse</i>" if expanded else "<i>click to expand</i>")
    return "<br>".join(lines)
