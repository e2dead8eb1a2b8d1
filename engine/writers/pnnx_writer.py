"""Write an IR graph as ``.pnnx.param`` + ``.pnnx.bin`` exactly as pnnx's ``Graph::save``
(``tools/pnnx/src/ir.cpp``) does, so pnnx and Netron read it.

``.pnnx.param``::

    7767517
    <operator count> <operand count>
    <type> <name> <n_in> <n_out> <inputs...> <outputs...> key=value ... @attr=(shape)type
        $input_key=operand ... #operand=(shape)type ...

Type and name are padded to 24 columns; params and attributes in key order (pnnx keeps them in
``std::map``\\ s); values as pnnx encodes them (``None``, ``True``/``False``, ints, floats via
:func:`.values.float_to_string`, bare strings, ``(a,b,...)`` lists); ``#`` shapes for the
inputs then the outputs that have one, unknown or symbolic dims as ``?``. ``.pnnx.bin`` is a
stored zip (:mod:`.storezip`) with one member ``<operator>.<attr>`` of raw data per attribute.

Our provenance (``!from``/``!mod`` in the text snapshots) is not written: pnnx would keep it
as a param and pass it on to the Python it generates. Whitespace inside a string value (which
would end the token) is removed, with a warning; ``=`` in a value (which makes Netron reject
the file) is refused.
"""
from __future__ import annotations

import functools
import logging
import math
import os
import sys
from typing import Any, Callable

import numpy as np

from ..errors import WriteError
from ..ir import Attribute, Graph, Operand, Operator
from ..reader import verified
from .atomic import atomic_files
from .ncnn_check import WHITESPACE
from .storezip import StoreZipWriter
from .values import float_to_string

log = logging.getLogger(__name__)

MAGIC = 7767517
_ELEMSIZE = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "bool": 1,
             "c64": 8, "c128": 16, "c32": 4}


class _ValueError(ValueError):
    pass


def encode_value(v: Any) -> str:
    """pnnx's ``Parameter::encode_to_string``."""
    t = type(v)  # the common cases first (bool is not int here: type() is exact)
    if t is int:
        return str(v)
    if t is list or t is tuple:  # sizes, strides, paddings: all ints (a loop: cheaper than all() here)
        for x in v:
            if type(x) is not int:
                break
        else:
            return "(" + ",".join(map(str, v)) + ")"
    elif t is float:
        return float_to_string(v)
    elif t is str and _plain_string(v):
        return v
    if v is None:
        return "None"
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return float_to_string(float(v))
    if isinstance(v, (complex, np.complexfloating)):
        return "%e+%ej" % (v.real, v.imag)
    if isinstance(v, str):
        if "=" in v or "\n" in v:
            raise _ValueError(f"string {v!r} contains '=' or a newline, which pnnx.param cannot hold")
        if WHITESPACE.search(v):
            log.warning("pnnx.param: removing whitespace from string value %r", v)
            v = WHITESPACE.sub("", v)
        return v
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(encode_value(x) for x in v) + ")"
    raise _ValueError(f"cannot encode a {type(v).__name__} value {v!r}")


@functools.lru_cache(maxsize=4096)  # a graph repeats a few string params ("zeros", "same") thousands of times
def _plain_string(v: str) -> bool:
    """A string param written as it is (one to refuse or to strip takes encode_value's long way)."""
    return not ("=" in v or "\n" in v or WHITESPACE.search(v))


def _shape(dims) -> str:
    try:
        key = tuple(dims)
        text = _SHAPES.get(key)
    except TypeError:  # something unhashable in it: spelled (and refused) below
        key, text = None, None
    if text is None:
        text = "(" + ",".join("?" if d is None or isinstance(d, str) or (isinstance(d, int) and d < 0)
                              else str(int(d)) for d in dims) + ")"
        if key is not None and len(_SHAPES) < _SHAPES_MAX:
            _SHAPES[key] = text
    return text


#: shape spelling by dims: a graph repeats a few shapes on thousands of operands (dims equal as
#: dict keys — 1, 1.0, True — spell the same)
_SHAPES: dict[tuple, str] = {}
_SHAPES_MAX = 1 << 16


@functools.lru_cache(maxsize=4096, typed=True)  # a graph repeats a few dozen on thousands of operators
def _key_text(key) -> str:
    """A param name as written; refused when pnnx.param cannot hold it."""
    skey = str(key)
    if not skey or skey[0] in "@$#" or "=" in skey or WHITESPACE.search(skey):
        raise _ValueError(f"param name {skey!r} cannot be written to pnnx.param")
    return skey


def _operand_text(opd) -> str:
    """``#name=(shape)type``, or "" for an operand without a shape."""
    return f"#{opd.name}={_shape(opd.shape)}{opd.dtype or 'null'}" if opd.shape else ""


def operator_line(op: Operator, operands: dict[Operand, str] | None = None) -> str:
    """The operator's line; ``operands`` keeps each operand's ``#`` text for the operators
    after it in one file (an operand is annotated on its producer and consumers)."""
    if operands is None:
        operands = {}
    ins, outs = op.inputs, op.outputs
    parts = [f"{op.type:<24} {op.name:<24} {len(ins)} {len(outs)}"]
    parts += [i.name for i in ins]
    parts += [o.name for o in outs]
    params = op.params
    for key in sorted(params, key=str):
        parts.append(f"{_key_text(key)}={encode_value(params[key])}")
    for key in sorted(op.attrs):
        a = op.attrs[key]
        parts.append(f"@{key}={_shape(a.shape)}{a.dtype or 'null'}")
    if op.input_names and len(op.input_names) == len(ins):
        for name, opd in zip(op.input_names, ins):
            if name:
                parts.append(f"${name}={opd.name}")
    for opd in (*ins, *outs):
        text = operands.get(opd)
        if text is None:
            text = operands[opd] = _operand_text(opd)
        if text:
            parts.append(text)
    return " ".join(parts)


