"""The ATen operator schema table, read from ``engine/data/aten_schemas.jsonl.gz`` without torch.

The table is generated once by ``tools/gen_aten_schemas.py`` from torch's operator registry and
shipped with the package. Serialized graphs omit arguments left at their default, so the
builder fills them in from here. The file is read on the first lookup (≈60 KB gzip, one
``key<TAB>json`` line per overload); only the lines looked up are found and decoded from JSON
(splitting all 4,000-odd lines into a dict cost as much as inflating the file), and each
:class:`OpSchema` is made on first use::

    >>> from engine.build import schemas
    >>> s = schemas.get("aten.conv2d.default")
    >>> [(a.name, a.type, a.default) for a in s.arguments if a.has_default]
    [('bias', 'Tensor?', None), ('stride', 'SymInt[2]', [1, 1]), ...]

Keys are ``namespace.name.overload`` with ``default`` for the unnamed overload (the node target
without ``torch.ops.``). Types are the schema's own spelling without alias annotations
(``Tensor?``, ``Tensor[]``, ``SymInt[2]``, ``ScalarType?``); defaults are JSON values with enums
spelled the way the builder spells them (``"int64"``, ``"contiguous_format"``, ``"strided"``).
"""
from __future__ import annotations

import functools
import json
import logging
import zlib
from pathlib import Path
from typing import Any

from ..records import record

log = logging.getLogger(__name__)

TABLE_PATH = Path(__file__).resolve().parent.parent / "data" / "aten_schemas.jsonl.gz"


@record(frozen=True)
class SchemaArgument:
    """One declared argument of an operator overload."""

    name: str
    type: str  #: schema type without alias annotation, e.g. ``Tensor?`` or ``SymInt[2]``
    default: Any = None  #: the default as a JSON value (None also when there is no default)
    has_default: bool = False
    kwarg_only: bool = False
    alias: str | None = None  #: alias annotation, e.g. ``a!`` (written) or ``a`` (view)
    is_write: bool = False  #: the operator mutates this argument
    is_out: bool = False  #: an ``out=`` argument

    @property
    def is_tensor(self) -> bool:
        """Tensor, optional tensor, or a list of (optional) tensors."""
        return self.type.startswith("Tensor")

    @property
    def is_optional(self) -> bool:
        return self.type.endswith("?")


@record(frozen=True)
class SchemaReturn:
    """One return of an ATen operator schema."""

    name: str  #: "" when unnamed
    type: str
    alias: str | None = None


@record(frozen=True)
class OpSchema:
    """The schema of one overload (``aten.conv2d.default``)."""

    key: str
    arguments: tuple[SchemaArgument, ...]
    returns: tuple[SchemaReturn, ...]
    is_mutable: bool = False

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {a.name: i for i, a in enumerate(self.arguments)}

    def argument(self, name: str) -> SchemaArgument | None:
        i = self._index.get(name)
        return None if i is None else self.arguments[i]

    @property
    def is_out(self) -> bool:
        """An ``out=`` variant (writes into a caller-provided tensor)."""
        return any(a.is_out for a in self.arguments)

    @property
    def is_inplace(self) -> bool:
        """Mutates its first argument and returns it (``relu_``, ``add_.Tensor``)."""
        if not self.arguments or not self.returns or self.is_out:
            return False
        first = self.arguments[0]
        return first.is_write and self.returns[0].alias == first.alias

    def written_arguments(self) -> list[tuple[SchemaArgument, int | None]]:
        """Arguments the op mutates, each with the index of the return that aliases it (or
        None when the mutated value is not returned)."""
        out = []
        for a in self.arguments:
            if a.is_write:
                ret = next((i for i, r in enumerate(self.returns) if r.alias == a.alias), None)
                out.append((a, ret))
        return out


@functools.lru_cache(maxsize=1)
def _text() -> str:
    """The whole table: a JSON header line, then ``key<TAB>json`` lines (``zlib`` reads the gzip
    wrapper itself, without importing :mod:`gzip`)."""
    text = zlib.decompress(TABLE_PATH.read_bytes(), 16 + zlib.MAX_WBITS).decode()
    log.debug("loaded the operator schemas (%s)", text[:text.find("\n")])
    return text


def _line(key: str) -> str | None:
    """The still-encoded JSON of overload ``key``, or None: a binary search over the text, whose
    lines the generator writes sorted by key (no index of the 4,000-odd lines to build)."""
    text = _text()
    lo, hi = text.find("\n") + 1, len(text)  # lo: the start of a line; the key, if any, starts in [lo, hi)
    while lo < hi:
        mid = text.rfind("\n", lo, (lo + hi) // 2) + 1 or lo  # the start of the line holding the middle
        tab = text.find("\t", mid)
        end = text.find("\n", tab)
        end = len(text) if end < 0 else end
        here = text[mid:tab]
        if here == key:
            return text[tab + 1:end]
        if here < key:
            lo = end + 1
        else:
            hi = mid
    return None


def _make(key: str, raw: dict) -> OpSchema:
    args = tuple(
        SchemaArgument(a["name"], a["type"], a.get("default"), "default" in a, a.get("kwarg_only", False),
                       a.get("alias"), a.get("write", False), a.get("out", False))
        for a in raw["args"])
    rets = tuple(SchemaReturn(r["name"], r["type"], r.get("alias")) for r in raw["returns"])
    return OpSchema(key, args, rets, raw.get("mutable", False))


@functools.lru_cache(maxsize=None)
def get(key: str) -> OpSchema | None:
    """The schema of overload ``key`` (``aten.add.Tensor``), or None when the table has none
    (custom ops, ``_operator.*``, higher-order ops)."""
    text = _line(key)
    return None if text is None else _make(key, json.loads(text))


def keys() -> list[str]:
    """Every overload key in the table, sorted."""
    return [line.split("\t", 1)[0] for line in _text().splitlines()[1:]]


def torch_version() -> str:
    """The torch version the table was generated from."""
    text = _text()
    return json.loads(text[:text.find("\n")])["torch_version"]
