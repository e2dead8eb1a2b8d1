"""Node inspector: everything about the selected operator, as linked rich text.

Shows the op and overload, its arguments (schema defaults the file omitted are marked), module
path with classes, source ``file:line`` with the code line, input and output tensors (dtype,
shape with symbolic dims and their example values, strides from the program), weights, the
problem if the operator is unsupported, and provenance links to the other graphs. Links are
``<view>:<name>`` (``aten:conv2d``, ``pnnx:conv2d``, ``ncnn:conv2d``) and ``tensor:<fqn>``;
clicking one emits :attr:`InspectorPanel.linkActivated`.
"""
from __future__ import annotations

import html
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from engine.ir import Operator

from ..graph.model import PARAM, DisplayNode, shape_text
from ..provenance import ProvenanceIndex
from ..theme import muted as muted_colour
from ..source_stack import call_stack, is_library

log = logging.getLogger(__name__)

VIEW_TITLES = {"aten": "ATen", "pnnx": "pnnx", "ncnn": "ncnn", "snapshot": "pass snapshot"}


def _e(x: Any) -> str:
    return html.escape(str(x))


def _span(html_text: str, muted: bool) -> str:
    return f"<span class='muted'>{html_text}</span>" if muted else html_text


def _fmt_value(v: Any, limit: int = 160) -> str:
    if isinstance(v, float):
        text = repr(v)
    elif isinstance(v, (list, tuple)):
        text = "[" + ", ".join(_fmt_value(x, limit) for x in v) + "]"
    else:
        text = str(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class InspectorContext:
    """What the inspector may look things up in."""

    program: Any = None  #: engine.ExportedProgram
    provenance: dict[str, ProvenanceIndex] = field(default_factory=dict)  #: "pnnx"/"ncnn" → index


class InspectorPanel(QWidget):
    linkActivated = Signal(str, str)  #: (kind, name)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.browser = QTextBrowser()
        self.browser.setObjectName("inspector")
        self.browser.setOpenLinks(False)
        self.browser.anchorClicked.connect(self._on_anchor)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.browser)
        self.current: tuple[str, str] | None = None
        self.show_message("Select a node to see its details.")

    # ---------------------------------------------------------------- API
    def show_message(self, text: str) -> None:
        self.current = None
        self.browser.setHtml(self._page(f"<p class='muted'>{_e(text)}</p>"))

    def show_node(self, view: str, node: DisplayNode, op: Operator | None, ctx: InspectorContext) -> None:
        self.current = (view, node.name)
        self.browser.setHtml(self._page(self._node_html(view, node, op, ctx)))

    def text(self) -> str:
        return self.browser.toPlainText()

    def _on_anchor(self, url: QUrl) -> None:
        s = url.toString()
        kind, _, name = s.partition(":")
        if name:
            self.linkActivated.emit(kind, QUrl.fromPercentEncoding(name.encode()))

    # ---------------------------------------------------------------- html
    def _page(self, body: str) -> str:
        pal = self.palette()
        text = pal.color(QPalette.ColorRole.Text).name()
        muted = muted_colour(pal).name()
        link = pal.color(QPalette.ColorRole.Link).name()
        alt = pal.color(QPalette.ColorRole.AlternateBase).name()
        css = f"""
        body {{ color:{text}; }}
        h2 {{ font-size:13pt; margin:0 0 2px 0; }}
        h3 {{ font-size:10pt; margin:10px 0 3px 0; color:{muted}; text-transform:uppercase; }}
        .muted {{ color:{muted}; }}
        .mono {{ font-family:'DejaVu Sans Mono',monospace; }}
        .dflt {{ color:{muted}; font-style:italic; }}
        .problem {{ color:#ffffff; background:#c62828; padding:4px; }}
        .sym {{ color:#b35c00; font-weight:bold; }}
        a {{ color:{link}; text-decoration:none; }}
        table {{ border-collapse:collapse; }}
        td {{ padding:1px 8px 1px 0; vertical-align:top; }}
        tr.alt {{ background:{alt}; }}
        """
        return f"<html><head><style>{css}</style></head><body>{body}</body></html>"

    def _node_html(self, view: str, node: DisplayNode, op: Operator | None, ctx: InspectorContext) -> str:
        out: list[str] = []
        title = node.type
        out.append(f"<h2>{_e(title)}</h2>")
        out.append(f"<div class='mono'>{_e(node.name)} <span class='muted'>· {VIEW_TITLES.get(view, view)}"
                   f"{' · removed by this pass' if node.ghost else ''}</span></div>")
        if node.problem:
            out.append(f"<p class='problem'><b>Unsupported</b> — {_e(node.problem)}</p>")
        if op is None:
            if node.detail:
                out.append(f"<p>{_e(node.detail)}</p>")
            out.extend(self._provenance_html(view, node.name, node.provenance, ctx))
            return "".join(out)
        if node.kind == PARAM:
            out.extend(self._param_html(op, ctx))
        out.extend(self._args_html(view, op))
        out.extend(self._module_html(op, ctx))
        out.extend(self._tensors_html("Inputs", op.inputs, op.input_names, ctx, view))
        out.extend(self._tensors_html("Outputs", op.outputs, [], ctx, view))
        if op.attrs:
            out.append("<h3>Weights</h3><table>")
            for k, a in op.attrs.items():
                out.append(f"<tr><td class='mono'>{_e(k)}</td><td>{_e(shape_text(a.shape, a.dtype))}</td>"
                           f"<td class='muted'>{_e(a.dtype)}</td></tr>")
            out.append("</table>")
        out.extend(self._provenance_html(view, op.name, op.provenance.nodes, ctx))
        return "".join(out)

    def _param_html(self, op: Operator, ctx: InspectorContext) -> list[str]:
        target = op.params.get("target")
        if not target:
            return []
        kind = op.params.get("kind", "parameter")
        extra = ""
        if "persistent" in op.params:
            extra = " · persistent" if op.params["persistent"] else " · not persistent"
        return [f"<p>{_e(kind)}{_e(extra)} · <a href='tensor:{_e(target)}'>{_e(target)}</a> "
                f"<span class='muted'>(open in the weight viewer)</span></p>"]

    def _args_html(self, view: str, op: Operator) -> list[str]:
        params = {k: v for k, v in op.params.items() if not (view == "aten" and k in ("target", "kind", "persistent")
                                                               and op.type == "pnnx.Attribute")}
        if not params:
            return []
        defaulted = set(op.meta.get("defaulted") or ())
        names = _ncnn_param_names(op.type) if isinstance(next(iter(params)), int) else {}
        rows = ["<h3>Arguments</h3><table>"]
        for k, v in params.items():
            label = f"{k} <span class='muted'>{_e(names[k])}</span>" if k in names else _e(k)
            dflt = " <span class='dflt'>(default)</span>" if k in defaulted else ""
            cls = "dflt" if k in defaulted else "mono"
            rows.append(f"<tr><td>{label}</td><td class='{cls}'>{_e(_fmt_value(v))}{dflt}</td></tr>")
        rows.append("</table>")
        return rows

    def _module_html(self, op: Operator, ctx: InspectorContext) -> list[str]:
        out: list[str] = []
        stack = op.meta.get("module_stack") or []
        if stack:
            out.append("<h3>Module</h3><table>")
            for fr in stack:
                cls = getattr(fr, "type", "")
                out.append(f"<tr><td class='mono'>{_e(getattr(fr, 'path', '') or '(root)')}</td>"
                           f"<td class='muted'>{_e(cls.rsplit('.', 1)[-1])}</td></tr>")
            out.append("</table>")
        elif op.provenance.modules and any(op.provenance.modules):
            out.append("<h3>Modules</h3><div class='mono'>" +
                       "<br>".join(_e(m) for m in op.provenance.modules if m) + "</div>")
        out.extend(self._source_html(op, ctx))
        return out

    @staticmethod
    def _source_html(op: Operator, ctx: InspectorContext) -> list[str]:
        """The call stack, the deepest frame of the user's own code first (torch's and Python's
        frames muted); the recorded source line when the file has no stack trace."""
        frames = call_stack(ctx.program, op)
        if not frames:
            src = op.meta.get("source")
            if not src:
                return []
            code = getattr(src, "code", "")
            return [f"<h3>Source</h3><div class='mono'>{_e(src)}</div>"] + (
                [f"<div class='mono muted'>{_e(code.strip())}</div>"] if code else [])
        rows = ["<h3>Source <span class='muted'>(call stack, deepest first)</span></h3><table>"]
        for k, f in enumerate(frames):
            muted = is_library(f)
            where = f"{_e(os.path.basename(f.file))}:{f.line}"
            where = f"<b>{where}</b>" if k == 0 else where
            rows.append(f"<tr><td class='mono' title='{_e(f.file)}'>{_span(where, muted)}</td>"
                        f"<td class='mono'>{_span(_e(f.function), muted)}</td></tr>")
            if f.code:
                rows.append(f"<tr><td colspan='2' class='mono'>&nbsp;&nbsp;{_span(_e(f.code), muted or k > 0)}</td></tr>")
        rows.append("</table>")
        return rows

    def _tensors_html(self, title: str, operands, names: list[str], ctx: InspectorContext, view: str) -> list[str]:
        if not operands:
            return []
        out = [f"<h3>{title}</h3><table>"]
        for k, o in enumerate(operands):
            label = names[k] if k < len(names) and names[k] else ""
            peer = ""
            if title == "Inputs" and o.producer is not None:
                peer = f"← <a href='{view}:{_e(o.producer.name)}'>{_e(o.producer.name)}</a>"
            elif title == "Outputs" and o.consumers:
                shown = o.consumers[:3]
                peer = "→ " + ", ".join(f"<a href='{view}:{_e(c.name)}'>{_e(c.name)}</a>" for c in shown)
                if len(o.consumers) > 3:
                    peer += f" +{len(o.consumers) - 3}"
            shape = self._shape_html(o)
            strides = self._strides(o.name, ctx) if view == "aten" else ""
            cls = "alt" if k % 2 else ""
            out.append(f"<tr class='{cls}'><td><span class='mono'>{_e(label + ': ' if label else '')}"
                       f"<b>{_e(o.name)}</b></span> {peer}<br>{shape} <span class='muted'>{_e(o.dtype or '')}"
                       f"{strides}</span></td></tr>")
        out.append("</table>")
        return out

    @staticmethod
    def _shape_html(o) -> str:
        if o.shape is None:
            return "<span class='muted'>?</span>"
        hint = o.meta.get("shape_hint")
        parts = []
        for i, d in enumerate(o.shape):
            if isinstance(d, str):
                h = f"={hint[i]}" if hint and i < len(hint) and hint[i] is not None else ""
                parts.append(f"<span class='sym' title='symbolic{h}'>{_e(d)}</span>")
            else:
                parts.append("?" if d is None else str(d))
        return "[" + ", ".join(parts) + "]"

    @staticmethod
    def _strides(name: str, ctx: InspectorContext) -> str:
        if ctx.program is None:
            return ""
        try:
            meta = ctx.program.value_meta(name)
        except Exception:  # a name the program does not know
            return ""
        if meta is None:
            return ""
        return " · strides (" + ", ".join(str(s) for s in meta.strides) + ")"

    def _provenance_html(self, view: str, name: str, nodes: Iterable[str], ctx: InspectorContext) -> list[str]:
        out: list[str] = []
        if view == "aten":
            for key in ("pnnx", "ncnn"):
                idx = ctx.provenance.get(key)
                if idx is None:
                    continue
                ops = idx.lowered_of([name])
                links = ", ".join(f"<a href='{key}:{_e(n)}'>{_e(n)}</a>" for n in ops) or \
                    "<span class='muted'>(nothing: folded away or dropped)</span>"
                out.append(f"<h3>Became in {key}</h3><div>{links}</div>")
        else:
            nodes = list(nodes)
            if nodes:
                links = ", ".join(f"<a href='aten:{_e(n)}'>{_e(n)}</a>" for n in nodes)
                out.append(f"<h3>From ATen nodes</h3><div>{links}</div>")
        return out


def _ncnn_param_names(layer_type: str) -> dict[int, str]:
    try:
        from engine.ncnn.layers import get_spec

        return {p.id: p.name for p in get_spec(layer_type).params}
    except Exception:  # not an ncnn layer (an unsupported op kept as is)
        return {}
