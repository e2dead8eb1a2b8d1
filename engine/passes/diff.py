"""Structural diff between two graph snapshots.

Operators are matched by name: those only in the new snapshot are *added*, only in the old
one *removed*, and those whose line of the text form differs are *changed*. Each entry keeps
both lines and the provenance (ATen node names), so the GUI can colour operators and the CLI
can write a readable ``.diff`` file.

:func:`diff_states` diffs two :class:`engine.ir.snapshot.Snapshot` objects (what the pass
manager does after every pass): operators whose state the two snapshots share are unchanged
without comparing anything. :func:`diff_snapshots` diffs two text forms with the same result.
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..records import field, record

if TYPE_CHECKING:
    from ..ir.snapshot import Snapshot


_LAZY = object()


class DiffEntry:
    """One operator of a diff. ``type`` and ``provenance`` are read from the lines when first
    asked (:meth:`from_lines`), so a diff of thousands of operators costs nothing until shown."""

    __slots__ = ("name", "before", "after", "_type", "_provenance")

    def __init__(self, name: str, type: str, before: str | None, after: str | None,
                 provenance: tuple[str, ...] = ()):
        self.name = name  #: operator name
        self.before = before  #: the operator's line before (None when added)
        self.after = after  #: the operator's line after (None when removed)
        self._type = type
        self._provenance = provenance

    @classmethod
    def from_lines(cls, name: str, before: str | None, after: str | None) -> "DiffEntry":
        e = cls(name, "", before, after)
        e._type = e._provenance = _LAZY
        return e

    @property
    def type(self) -> str:
        """Operator type (after the change, or before for a removal)."""
        if self._type is _LAZY:
            self._type = _fields(self.after if self.after is not None else self.before)[0]
        return self._type

    @property
    def provenance(self) -> tuple[str, ...]:
        """ATen node names the operator came from (for a change: after it, else before it)."""
        if self._provenance is _LAZY:
            prov = _fields(self.after)[2] if self.after is not None else ()
            if not prov and self.before is not None:
                prov = _fields(self.before)[2]
            self._provenance = prov
        return self._provenance

    def _key(self):
        return self.name, self.type, self.before, self.after, self.provenance

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DiffEntry) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"DiffEntry(name={self.name!r}, type={self.type!r}, before={self.before!r}, after={self.after!r}, "
                f"provenance={self.provenance!r})")


@record
class GraphDiff:
    """Operators a pass added, removed and changed."""

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


def _fields(line: str) -> tuple[str, str, tuple[str, ...]]:
    """(type, name, provenance nodes) of an operator line (the last ``!from=`` token counts)."""
    from ..ir.text import split_tokens  # here: the text form is imported on first use (engine.ir)

    toks = split_tokens(line)
    for t in reversed(toks):
        if t.startswith("!from="):
            return toks[0], toks[1], tuple(t[len("!from="):].split(","))
    return toks[0], toks[1], ()


@lru_cache(maxsize=4)
def _op_lines(text: str) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """name → (type, line, provenance nodes) for every operator line of a snapshot (cached: the
    pass manager diffs each snapshot twice, as the "after" of a pass and the "before" of the
    next; callers must not modify the result)."""
    from ..ir.text import MAGIC, split_tokens  # here: the text form is imported on first use (engine.ir)

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
    """The diff of two text forms."""
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


def diff_states(before: Snapshot, after: Snapshot) -> GraphDiff:
    """The diff of two structural snapshots (the same as :func:`diff_snapshots` of their
    texts): only the operators whose state is not shared are looked at."""
    d = GraphDiff()
    if before.states == after.states:  # identity comparison of the shared states: nothing changed
        return d
    a, b = before.by_name(), after.by_name()
    entry = DiffEntry.from_lines
    for name, st in a.items():
        if name not in b:
            d.removed.append(entry(name, st.line, None))
    for name, st in b.items():
        old = a.get(name)
        if old is st:
            continue
        if old is None:
            d.added.append(entry(name, None, st.line))
        elif old.line != st.line:
            d.changed.append(entry(name, old.line, st.line))
    return d


def unified_diff(before: str, after: str, *, name_before: str = "before", name_after: str = "after") -> str:
    import difflib  # here: only a text diff needs it

    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), name_before, name_after))
