"""The ``.ncnn.param`` text format: one layer line out, and a parser that reads values with
ncnn's own rules (``ParamDict::load_param`` in ``paramdict.cpp``).

::

    7767517
    <layer count> <blob count>
    <type> <name> <n_in> <n_out> <inputs...> <outputs...> <id>=<value> ...

A value with ``.`` or ``e`` is a float, otherwise an int; ``"..."`` or a value starting with a
letter is a string. Arrays are written the way pnnx writes them, ``-23300-<id>=<len>,v1,v2,...``
(ints or floats, never mixed: ncnn types the whole array by its last element); the newer short
form ``<id>=v1,v2,...`` (typed by its first element) is also read. Param ids are 0..31.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..records import field, record
from .values import is_ncnn_float_literal, ncnn_float, parse_ncnn_float

MAGIC = 7767517
MAX_PARAM_ID = 31
ARRAY_KEY_BASE = -23300
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_LEADING_INT = re.compile(r"^[+-]?\d+")


def format_value(pid: int, kind: str, value: Any) -> str:
    """``id=value`` for one param of the given kind (``int``, ``float``, ``int_array``,
    ``float_array``, ``str``)."""
    if kind == "int":
        return f"{pid}={int(value)}"
    if kind == "float":
        return f"{pid}={ncnn_float(value)}"
    if kind == "str":
        s = str(value)
        return f"{pid}={s}" if _IDENT.match(s) else f'{pid}="{s}"'
    items = list(value)
    fmt = ncnn_float if kind == "float_array" else (lambda v: str(int(v)))
    return f"{ARRAY_KEY_BASE - pid}={len(items)}" + "".join("," + fmt(v) for v in items)


def format_layer(type_: str, name: str, inputs: list[str], outputs: list[str], params: list[str]) -> str:
    """One layer line, aligned like pnnx's (``%-24s %-24s``)."""
    parts = [f"{type_:<24} {name:<24} {len(inputs)} {len(outputs)}", *inputs, *outputs, *params]
    return " ".join(parts)


# ---------------------------------------------------------------------------- parsing
class ParamSyntaxError(ValueError):
    """A malformed ``.ncnn.param`` (the message says what; ``line`` where)."""

    def __init__(self, line: int, reason: str):
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}")


@record
class LayerRecord:
    """One parsed layer line."""

    type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    params: dict[int, Any] = field(default_factory=dict)
    line: int = 0


@record
class ParamFile:
    """A parsed ``.ncnn.param``: its counts and layers."""

    layer_count: int
    blob_count: int
    layers: list[LayerRecord]


def _tokens(line: str, lineno: int) -> list[str]:
    """Whitespace-separated tokens; a double-quoted part may contain spaces."""
    out, cur, quoted = [], [], False
    for ch in line:
        if ch == '"':
            quoted = not quoted
            cur.append(ch)
        elif ch.isspace() and not quoted:
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if quoted:
        raise ParamSyntaxError(lineno, "unterminated string")
    if cur:
        out.append("".join(cur))
    return out


def _int(s: str, lineno: int, what: str) -> int:
    m = _LEADING_INT.match(s)
    if not m:
        raise ParamSyntaxError(lineno, f"{what}: {s!r} is not a number")
    return int(m.group(0))


def _scalar(s: str, is_float: bool, lineno: int, key: str) -> int | float:
    if is_float:
        return float(parse_ncnn_float(s))
    return _int(s, lineno, f"param {key}")


def parse_value(key: str, text: str, lineno: int) -> tuple[int, Any]:
    """``(id, value)`` of one ``key=value`` token, typed the way ncnn types it."""
    try:
        pid = int(key)
    except ValueError:
        raise ParamSyntaxError(lineno, f"param key {key!r} is not an integer id") from None
    if pid <= ARRAY_KEY_BASE:
        pid = ARRAY_KEY_BASE - pid
        if not 0 <= pid <= MAX_PARAM_ID:
            raise ParamSyntaxError(lineno, f"array param id {key} out of range")
        parts = text.split(",")
        n = _int(parts[0], lineno, f"array {key} length")
        items = parts[1:]
        if len(items) != n:
            raise ParamSyntaxError(lineno, f"array {key} says {n} values but has {len(items)}")
        floats = [is_ncnn_float_literal(v) for v in items]
        if any(floats) and not all(floats):
            raise ParamSyntaxError(lineno, f"array {key} mixes int and float values")
        return pid, [_scalar(v, f, lineno, key) for v, f in zip(items, floats)]
    if not 0 <= pid <= MAX_PARAM_ID:
        raise ParamSyntaxError(lineno, f"param id {pid} out of range 0..{MAX_PARAM_ID}")
    if not text:
        raise ParamSyntaxError(lineno, f"param {pid} has no value")
    if text[0].isalpha() or text[0] == '"':
        s = text[1:] if text[0] == '"' else text
        return pid, s[:-1] if s.endswith('"') else s
    if "," in text:
        items = text.split(",")
        is_float = is_ncnn_float_literal(items[0])
        return pid, [_scalar(v, is_float, lineno, key) for v in items if v]
    return pid, _scalar(text, is_ncnn_float_literal(text), lineno, key)


def parse_param_text(text: str) -> ParamFile:
    lines = [(i + 1, ln) for i, ln in enumerate(text.splitlines()) if ln.strip()]
    if not lines:
        raise ParamSyntaxError(1, "empty file")
    lineno, first = lines[0]
    if first.strip() != str(MAGIC):
        raise ParamSyntaxError(lineno, f"magic number {first.strip()!r} is not {MAGIC} (not an ncnn text param file?)")
    if len(lines) < 2:
        raise ParamSyntaxError(lineno, "missing the layer and blob counts")
    lineno, counts = lines[1]
    c = counts.split()
    if len(c) != 2:
        raise ParamSyntaxError(lineno, "expected '<layer count> <blob count>'")
    layer_count, blob_count = _int(c[0], lineno, "layer count"), _int(c[1], lineno, "blob count")
    layers = []
    for lineno, line in lines[2:]:
        toks = _tokens(line, lineno)
        if len(toks) < 4:
            raise ParamSyntaxError(lineno, "expected '<type> <name> <inputs> <outputs> ...'")
        n_in, n_out = _int(toks[2], lineno, "input count"), _int(toks[3], lineno, "output count")
        if n_in < 0 or n_out < 0 or len(toks) < 4 + n_in + n_out:
            raise ParamSyntaxError(lineno, f"layer {toks[1]} lists fewer blobs than {n_in} inputs + {n_out} outputs")
        rec = LayerRecord(toks[0], toks[1], toks[4:4 + n_in], toks[4 + n_in:4 + n_in + n_out], line=lineno)
        for tok in toks[4 + n_in + n_out:]:
            key, eq, val = tok.partition("=")
            if not eq:
                raise ParamSyntaxError(lineno, f"layer {rec.name}: {tok!r} is not id=value")
            pid, value = parse_value(key, val, lineno)
            if pid in rec.params:
                raise ParamSyntaxError(lineno, f"layer {rec.name}: param {pid} given twice")
            rec.params[pid] = value
        layers.append(rec)
    return ParamFile(layer_count, blob_count, layers)


def value_kind(value: Any) -> str:
    """The kind a parsed value has (for layers the table does not know)."""
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "float_array" if any(isinstance(v, float) for v in value) else "int_array"
    return "float" if isinstance(value, float) else "int"


def kinds_for(params: Mapping[int, Any], spec_kinds: Mapping[int, str]) -> dict[int, str]:
    return {k: spec_kinds.get(k) or value_kind(v) for k, v in params.items()}
