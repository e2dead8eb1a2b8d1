"""Structural diff between two graph snapshots (text forms, see :mod:`engine.ir.text`).

Operators are matched by name: those only in the new snapshot are *added*, only in the old
one *removed*, and those whose line differs are *changed*. Each entry keeps both lines and the
provenance (ATen node names), so the GUI can colour operators and the CLI can write a
readable ``.diff`` file.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import lru_cache

from ..ir.text import MAGIC, split_tokens


@dataclass
class DiffEntry:
    name: str  #: operator name
    type: str  #: operator type (after the change, or before for a removal)
    before: str | None  #: the operator's line before (None when added)
    after: str | None  #: the operator's line after (None when removed)
    provenance: tuple[str, ...] = ()  #: ATen node names the operator came from


@dataclass
class GraphDiff:
    added: list[DiffEntry] = field(default_factory=list)
    removed: list[DiffEntry] = field(default_factory=list)
    changed: list[DiffEntry] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "removed": len(self.removed), "changed": len(self.changed)}

    def to_text(self) -> str:
        """Readable summary followed by the entries (``+``, ``-``, ``~``)."""
        c = self.counts()
        out = [f"# +{c['added']} -{c['removed']} ~{c['changed']}"]
        for e in self.removed:
            out.append(f"- {e.before}")
        for e in self.added:
            out.append(f"+ {e.after}")
        for e in self.changed:
            out.append(f"~ {e.name}\n    before: {e.before}\n    after:  {e.after}")
        return "\n".join(out) + "\n"


@lru_cache(maxsize=4)
def _op_lines(text: str) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """name → (type, line, provenance nodes) for every operator line of a snapshot (cached: the
    pass manager diffs each snapshot twice, as the "after" of a pass and the "before" of the
    next; callers must not modify the result)."""
    out: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    lines = text.splitlines()
    start = 2 if lines and lines[0].strip() == MAGIC else 0
    for line in lines[start:]:
        if not line.strip():
            continue
        toks = split_tokens(line)
        if len(toks) < 2:
            continue
        prov: tuple[str, ...] = ()
        for t in toks:
            if t.startswith("!from="):
                prov = tuple(t[len("!from="):].split(","))
        out[toks[1]] = (toks[0], line, prov)
    return out


def diff_snapshots(before: str, after: str) -> GraphDiff:
    d = GraphDiff()
    if before == after:  # a pass that changed nothing
        return d
    a, b = _op_lines(before), _op_lines(after)
    for name, (typ, line, prov) in a.items():
        if name not in b:
            d.removed.append(DiffEntry(name, typ, line, None, prov))
    for name, (typ, line, prov) in b.items():
        if name not in a:
            d.added.append(DiffEntry(name, typ, None, line, prov))
        elif a[name][1] != line:
            d.changed.append(DiffEntry(name, typ, a[name][1], line, prov or a[name][2]))
    return d


def unified_diff(before: str, after: str, *, name_before: str = "before", name_after: str = "after") -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), name_before, name_after))
