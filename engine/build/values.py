"""How serialized argument values are spelled in IR params and operand dtypes.

* dtypes: serde :class:`~engine.reader.schema.ScalarType` → pnnx short names (``f32``, ``i64``,
  ``bf16``, ``bool`` ...; float8 and wide unsigned types as ``f8e4m3fn``, ``u16`` ...);
* scalar-type params → torch names (``"float32"``), memory formats → ``"contiguous_format"``,
  ``"channels_last"``, ``"channels_last_3d"``, ``"preserve_format"``; layouts → ``"strided"``,
  ``"sparse_coo"`` ...; devices → ``"cpu"`` / ``"cuda:0"``; complex numbers → ``"(1+2j)"``
  (``complex(text)`` reads it back); an operator argument → its name; a subgraph → its name.

These are also the spellings of enum defaults in the schema table, so an explicit argument
and a filled-in default of the same value look the same.
"""
from __future__ import annotations

from typing import Any

from ..reader.schema import (Argument, CustomObjRef, Device, GraphArgument, Layout, MemoryFormat, OperatorRef,
                             ScalarType)

SHORT_DTYPES = {
    ScalarType.BYTE: "u8", ScalarType.CHAR: "i8", ScalarType.SHORT: "i16", ScalarType.INT: "i32",
    ScalarType.LONG: "i64", ScalarType.HALF: "f16", ScalarType.FLOAT: "f32", ScalarType.DOUBLE: "f64",
    ScalarType.COMPLEXHALF: "c32", ScalarType.COMPLEXFLOAT: "c64", ScalarType.COMPLEXDOUBLE: "c128",
    ScalarType.BOOL: "bool", ScalarType.BFLOAT16: "bf16", ScalarType.UINT16: "u16", ScalarType.UINT32: "u32",
    ScalarType.UINT64: "u64", ScalarType.FLOAT8E4M3FN: "f8e4m3fn", ScalarType.FLOAT8E5M2: "f8e5m2",
    ScalarType.FLOAT8E4M3FNUZ: "f8e4m3fnuz", ScalarType.FLOAT8E5M2FNUZ: "f8e5m2fnuz",
    ScalarType.FLOAT8E8M0FNU: "f8e8m0fnu",
}

MEMORY_FORMATS = {MemoryFormat.CONTIGUOUS: "contiguous_format", MemoryFormat.CHANNELS_LAST: "channels_last",
                  MemoryFormat.CHANNELS_LAST_3D: "channels_last_3d", MemoryFormat.PRESERVE: "preserve_format",
                  MemoryFormat.UNKNOWN: "unknown"}


def short_dtype(scalar_type: ScalarType | None) -> str | None:
    """pnnx short dtype name of a serialized dtype (None when unknown)."""
    return None if scalar_type is None else SHORT_DTYPES.get(scalar_type)


def scalar(value: Any) -> Any:
    """A non-reference argument value as an IR param value."""
    if isinstance(value, ScalarType):
        return value.torch_name
    if isinstance(value, MemoryFormat):
        return MEMORY_FORMATS[value]
    if isinstance(value, Layout):
        return value.name.lower()
    if isinstance(value, Device):
        return str(value)
    if isinstance(value, complex):
        return repr(value)
    if isinstance(value, (OperatorRef, GraphArgument, CustomObjRef)):
        return value.name
    if isinstance(value, Argument):
        return scalar(value.value)
    return value
