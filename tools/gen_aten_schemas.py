"""Generate ``engine/data/aten_schemas.jsonl.gz``: the operator schema table the builder uses.

Run once from the repository root with the pinned torch (2.13) and commit the output::

    .venv/bin/python tools/gen_aten_schemas.py

It walks torch's operator registry (``torch._C._jit_get_all_schemas()``, after importing the
modules that register Python-defined namespaces such as ``quantized_decomposed``) and writes
gzip'd lines: first ``{"torch_version": "2.13.0"}``, then one line per overload key
``namespace.name.overload`` (``default`` for the empty overload name), sorted: the key, a tab,
and the schema as compact JSON (so a reader decodes only the schemas it looks up)::

    aten.conv2d.default<TAB>{"args": [{"name": "stride", "type": "SymInt[2]", "default": [1, 1],
               "kwarg_only": true, "alias": "a!", "write": true, "out": true}, ...],
     "returns": [{"name": "", "type": "Tensor", "alias": "a!"}, ...],
     "mutable": true}

Keys whose value would be false/absent are omitted (``default`` is present exactly when the
argument has a default, even when that default is ``null``). Types are the schema's own
spelling without alias annotations (``Tensor?``, ``Tensor[]``, ``SymInt[2]``, ``ScalarType?``);
the annotation goes to ``alias``. Defaults are JSON: enum-typed defaults become the readable
names the builder also uses (``ScalarType`` → ``"int64"``, ``MemoryFormat`` →
``"contiguous_format"``, ``Layout`` → ``"strided"``); ``int reduction=Mean`` stays the int 1 the
schema declares. Schemas with variadic ``...`` arguments (TorchScript ``prim`` internals) are
skipped: they never appear in an ExportedProgram.
"""
from __future__ import annotations

import argparse
import gzip
import json
import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "engine" / "data" / "aten_schemas.jsonl.gz"

#: c10 enum numbering as printed in ``str(FunctionSchema)`` (not the serde numbering).
C10_SCALAR_TYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
                    "complex32", "complex64", "complex128", "bool", "qint8", "quint8", "qint32",
                    "bfloat16", "quint4x2", "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8",
                    "bits16", "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
                    "uint16", "uint32", "uint64"]
C10_MEMORY_FORMATS = ["contiguous_format", "preserve_format", "channels_last", "channels_last_3d"]
C10_LAYOUTS = ["strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged"]

_ALIAS = re.compile(r"\(([^()]*)\)")


def split_top_level(text: str) -> list[str]:
    """Split a schema argument list on commas outside brackets and quotes."""
    parts, depth, cur, quote, escaped = [], 0, [], None, False
    for ch in text:
        if quote:
            cur.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def schema_parts(text: str) -> tuple[list[str], list[str]]:
    """Argument and return declarations of a printed schema ``ns::name.ov(args) -> rets``."""
    start = text.index("(")
    depth = 0
    for i in range(start, len(text)):
        depth += text[i] == "("
        depth -= text[i] == ")"
        if depth == 0:
            break
    args = split_top_level(text[start + 1:i])
    rets = text[i + 1:].strip()
    assert rets.startswith("->"), text
    rets = rets[2:].strip()
    if rets.startswith("(") and rets.endswith(")"):
        rets = rets[1:-1]
    return [a for a in args if a != "*"], split_top_level(rets)


def type_and_alias(decl: str) -> tuple[str, str | None]:
    """``Tensor(a!)[] out`` → (``Tensor[]``, ``a!``): the declared type without annotation."""
    m = _ALIAS.search(decl)
    alias = m.group(1) if m else None
    return _ALIAS.sub("", decl, count=1) if m else decl, alias


def json_default(value, type_text: str):
    """A schema default as JSON, enums spelled out, floats kept as floats."""
    base = type_text.rstrip("?")
    if value is None:
        return None
    if base == "ScalarType":
        return C10_SCALAR_TYPES[value]
    if base == "MemoryFormat":
        return C10_MEMORY_FORMATS[value]
    if base == "Layout":
        return C10_LAYOUTS[value]
    if base == "float" and isinstance(value, int):
        return float(value)
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [json_default(v, base.split("[")[0]) for v in value]
    if isinstance(value, complex):
        return [value.real, value.imag]
    return str(value)


def describe(schema) -> dict:
    text = str(schema)
    arg_decls, ret_decls = schema_parts(text)
    if len(arg_decls) != len(schema.arguments) or len(ret_decls) != len(schema.returns):
        raise ValueError(f"cannot split {text}")
    args = []
    for a, decl in zip(schema.arguments, arg_decls):
        head = split_on_default(decl)
        type_text, alias = type_and_alias(head.rsplit(" ", 1)[0].strip())
        entry: dict = {"name": a.name, "type": type_text}
        if a.has_default_value():
            entry["default"] = json_default(a.default_value, type_text)
        if a.kwarg_only:
            entry["kwarg_only"] = True
        if alias:
            entry["alias"] = alias
        if a.is_write:
            entry["write"] = True
        if a.is_out:
            entry["out"] = True
        args.append(entry)
    returns = []
    for r, decl in zip(schema.returns, ret_decls):
        type_text, alias = type_and_alias(decl[: -len(r.name)].strip() if r.name else decl)
        entry = {"name": r.name, "type": type_text}
        if alias:
            entry["alias"] = alias
        returns.append(entry)
    out = {"args": args, "returns": returns}
    if schema.is_mutable:
        out["mutable"] = True
    return out


def split_on_default(decl: str) -> str:
    """The ``TYPE NAME`` part of ``TYPE NAME=DEFAULT`` (the first ``=`` outside brackets)."""
    depth = 0
    for i, ch in enumerate(decl):
        depth += ch in "(["
        depth -= ch in ")]"
        if ch == "=" and depth == 0:
            return decl[:i]
    return decl


def collect() -> dict:
    import torch
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
    import torch._prims  # noqa: F401

    table: dict[str, dict] = {}
    skipped = 0
    for schema in torch._C._jit_get_all_schemas():
        if "..." in str(schema):
            skipped += 1
            continue
        key = f"{schema.name.replace('::', '.')}.{schema.overload_name or 'default'}"
        table[key] = describe(schema)
    log.info("%d schemas, %d variadic skipped", len(table), skipped)
    return {"torch_version": torch.__version__.split("+")[0], "schemas": dict(sorted(table.items()))}


def encode(table: dict) -> bytes:
    """The uncompressed file: the header line, then ``key<TAB>schema`` lines."""
    lines = [json.dumps({"torch_version": table["torch_version"]}, separators=(",", ":"))]
    lines += [f"{key}\t{json.dumps(raw, separators=(',', ':'))}" for key, raw in table["schemas"].items()]
    return ("\n".join(lines) + "\n").encode()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", type=Path, default=OUT)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    data = encode(collect())
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same registry always gives byte-identical output.
    with open(args.output, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
        gz.write(data)
    log.info("wrote %s (%d bytes, %d uncompressed)", args.output, args.output.stat().st_size, len(data))


if __name__ == "__main__":
    main()
