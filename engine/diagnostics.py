"""Conversion diagnostics: failures as data.

A :class:`Diagnostic` names the ATen node, its op, the reason, the module path and the source
location. Converters and passes report them through the conversion context; the CLI prints
them as a table and the GUI's Problems panel lists them.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from .records import field, record

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Operator


@record
class Diagnostic:
    """One problem found during conversion."""

    node: str  #: ATen node name(s) the problem is about (comma-joined when several)
    op: str  #: operator type / ATen overload, e.g. ``aten.grid_sampler.default``
    reason: str  #: human-readable reason, e.g. ``unsupported: padding_mode='circular'``
    module: str = ""  #: module path (``layer1.0.conv1``), "" for the root module
    source: str = ""  #: ``file:line`` of the user code, "" when unknown
    severity: str = "error"  #: ``error`` (conversion incomplete) or ``warning``
    stage: str = ""  #: the pass that reported it
    operator: str = ""  #: name of the IR operator concerned (may differ from ``node`` after passes)
    plugin: str = ""  #: ``file:line`` of the converter plug-in code at fault, "" when none

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        where = f" ({self.module})" if self.module else ""
        src = f" at {self.source}" if self.source else ""
        return f"{self.node}: {self.op}{where}{src}: {self.reason}"

    @staticmethod
    def for_operator(op: "Operator", reason: str, *, severity: str = "error", stage: str = "",
                     plugin: str = "") -> "Diagnostic":
        """A diagnostic about an IR operator, located through its provenance and metadata."""
        source = op.meta.get("source")
        return Diagnostic(
            node=",".join(op.provenance.nodes) or op.name,
            op=op.meta.get("aten_op", op.type),
            reason=reason,
            module=op.provenance.modules[0] if op.provenance.modules else "",
            source=str(source) if source else "",
            severity=severity,
            stage=stage,
            operator=op.name,
            plugin=plugin,
        )


@record
class DiagnosticList:
    """Diagnostics in the order reported, one per (operator, reason, node)."""

    items: list[Diagnostic] = field(default_factory=list)
    #: (operator, reason, node) of every item, so :meth:`add` stays O(1)
    _keys: set[tuple[str, str, str]] = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._keys.update((d.operator, d.reason, d.node) for d in self.items)

    def add(self, d: Diagnostic) -> None:
        # one diagnostic per (operator, reason): passes may re-visit an unconverted op
        key = (d.operator, d.reason, d.node)
        if key in self._keys:
            return
        self._keys.add(key)
        self.items.append(d)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def format_table(diags: list[Diagnostic]) -> str:
    """Plain-text table of diagnostics for the CLI."""
    if not diags:
        return ""
    rows = [("node", "op", "module", "source", "reason")]
    rows += [(d.node, d.op, d.module, d.source, d.reason) for d in diags]
    widths = [min(40, max(len(r[i]) for r in rows)) for i in range(4)]
    lines = []
    for r in rows:
        cells = [r[i][: widths[i]].ljust(widths[i]) for i in range(4)] + [r[4]]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 6)
    return "\n".join(lines)
