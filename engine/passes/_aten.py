"""Emit ATen operators from a pass (a rewrite into other ATen ops, lowered later by the
registered converters like the program's own).

:class:`AtenEmitter` inserts operators before an anchor operator, with the anchor's provenance
and source metadata, ``meta["target"]`` set (so they are ATen-level operators) and
``meta["rewritten_from"]`` naming the anchor's op type.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ir import Attribute, Dim, Graph, Operand, Operator

_KEPT_META = ("source", "module_stack")


class AtenEmitter:
    """Inserts ATen operators before ``anchor`` (after it, in order, with ``after=True``)."""

    def __init__(self, graph: Graph, anchor: Operator, *, after: bool = False):
        self.graph, self.anchor = graph, anchor
        self.base = anchor.name
        self._last = anchor if after else None

    def _where(self) -> dict:
        return {"before": self.anchor} if self._last is None else {"after": self._last}

    def _placed(self, op: Operator) -> None:
        if self._last is not None:
            self._last = op

    def op(self, type: str, inputs: dict[str, Operand] | Sequence[tuple[str, Operand]] = (), *,
           shape: Sequence[Dim], dtype: str, name: str | None = None, param_dict: dict | None = None,
           **params: Any) -> Operand:
        """One operator of ``type`` (an overload name) reading ``inputs`` (argument name → operand),
        with ``params`` (and ``param_dict``, for names that clash with these arguments, such as
        reshape's ``shape``); returns its output operand of ``shape``/``dtype``."""
        items = list(inputs.items()) if isinstance(inputs, dict) else list(inputs)
        params = {**(param_dict or {}), **params}
        g = self.graph
        out = g.new_operand(name or self.base, dtype=dtype, shape=list(shape))
        op = g.add_op(type, out.name, [o for _, o in items], [out], params=params,
                      input_names=[n for n, _ in items], provenance=self.anchor.provenance, **self._where())
        self._placed(op)
        op.meta["target"] = type
        op.meta["rewritten_from"] = self.anchor.type
        for k in _KEPT_META:
            if k in self.anchor.meta:
                op.meta[k] = self.anchor.meta[k]
        return out

    def constant(self, value: np.ndarray, name: str | None = None) -> Operand:
        """A ``pnnx.Attribute`` holding ``value``."""
        arr = np.ascontiguousarray(value)
        attr = Attribute(arr)
        g = self.graph
        out = g.new_operand(name or f"{self.base}_const", dtype=attr.dtype, shape=list(arr.shape))
        self._placed(g.add_op("pnnx.Attribute", out.name, [], [out], attrs={"data": attr},
                              provenance=self.anchor.provenance, **self._where()))
        return out

    def replace(self, new: Operand, index: int = 0) -> None:
        """Make the readers of the anchor's output ``index`` read ``new``."""
        self.graph.replace_all_uses(self.anchor.outputs[index], new)
