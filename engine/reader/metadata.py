"""Parsing of node metadata strings into :class:`engine.reader.schema.NodeMetadata`.

The serializer stores node metadata as strings (``torch/_export/serde/serialize.py``):

* ``stack_trace``: a Python traceback excerpt; its first ``File "...", line N, in f`` frame is the
  user code the node came from (:class:`~engine.reader.schema.SourceLocation`);
* ``nn_module_stack``: items ``key,path,type`` joined by ``;`` where commas inside ``[]``/``()``
  belong to the item (paths such as ``L['self'].layers[0]``);
* ``source_fn_stack``: items ``name,target`` joined by ``;``;
* ``torch_fn``: ``name;qualname``;
* ``custom`` and ``from_node``: JSON text, kept raw (see :func:`custom_metadata`).

Metadata strings repeat heavily (every node of a module carries the same module stack), so
:class:`MetadataParser` caches parsed pieces; one parser serves one decode.
"""
from __future__ import annotations

import json
import logging
import re

from engine.reader.jsonload import json_type
from engine.reader.schema import ModuleFrame, NodeMetadata, SourceLocation

log = logging.getLogger(__name__)

ST_DELIMITER = ";"
#: torch's metadata hook marks "no module" with this placeholder frame.
EMPTY_STACK_KEY = "_empty_nn_module_stack_from_metadata_hook"
_FRAME_RE = re.compile(r'File "([^"\n]*)", line (\d+)(?:, in ([^\n]*))?(?:\n[ \t]*([^\n]*))?')


class MetadataError(ValueError):
    """A metadata string does not have the documented shape; ``key`` names which one."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"metadata.{key}: {reason}")
        self.key = key
        self.reason = reason


def split_outside_brackets(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` on ``sep`` except inside ``[...]`` or ``(...)`` (torch's metadata_split)."""
    if "[" not in text and "(" not in text:
        return text.split(sep)
    out: list[str] = []
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c in "[(":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def parse_module_frame(item: str) -> ModuleFrame | None:
    """One ``key,path,type`` item (None for torch's "no module" placeholder)."""
    parts = split_outside_brackets(item)
    if len(parts) != 3:
        raise MetadataError("nn_module_stack", f"item {item!r} is not 'key,path,type'")
    if parts[0] == EMPTY_STACK_KEY:
        return None
    return ModuleFrame(parts[0], normalize_module_path(parts[1]), parts[2])


def parse_module_stack(text: str, frame_cache: dict | None = None) -> list[ModuleFrame]:
    """``key,path,type;key,path,type`` → frames, outermost (the root module) first."""
    frames: list[ModuleFrame] = []
    for item in text.split(ST_DELIMITER):
        if frame_cache is None:
            f = parse_module_frame(item)
        else:
            f = _cached(frame_cache, item, parse_module_frame)
        if f is not None:
            frames.append(f)
    return frames


def normalize_module_path(path: str) -> str:
    """Module paths as FQNs: older torch wrote ``L['self'].layer1[0]`` or ``L__self___layer1``;
    return ``layer1.0`` style where it can be recovered, else the path unchanged."""
    if not path or path[0] != "L":
        return path
    p = path
    for prefix in ("L['self'].", "L['self']", "L__self__."):
        if p.startswith(prefix):
            p = p[len(prefix):]
            break
    else:
        return path
    p = re.sub(r"\[(\d+)\]", r".\1", p)
    p = re.sub(r"\['([^'\]]*)'\]", r".\1", p)
    return p.lstrip(".")


def _location(m: re.Match) -> SourceLocation:
    return SourceLocation(m.group(1), int(m.group(2)), (m.group(3) or "").strip(), (m.group(4) or "").strip())


def parse_source(stack_trace: str) -> SourceLocation | None:
    """The first frame of a ``stack_trace`` (the user code), or None when there is none."""
    m = _FRAME_RE.search(stack_trace)
    return _location(m) if m else None


def parse_stack_trace(stack_trace: str) -> list[SourceLocation]:
    """Every frame of a ``stack_trace``, outermost first (as written: the model's ``forward``
    first, the line that called the operator last)."""
    return [_location(m) for m in _FRAME_RE.finditer(stack_trace)]


def parse_source_fn_stack(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in text.split(ST_DELIMITER):
        name, sep, target = item.partition(",")
        if not sep:
            raise MetadataError("source_fn_stack", f"item {item!r} is not 'name,target'")
        out.append((name, target))
    return out


def parse_torch_fn(text: str) -> tuple[str, str]:
    name, sep, qualname = text.partition(ST_DELIMITER)
    if not sep:
        raise MetadataError("torch_fn", f"{text!r} is not 'name;qualname'")
    return (name, qualname)


def custom_metadata(md: NodeMetadata):
    """The node's ``custom`` metadata decoded from JSON, or None (absent or not valid JSON)."""
    text = md.raw.get("custom")
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        log.warning("ignoring undecodable custom metadata")
        return None


class MetadataParser:
    """Parses node metadata dicts, caching the repeated strings of one program."""

    def __init__(self) -> None:
        self._stacks: dict[str, list[ModuleFrame]] = {}
        self._sources: dict[str, SourceLocation | None] = {}
        self._fn_stacks: dict[str, list[tuple[str, str]]] = {}
        self._frames: dict[str, ModuleFrame | None] = {}

    def parse(self, raw: dict) -> NodeMetadata:
        """``raw`` is the node's ``metadata`` object; its values must be strings."""
        if not raw:
            return NodeMetadata()
        for k, v in raw.items():
            if type(v) is not str:
                raise MetadataError(k, f"expected a string, got {json_type(v)}")
        st = raw.get("stack_trace") or None
        source = _cached(self._sources, st, parse_source) if st else None
        ms = raw.get("nn_module_stack")
        frames = (self._stacks.get(ms) or self._module_stack(ms)) if ms else []
        sf = raw.get("source_fn_stack")
        fns = _cached(self._fn_stacks, sf, parse_source_fn_stack) if sf else []
        tf = raw.get("torch_fn")
        torch_fn = parse_torch_fn(tf) if tf else None
        return NodeMetadata(raw, st, frames, fns, torch_fn, source)

    def _module_stack(self, text: str) -> list[ModuleFrame]:
        """:func:`parse_module_stack` of ``text``, made from the cached stack of its enclosing
        module (a node's stack is its module's stack plus one item; siblings share it)."""
        frames = self._stacks.get(text)
        if frames is None:
            parent, sep, item = text.rpartition(ST_DELIMITER)
            if not sep:
                frames = parse_module_stack(text, self._frames)
            else:
                head = self._stacks.get(parent)
                if head is None:
                    head = self._stacks[parent] = parse_module_stack(parent, self._frames)
                last = _cached(self._frames, item, parse_module_frame)
                frames = list(head) if last is None else head + [last]
            self._stacks[text] = frames
        return frames


_MISSING = object()


def _cached(cache: dict, key: str, parse):
    value = cache.get(key, _MISSING)
    if value is _MISSING:
        value = cache[key] = parse(key)
    return value

