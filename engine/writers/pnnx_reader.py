"""Read a pnnx model (``.pnnx.param`` + ``.pnnx.bin``) into an IR graph, following pnnx's own
``Graph::load`` and ``Parameter::parse_from_string`` (``tools/pnnx/src/ir.cpp``): values are
``None`` (also ``()``/``[]``), ``True``/``False``, strings (anything not starting with a digit or
``-digit``, or containing ``%``), floats (with ``.`` or ``e``), ints, and ``(a,b,...)`` lists of
those. Attributes are lazy, read from the zip member ``<operator>.<attr>``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelFileError
from ..ir import Attribute, Graph

if TYPE_CHECKING:  # pragma: no cover
    import zipfile

_NUMPY = {"f32": "<f4", "f64": "<f8", "f16": "<f2", "bf16": "<u2", "i64": "<i8", "i32": "<i4", "i16": "<i2",
          "i8": "i1", "u8": "u1", "bool": "?", "c64": "<c8", "c128": "<c16", "c32": "<u4"}


def _is_string(s: str) -> bool:
    return not s or not (s[0].isdigit() or (s[0] == "-" and len(s) > 1 and s[1].isdigit()))


def _scalar(s: str) -> Any:
    if _is_string(s):
        return s
    if "." in s or "e" in s:
        return float(np.float32(float(s)))
    return int(s)


def parse_value(value: str) -> Any:
    """pnnx's ``Parameter::parse_from_string``."""
    if "%" in value:
        return value
    if value in ("None", "()", "[]"):
        return None
    if value in ("True", "False"):
        return value == "True"
    if value[:1] in ("(", "["):
        return [_scalar(e) for e in value[1:-1].split(",")]
    return _scalar(value)


def _parse_shape(text: str) -> tuple[list, str]:
    close = text.rfind(")")
    body, dtype = text[1:close], text[close + 1:]
    dims: list = []
    for e in body.split(",") if body else []:
        dims.append(None if e == "?" else e[1:] if e.startswith("%") else int(e))
    return dims, dtype


def read_pnnx(param_path: str | os.PathLike, bin_path: str | os.PathLike | None = None) -> Graph:
    param_path = Path(param_path)
    try:
        lines = param_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ModelFileError(str(param_path), getattr(e, "strerror", None) or str(e)) from None
    if not lines or lines[0].strip() != "7767517":
        raise ModelFileError(str(param_path), "missing the magic number 7767517")
    zf = None
    if bin_path is not None:
        import zipfile  # here: converting imports this module but never reads a pnnx model

        try:
            zf = zipfile.ZipFile(bin_path)
        except (OSError, zipfile.BadZipFile) as e:
            raise ModelFileError(str(bin_path), str(e)) from None
    g = Graph()
    for lineno, line in enumerate(lines[2:], start=3):
        toks = line.split()
        if not toks:
            continue
        try:
            typ, name, n_in, n_out = toks[0], toks[1], int(toks[2]), int(toks[3])
        except (IndexError, ValueError):
            raise ModelFileError(f"{param_path}:{lineno}", "expected '<type> <name> <inputs> <outputs> ...'") from None
        ins = [g.operands[n] if n in g.operands else g.new_operand(n, exact=True) for n in toks[4:4 + n_in]]
        outs = [g.operands[n] if n in g.operands else g.new_operand(n, exact=True)
                for n in toks[4 + n_in:4 + n_in + n_out]]
        params: dict[str, Any] = {}
        attrs: dict[str, Attribute] = {}
        keys: dict[str, str] = {}
        shapes = []
        for tok in toks[4 + n_in + n_out:]:
            key, _, value = tok.partition("=")
            if key.startswith("@"):
                dims, dtype = _parse_shape(value)
                attrs[key[1:]] = _attribute(zf, f"{name}.{key[1:]}", dims, dtype)
            elif key.startswith("$"):
                keys[value] = key[1:]
            elif key.startswith("#"):
                shapes.append((key[1:], *_parse_shape(value)))
            else:
                params[key] = parse_value(value)
        op = g.add_op(typ, name, ins, outs, params=params, attrs=attrs, exact=True,
                      input_names=[keys.get(i.name, "") for i in ins] if keys else None)
        for opd_name, dims, dtype in shapes:
            opd = g.operands.get(opd_name)
            if opd is not None and (opd in op.inputs or opd in op.outputs):
                opd.shape, opd.dtype = dims, (dtype if dtype != "null" else None)
    return g


def _attribute(zf: zipfile.ZipFile | None, member: str, dims: list, dtype: str) -> Attribute:
    shape = tuple(int(d) for d in dims)
    np_dtype = np.dtype(_NUMPY.get(dtype, "<f4"))

    def load() -> np.ndarray:
        if zf is None:
            return np.zeros(shape, np.float32 if dtype == "bf16" else np_dtype)
        data = np.frombuffer(zf.read(member), np_dtype).reshape(shape)
        if dtype == "bf16":  # an attribute holds bfloat16 as its float32 values (engine.build.builder)
            from ..reader.schema import ScalarType
            from ..reader.tensors import to_float32

            return to_float32(data, ScalarType.BFLOAT16)
        return data.copy()

    return Attribute(loader=load, shape=shape, dtype=dtype)
