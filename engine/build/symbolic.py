"""Symbolic sizes as IR tokens: the reader's readable form with no spaces and no commas.

:func:`engine.reader.symexpr.pretty` turns sympy ``srepr`` text into ``4*s53 - 8`` or
``max(1, s53 - 2)``. The IR's one-line text form splits operators on spaces and shapes on
commas, so a dim is that text with spaces dropped and function-argument commas written ``;``:
``4*s53-8``, ``max(1;s53-2)``. A lone symbol stays its name (``s53``); a constant becomes an int.
"""
from __future__ import annotations

import functools
import re
from typing import Any

from ..reader.symexpr import pretty


@functools.lru_cache(maxsize=4096)
def expr_text(expr: str) -> str | int:
    """Compact token text of a sympy ``srepr`` expression (an int when it is a constant)."""
    text = pretty(expr).replace(" ", "").replace(",", ";")
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def dim(value: Any) -> int | str | None:
    """A size as the IR stores it: an int, or the token text of a ``SymExpr``."""
    if value is None or isinstance(value, (bool, int)):
        return value
    expr = getattr(value, "expr", None)
    return expr_text(expr) if isinstance(expr, str) else str(value)
