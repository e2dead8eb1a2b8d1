"""Deterministic text form of an IR graph, and its parser.

The form extends pnnx.param's operator line so snapshots diff well and tests can write
graphs by hand::

    7767517
    <operator count> <operand count>
    <type> <name> <n_in> <n_out> <inputs...> <outputs...> key=value ... @attr=(shape)dtype
        #operand=(shape)dtype ... !from=aten_node,... !mod=module.path,...

Values: ``None``, ``True``/``False``, ints, floats (always with ``.`` or ``e``), bare strings
(or JSON-quoted when they contain spaces, quotes, commas, parentheses or ``=``), and tuples
``(a,b,...)`` which may nest. Integer keys (ncnn param ids) are written as digits.
Operand annotations ``#name=(1,3,?,s77)f32`` are written once, on the line that produces the
operand. Attribute data is not part of the text (the shape and dtype are).
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from .graph import Attribute, Graph, IRError, Operator, Provenance

MAGIC = "7767517"
_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/\-\[\]]*$")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_DIM = re.compile(r"-?\d+")
_NESTED = re.compile(r'[(),"]')  # a value holding one of these goes through the full parser
_JSON = json.JSONDecoder()
#: attribute placeholders' numpy dtypes by short dtype (float32 for any other)
_PLACEHOLDER_DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i64": np.int64,
                       "i32": np.int32, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}


def format_value(v: Any) -> str:
    t = type(v)  # the common exact types first (the checks below spell them the same)
    if t is int:
        return str(v)
    if (t is list or t is tuple) and all(type(x) is int for x in v):
        return "(" + ",".join(map(str, v)) + ")"
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        s = repr(v)
        return s if ("." in s or "e" in s) else s + ".0"
    if isinstance(v, str):
        if _BARE.match(v) and v not in ("None", "True", "False", "nan", "inf"):
            return v
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(format_value(x) for x in v) + ")"
    if hasattr(v, "item"):  # numpy scalar
        return format_value(v.item())
    raise IRError(f"cannot write parameter value of type {type(v).__name__}: {v!r}")


def _format_shape(shape, dtype) -> str:
    return "(" + ",".join(["?" if d is None else str(d) for d in shape]) + ")" + (dtype or "")


def format_op(op: Operator) -> str:
    """The operator's line of the text form."""
    d = op.__dict__
    inputs, outputs = d["inputs"], d["outputs"]
    parts = [d["type"], d["name"], str(len(inputs)), str(len(outputs))]
    parts += [i.name for i in inputs]
    parts += [o.name for o in outputs]
    for k, v in d["params"].items():
        parts.append(f"{k}={format_value(v)}")
    for k, a in d["attrs"].items():
        parts.append(f"@{k}={_format_shape(a.shape, a.dtype)}")
    input_names = d["input_names"]
    if input_names and any(input_names):
        for n, i in zip(input_names, inputs):
            if n:
                parts.append(f"${n}={i.name}")
    for o in outputs:
        shape, dtype = o.shape, o.dtype
        if shape is not None or dtype:
            parts.append(f"#{o.name}={_format_shape(shape or [], dtype)}")
    prov = d["provenance"]
    if prov.nodes:
        parts.append("!from=" + ",".join(prov.nodes))
    if prov.modules:
        parts.append("!mod=" + ",".join(m or "<root>" for m in prov.modules))
    return " ".join(parts)


def format_header(g: Graph) -> str:
    """The first two lines of the text form (magic, operator and operand counts), no newline."""
    return f"{MAGIC}\n{len(g.ops)} {len(g.operands)}"


def format_graph(g: Graph) -> str:
    return "\n".join([format_header(g)] + [format_op(op) for op in g.ops]) + "\n"


# ---------------------------------------------------------------------------- parsing
def split_tokens(line: str) -> list[str]:
    """Split on spaces outside double quotes."""
    if '"' not in line:  # fast path (almost every line): plain whitespace split, same tokens
        return line.split()
    out, cur, in_q, esc = [], [], False, False
    for ch in line:
        if in_q:
            cur.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_q = False
        elif ch == '"':
            in_q = True
            cur.append(ch)
        elif ch.isspace():
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if in_q:
        raise IRError(f"unterminated string in line: {line}")
    if cur:
        out.append("".join(cur))
    return out


