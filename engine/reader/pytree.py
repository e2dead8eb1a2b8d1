"""Decoding of serialized pytree specs (``in_spec`` / ``out_spec``) into a readable tree.

A treespec string is ``json.dumps([1, node])`` with ``node = {"type", "context",
"children_spec"}``; a leaf is ``{"type": null, "context": null, "children_spec": []}``. The
context is JSON text for tuples/lists (``"null"``), dicts (the key list) and dataclasses
(``[[field names], [None-valued field names]]``); for a namedtuple it is the raw serialized type
name, whose fields come from the program's ``treespec_namedtuple_fields``.

:class:`PyTree` types are short names: ``"tuple"``, ``"list"``, ``"dict"``, ``"OrderedDict"``,
``"defaultdict"``, ``"deque"``, ``"namedtuple:<type>"``, ``"dataclass:<type>"``, other registered
types by their serialized name, and None for a leaf. Leaves can carry the graph name they stand
for (:attr:`PyTree.name`, filled in by the signature classifier).
"""
from __future__ import annotations

import json
import logging
from typing import Any

from engine.errors import PT2FormatError
from engine.reader.jsonload import json_type, load_json

from ..records import field, record

log = logging.getLogger(__name__)

MAX_TREE_DEPTH = 100
_BUILTIN = {"builtins.tuple": "tuple", "builtins.list": "list", "builtins.dict": "dict",
            "collections.OrderedDict": "OrderedDict", "collections.defaultdict": "defaultdict",
            "collections.deque": "deque"}


@record
class PyTree:
    """One node of a pytree spec. ``context`` is the dict keys (dict types), the field names
    (namedtuple / dataclass), or the decoded raw context for other types; ``name`` is the graph
    value a leaf stands for, when known."""

    type: str | None
    context: Any = None
    children: list["PyTree"] = field(default_factory=list)
    name: str | None = None

    @property
    def is_leaf(self) -> bool:
        return self.type is None

    def leaves(self) -> list["PyTree"]:
        out: list[PyTree] = []
        stack = [self]
        while stack:
            t = stack.pop()
            if t.type is None:
                out.append(t)
            else:
                stack.extend(reversed(t.children))
        return out

    def __str__(self) -> str:
        return self._render(0)

    def _render(self, depth: int) -> str:
        if self.type is None:
            return self.name or "*"
        if depth > MAX_TREE_DEPTH:
            return "..."
        kids = [c._render(depth + 1) for c in self.children]
        t = self.type
        if t == "tuple":
            return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
        if t in ("list", "deque"):
            return "[" + ", ".join(kids) + "]"
        keys = self.context if isinstance(self.context, list) else []
        if t in ("dict", "OrderedDict", "defaultdict"):
            body = ", ".join(f"{k!r}: {v}" for k, v in zip(keys, kids))
            return "{" + body + "}" if t == "dict" else f"{t}({{{body}}})"
        if t.startswith(("namedtuple:", "dataclass:")):
            cls = t.split(":", 1)[1].rsplit(".", 1)[-1]
            if len(keys) == len(kids):
                return f"{cls}(" + ", ".join(f"{k}={v}" for k, v in zip(keys, kids)) + ")"
            return f"{cls}(" + ", ".join(kids) + ")"
        return f"{t}<" + ", ".join(kids) + ">"


def parse_treespec(text: str, where: str, namedtuple_fields: dict[str, list[str]] | None = None) -> PyTree:
    """Decode one serialized treespec; ``where`` names it in errors (member and path)."""
    doc = load_json(text, where)
    if not (isinstance(doc, list) and len(doc) == 2):
        raise PT2FormatError(where, f"expected [version, tree], got {json_type(doc)}")
    version, node = doc
    if version != 1:
        raise PT2FormatError(where, f"unsupported treespec version {version!r}")
    try:
        return _node(node, namedtuple_fields or {}, 0)
    except ValueError as e:
        raise PT2FormatError(where, f"bad treespec: {e}") from None


def _node(d, nt_fields: dict, depth: int) -> PyTree:
    if depth > MAX_TREE_DEPTH:
        raise ValueError(f"nested more than {MAX_TREE_DEPTH} levels")
    if not isinstance(d, dict):
        raise ValueError(f"expected an object, got {json_type(d)}")
    typ = d.get("type")
    ctx = d.get("context")
    kids = d.get("children_spec", [])
    if not isinstance(kids, list):
        raise ValueError(f"children_spec: expected an array, got {json_type(kids)}")
    if typ is None:
        if kids:
            raise ValueError("a leaf with children")
        return PyTree(None)
    if not isinstance(typ, str):
        raise ValueError(f"type: expected a string, got {json_type(typ)}")
    children = [_node(k, nt_fields, depth + 1) for k in kids]
    if typ == "collections.namedtuple":
        name = ctx if isinstance(ctx, str) else str(ctx)
        return PyTree(f"namedtuple:{name}", list(nt_fields.get(name, [])), children)
    context = _decode_context(ctx)
    if typ in _BUILTIN:
        short = _BUILTIN[typ]
        if short == "defaultdict" and isinstance(context, dict):
            context = context.get("dict_context")
        if short in ("tuple", "list", "deque"):
            context = None
        return PyTree(short, context, children)
    if (isinstance(context, list) and len(context) == 2 and all(isinstance(c, list) for c in context)
            and all(isinstance(n, str) for n in context[0])):
        return PyTree(f"dataclass:{typ}", list(context[0]), children)
    return PyTree(typ, context, children)


def _decode_context(ctx):
    if not isinstance(ctx, str):
        return ctx
    try:
        return json.loads(ctx)
    except (ValueError, RecursionError):
        return ctx
