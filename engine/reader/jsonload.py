"""Bounded JSON loading shared by the decoders.

:func:`load_json` turns a member's bytes into Python objects or raises one
:class:`~engine.errors.PT2FormatError`: invalid UTF-8 or JSON, a document larger than the limit,
or nesting deep enough to exhaust the parser's recursion (reported, never propagated as a
``RecursionError``). ``NaN``/``Infinity`` tokens are accepted as floats, like torch's reader.
:func:`json_type` names a JSON value's type for error messages.
"""
from __future__ import annotations

import json

from engine.errors import PT2FormatError

#: Largest JSON document accepted (a 1,500-node graph is ~3 MB).
MAX_JSON_BYTES = 256 << 20


def load_json(data: bytes | str, member: str, *, limit: int = MAX_JSON_BYTES):
    if len(data) > limit:
        raise PT2FormatError(member, f"JSON document of {len(data)} bytes exceeds the {limit}-byte limit")
    try:
        return json.loads(data)
    except RecursionError:
        raise PT2FormatError(member, "JSON nested too deeply") from None
    except UnicodeDecodeError as e:
        raise PT2FormatError(member, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except ValueError as e:
        raise PT2FormatError(member, f"invalid JSON: {e}") from None
    except MemoryError:
        raise PT2FormatError(member, "JSON document too large to decode") from None


def json_type(v) -> str:
    """``"an object"``, ``"an array"``, ``"a string"``, ``"a number"``, ``"a boolean"`` or ``"null"``."""
    if v is None:
        return "null"
    return _NAMES.get(type(v), type(v).__name__)


_NAMES = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
          list: "an array", dict: "an object"}
