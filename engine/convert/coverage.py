"""Coverage reports: which targets have rules, and for a model which operators converted.

``registered_targets()`` lists every ATen overload and pnnx op type with a rule (and where
each rule comes from); :func:`coverage_of_result` counts, per ATen target of a converted
model, how many nodes converted and how many did not, with the reasons.
"""
from __future__ import annotations

from collections import Counter

from . import registry
from ..records import field, record
from .context import STRUCTURAL


@record
class TargetCoverage:
    target: str
    count: int
    unsupported: int = 0
    reasons: list[str] = field(default_factory=list)

    @property
    def supported(self) -> int:
        return self.count - self.unsupported


@record
class Coverage:
    rows: list[TargetCoverage]

    @property
    def supported_nodes(self) -> int:
        return sum(r.supported for r in self.rows)

    @property
    def unsupported_nodes(self) -> int:
        return sum(r.unsupported for r in self.rows)

    def to_dict(self) -> dict:
        return {
            "supported": self.supported_nodes,
            "unsupported": self.unsupported_nodes,
            "targets": [{"target": r.target, "count": r.count, "supported": r.supported,
                         "unsupported": r.unsupported, "reasons": r.reasons} for r in self.rows],
        }

    def to_text(self) -> str:
        lines = [f"{'target':50s} {'count':>6s} {'ok':>6s} {'failed':>6s}  reason"]
        for r in self.rows:
            lines.append(f"{r.target:50s} {r.count:6d} {r.supported:6d} {r.unsupported:6d}  {'; '.join(r.reasons)}")
        lines.append(f"{'total':50s} {self.supported_nodes + self.unsupported_nodes:6d} "
                     f"{self.supported_nodes:6d} {self.unsupported_nodes:6d}")
        return "\n".join(lines)


def registered_targets() -> dict[str, list[dict]]:
    """Every target with a rule: ``{"aten": [{target, rules: [origin...]}], "ncnn": [...]}``."""
    from .. import converters  # noqa: F401

    out: dict[str, list[dict]] = {}
    for reg in (registry.ATEN, registry.NCNN):
        out[reg.name] = [{"target": t, "rules": [f"{c.name} ({c.origin}, priority {c.priority})"
                                                for c in reg.candidates(t)]} for t in reg.targets()]
    return out


def coverage_of_result(result) -> Coverage:
    counts: Counter[str] = Counter()
    target_of: dict[str, str] = {}
    for op in result.aten.ops:
        if op.type in STRUCTURAL:
            continue
        counts[op.type] += 1
        target_of[op.name] = op.type
    rows = {t: TargetCoverage(t, n) for t, n in counts.items()}
    for d in result.diagnostics:
        if d.severity != "error":
            continue
        for node in d.node.split(","):
            t = target_of.get(node)
            if t is None:
                continue
            row = rows[t]
            row.unsupported = min(row.count, row.unsupported + 1)
            if d.reason not in row.reasons:
                row.reasons.append(d.reason)
            break
    return Coverage(sorted(rows.values(), key=lambda r: (-r.unsupported, r.target)))
