"""Spelling IR values as Python source, for the generated ``_pnnx.py`` / ``_ncnn.py`` scripts.

* :class:`Names` — unique, valid identifiers made from graph names (``layer1.0/conv`` →
  ``layer1_0_conv``), never a Python keyword nor an ``nn.Module`` attribute when used on ``self``;
* :func:`literal` — a param value as a Python literal (``inf`` → ``float('inf')``, lists stay
  lists, strings quoted);
* :data:`TORCH_DTYPES` / :data:`NUMPY_DTYPES` — the IR's short dtypes as ``torch.float32`` and as
  numpy type strings (little-endian, so a ``.pnnx.bin`` member reads the same everywhere).
"""
from __future__ import annotations

import keyword
import math
import re
from typing import Any

TORCH_DTYPES = {
    "f32": "torch.float32", "f64": "torch.float64", "f16": "torch.float16", "bf16": "torch.bfloat16",
    "i64": "torch.int64", "i32": "torch.int32", "i16": "torch.int16", "i8": "torch.int8", "u8": "torch.uint8",
    "bool": "torch.bool", "c64": "torch.complex64", "c128": "torch.complex128", "c32": "torch.complex32",
}
#: numpy type strings of attribute payloads; bf16 is read as raw 16-bit words (numpy has no bfloat16)
NUMPY_DTYPES = {
    "f32": "<f4", "f64": "<f8", "f16": "<f2", "bf16": "bf16", "i64": "<i8", "i32": "<i4", "i16": "<i2",
    "i8": "i1", "u8": "u1", "bool": "?", "c64": "<c8", "c128": "<c16",
}
FLOAT_DTYPES = ("f32", "f64", "f16", "bf16")
INT_DTYPES = ("i64", "i32", "i16", "i8", "u8")

#: attribute names of every ``nn.Module`` (torch 2.x), which a generated submodule must not shadow
MODULE_ATTRIBUTES = frozenset(
    "add_module apply bfloat16 buffers call_super_init children compile cpu cuda double dump_patches eval "
    "extra_repr float forward get_buffer get_extra_state get_parameter get_submodule half ipu load_state_dict "
    "modules mtia named_buffers named_children named_modules named_parameters parameters register_backward_hook "
    "register_buffer register_forward_hook register_forward_pre_hook register_full_backward_hook "
    "register_full_backward_pre_hook register_load_state_dict_post_hook register_load_state_dict_pre_hook "
    "register_module register_parameter register_state_dict_post_hook register_state_dict_pre_hook "
    "requires_grad_ set_extra_state set_submodule share_memory state_dict to to_empty train training type xpu "
    "zero_grad T_destination".split())


_NON_WORD = re.compile(r"\W", re.ASCII)


def sanitize(name: str) -> str:
    """``name`` with every character that cannot be in an identifier replaced by ``_``."""
    s = str(name)
    if not (s.isascii() and s.isidentifier()):  # most names already are identifiers
        s = _NON_WORD.sub("_", s) or "_"
    return "_" + s if s[0].isdigit() else s


class Names:
    """Unique identifiers for one namespace. ``reserved`` names (and Python keywords) are never
    handed out; a taken name gets ``_1``, ``_2``... appended."""

    def __init__(self, reserved=(), *, prefix: str = ""):
        self._taken: set[str] = set(reserved)
        self._given: dict[Any, str] = {}
        self._prefix = prefix

    def __call__(self, key: Any, name: str | None = None) -> str:
        """The identifier of ``key`` (made from ``name``, default ``str(key)``, on first call)."""
        got = self._given.get(key)
        if got is not None:
            return got
        base = self._prefix + sanitize(key if name is None else name)
        if keyword.iskeyword(base) or base in self._taken or (not self._prefix and base.startswith("__")):
            base = base + "_"
        ident, n = base, 1
        while ident in self._taken or keyword.iskeyword(ident):
            ident, n = f"{base}_{n}", n + 1
        self._taken.add(ident)
        self._given[key] = ident
        return ident


def literal(v: Any) -> str:
    """A param value as Python source."""
    t = type(v)  # fast paths for the common exact types (same spelling as the checks below)
    if t is int:
        return str(v)
    if t is str:
        return repr(v)
    if t is list or t is tuple:  # sizes, strides, axes: all ints (a loop: cheaper than all() here)
        for x in v:
            if type(x) is not int:
                break
        else:
            return sequence(list(map(str, v)), t is list)
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "-float('inf')"
        return repr(float(v))
    if isinstance(v, complex):
        return repr(v)
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, tuple):
        return sequence([literal(x) for x in v], False)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, range)):
        return sequence([literal(x) for x in v], True)
    if hasattr(v, "tolist"):  # numpy scalars and arrays
        return literal(v.tolist())
    return repr(v)


def sequence(items: list[str], as_list: bool) -> str:
    """A list or tuple display of already spelled items (a one-item tuple keeps its comma)."""
    inner = ", ".join(items)
    return f"[{inner}]" if as_list else f"({inner}{',' if len(items) == 1 else ''})"


def call(fn: str, args: list[str], kwargs: list[tuple[str, str]] = ()) -> str:
    """``fn(a, b, k=v)`` from already spelled arguments."""
    if kwargs:
        args = [*args, *[f"{k}={v}" for k, v in kwargs]]
    return f"{fn}({', '.join(args)})"