def _check_names(graph: Graph) -> list[str]:
    ops = graph.ops
    names = [op.name for op in ops] + [o.name for op in ops for o in op.outputs]
    types = [op.type for op in ops]
    joined = "\0".join(names)
    if all(names) and all(types) and "=" not in joined and not WHITESPACE.search(joined + "\0".join(types)):
        return []  # the usual case, seen at once (the same tests as below, on all names together)
    problems = []
    for op in ops:
        for kind, name in [("operator", op.name)] + [("operand", o.name) for o in op.outputs]:
            if not name or "=" in name or WHITESPACE.search(name):
                problems.append(f"{kind} name {name!r} is empty or contains whitespace or '='")
        if not op.type or WHITESPACE.search(op.type):
            problems.append(f"operator {op.name!r} has type {op.type!r}")
    return problems


def param_text(graph: Graph) -> str:
    """The ``.pnnx.param`` text of ``graph``."""
    ops = graph.ops
    lines = [str(MAGIC), ""]
    texts: dict[Operand, str] = {}  # every operand an operator reads or writes, once the lines are made
    for op in ops:
        try:
            lines.append(operator_line(op, texts))
        except _ValueError as e:
            raise _ValueError(f"operator {op.name!r}: {e}") from None
    lines[1] = f"{len(ops)} {len({o.name for o in texts})}"
    return "\n".join(lines) + "\n"


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of ``values``, rounded to nearest even as PyTorch
    casts (exact for values that are bfloat16 already, as a ``bf16`` attribute's are)."""
    from ..reader.tensors import bf16_values

    return (bf16_values(values).view(np.uint32) >> np.uint32(16)).astype(np.uint16)


#: byte orders that are little-endian here (``=``: native; ``|``: single bytes)
_LITTLE_ENDIAN = ("<", "|", "=") if sys.byteorder == "little" else ("<", "|")
#: members up to this size are hashed, not looked up among the checked archive spans
#: (:func:`engine.reader.verified.crc_of`): their CRC costs less than finding the address
_CRC_LOOKUP_MIN = 2048


def _stored(a: Attribute, key: str, data) -> np.ndarray:
    """``data`` (all or a piece of ``a``'s) as it is stored: contiguous and little-endian (a
    copy only when it is strided or big-endian), a ``bf16`` attribute's values as their bits."""
    data = np.ascontiguousarray(data)
    if a.dtype == "bf16" and data.dtype != np.uint16:  # its values (see engine.build.builder): their bits
        data = bf16_bits(data)
    if data.dtype.hasobject:
        raise TypeError(f"attribute {key!r} holds Python objects, not numbers")
    if data.dtype.byteorder not in _LITTLE_ENDIAN:
        data = data.astype(data.dtype.newbyteorder("<"))
    return data


def _write_attr(zw: StoreZipWriter, op: Operator, key: str) -> None:
    """Store ``op``'s attribute ``key`` as member ``<op>.<key>``. A weight computed piece by
    piece (``piecewise``: a folded layer scale's kernel) is computed, hashed and written a
    piece at a time and never exists whole; the bytes of a weight read from the package take
    the CRC checked there."""
    a = op.attrs[key]
    name = f"{op.name}.{key}"
    if a.piecewise and a.dtype == "f32":
        try:
            zw.write_member_pieces(name, (_stored(a, key, p) for p in a.pieces()), 4 * math.prod(a.shape))
        except ValueError as e:
            raise _ValueError(f"attribute {key!r}: {e}") from None
        return
    data = _stored(a, key, a.peek())
    size = _ELEMSIZE.get(a.dtype, data.dtype.itemsize) * math.prod(a.shape)
    raw = np.frombuffer(data, np.uint8)
    if raw.size != size:
        raise _ValueError(f"attribute {key!r} holds {raw.size} bytes, {a.shape} {a.dtype} needs {size}")
    zw.write_member(name, raw, crc=verified.crc_of(raw) if raw.size > _CRC_LOOKUP_MIN else None)


def write_pnnx(graph: Graph, param_path: str | os.PathLike, bin_path: str | os.PathLike, *,
               progress: Callable[[int, int], None] | None = None) -> None:
    """Write ``graph`` (any vocabulary) as a pnnx model. Raises
    :class:`engine.errors.WriteError` and leaves no partial files on failure."""
    problems = _check_names(graph)
    if problems:
        raise WriteError(os.fspath(param_path), "cannot write the pnnx model:\n  " + "\n  ".join(problems[:20]))
    try:
        text = param_text(graph).encode("utf-8")
    except _ValueError as e:
        raise WriteError(os.fspath(param_path), f"cannot write the pnnx model: {e}") from None
    with atomic_files([param_path, bin_path]) as (pf, bf):
        pf.write(text)
        zw = StoreZipWriter(bf)
        for k, op in enumerate(graph.ops):
            for key in sorted(op.attrs):
                try:
                    _write_attr(zw, op, key)
                except _ValueError as e:
                    raise WriteError(os.fspath(bin_path), f"operator {op.name!r}: {e}") from None
            if progress is not None:
                progress(k + 1, len(graph.ops))
        zw.close()
    log.info("wrote %s and %s (%d operators)", param_path, bin_path, len(graph.ops))