class _ValueParser:
    def __init__(self, s: str):
        self.s, self.i = s, 0

    def parse(self) -> Any:
        v = self.value()
        if self.i != len(self.s):
            raise IRError(f"trailing characters in value {self.s!r}")
        return v

    def value(self) -> Any:
        s = self.s
        if self.i < len(s) and s[self.i] == "(":
            self.i += 1
            items: list[Any] = []
            if self.i < len(s) and s[self.i] == ")":
                self.i += 1
                return items
            while True:
                items.append(self.value())
                if self.i >= len(s):
                    raise IRError(f"unterminated tuple in {s!r}")
                if s[self.i] == ",":
                    self.i += 1
                elif s[self.i] == ")":
                    self.i += 1
                    return items
                else:
                    raise IRError(f"unexpected {s[self.i]!r} in {s!r}")
        if self.i < len(s) and s[self.i] == '"':
            v, end = _JSON.raw_decode(s, self.i)
            self.i = end
            return v
        j = self.i
        while j < len(s) and s[j] not in ",)":
            j += 1
        tok = s[self.i:j]
        self.i = j
        return _scalar(tok)


def _scalar(tok: str) -> Any:
    if tok == "None":
        return None
    if tok == "True":
        return True
    if tok == "False":
        return False
    if tok in ("nan", "inf", "-inf"):
        return float(tok)
    if _INT.fullmatch(tok):
        return int(tok)
    if _FLOAT.fullmatch(tok):
        return float(tok)
    return tok


def parse_value(s: str) -> Any:
    if not _NESTED.search(s):  # a scalar (most values): the tokenizer would take it whole
        return _scalar(s)
    return _ValueParser(s).parse()


_SHAPE = re.compile(r"^\((.*)\)([a-z0-9]*)$")


def _parse_shape(s: str):
    m = _SHAPE.match(s)
    if not m:
        raise IRError(f"bad shape annotation {s!r}")
    dims = []
    for d in m.group(1).split(",") if m.group(1) else []:
        dims.append(None if d == "?" else (int(d) if _DIM.fullmatch(d) else d))
    return dims, (m.group(2) or None)


def parse_graph(text: str) -> Graph:
    """Parse the text form back into a Graph. Attributes become zero-filled placeholders of
    the recorded shape and dtype (the text form does not carry weight data)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("//")]
    if not lines or lines[0].strip() != MAGIC:
        raise IRError("missing magic number 7767517")
    g = Graph()
    operands = g.operands
    shapes: dict[str, tuple] = {}  # annotation text → (dims, dtype): a graph repeats a few shapes

    def shape_of(val: str) -> tuple[list, str | None]:
        hit = shapes.get(val)
        if hit is None:
            dims, dtype = _parse_shape(val)
            hit = shapes[val] = (tuple(dims), dtype)
        return list(hit[0]), hit[1]  # a list of its own for each operand or attribute

    for lineno, line in enumerate(lines[2:], start=3):
        toks = split_tokens(line)
        if len(toks) < 4:
            raise IRError(f"line {lineno}: too few fields")
        typ, name = toks[0], toks[1]
        n_in, n_out = int(toks[2]), int(toks[3])
        ins = toks[4:4 + n_in]
        outs = toks[4 + n_in:4 + n_in + n_out]
        rest = toks[4 + n_in + n_out:]
        inputs = [operands.get(n) or g.new_operand(n, exact=True) for n in ins]
        outputs = [operands.get(n) or g.new_operand(n, exact=True) for n in outs]
        params: dict = {}
        attrs: dict = {}
        names: list[tuple[str, str]] = []
        nodes: tuple = ()
        modules: tuple = ()
        for t in rest:
            key, _, val = t.partition("=")
            mark = key[:1]
            if mark == "@":
                shape, dtype = shape_of(val)
                np_dtype = _PLACEHOLDER_DTYPES.get(dtype or "f32", np.float32)
                attrs[key[1:]] = Attribute(loader=lambda s=tuple(shape), d=np_dtype: np.zeros(s, d),
                                           shape=shape, dtype=dtype or "f32")
            elif mark == "#":
                shape, dtype = shape_of(val)
                opd = operands.get(key[1:])
                if opd is not None:
                    opd.shape, opd.dtype = shape, dtype
            elif mark == "$":
                names.append((key[1:], val))
            elif key == "!from":
                nodes = tuple(val.split(","))
            elif key == "!mod":
                modules = tuple("" if m == "<root>" else m for m in val.split(","))
            else:
                k: Any = int(key) if _DIM.fullmatch(key) else key
                params[k] = parse_value(val)
        input_names = [""] * len(inputs) if names else []
        for arg_name, opd_name in names:  # written in input order; an operand may appear twice
            for k, i in enumerate(inputs):
                if i.name == opd_name and not input_names[k]:
                    input_names[k] = arg_name
                    break
        g.add_op(typ, name, inputs, outputs, params=params, attrs=attrs, input_names=input_names,
                 provenance=Provenance(nodes, modules), exact=True)
    return g
