"""Provenance links between the ATen graph and a lowered (pnnx / ncnn / pass snapshot) graph.

Every lowered operator records the ATen node names it came from (``Operator.provenance``). A
:class:`ProvenanceIndex` inverts that, so selection can go both ways: an ATen node → the
operators it became (one-to-many: a node split into several layers), an operator → the nodes it
came from (many-to-one: a fused conv + batch-norm + activation). An ATen node that became
nothing by itself (a weight, a folded batch-norm parameter) maps to what its consumers became.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from engine.ir import Graph, Operator


class ProvenanceIndex:
    def __init__(self, aten: Graph, lowered: Graph, extra: Sequence[Operator] = ()):
        self.to_lowered: dict[str, list[str]] = {}
        self.to_aten: dict[str, tuple[str, ...]] = {}
        for op in list(lowered.ops) + list(extra):
            nodes = op.provenance.nodes
            self.to_aten[op.name] = nodes
            for n in nodes:
                self.to_lowered.setdefault(n, []).append(op.name)
        self._consumers: dict[str, list[str]] = {}
        for op in aten.ops:
            self._consumers[op.name] = [c.name for o in op.outputs for c in o.consumers]

    def lowered_of(self, aten_names: Iterable[str]) -> list[str]:
        """Lowered operators made from these ATen nodes (ordered, unique)."""
        out: dict[str, None] = {}
        for n in aten_names:
            hit = self.to_lowered.get(n)
            if not hit:  # a weight or a node folded into its consumers
                hit = [x for c in self._consumers.get(n, ()) for x in self.to_lowered.get(c, ())]
            out.update(dict.fromkeys(hit))
        return list(out)

    def aten_of(self, lowered_names: Iterable[str]) -> list[str]:
        """ATen nodes these lowered operators came from (ordered, unique)."""
        out: dict[str, None] = {}
        for n in lowered_names:
            out.update(dict.fromkeys(self.to_aten.get(n, ())))
        return list(out)
