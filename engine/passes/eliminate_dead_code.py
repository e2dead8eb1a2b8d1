"""Remove operators whose results nobody uses (weights left behind by lowering, dead
shape computations). Graph outputs and unconverted operators are kept."""
from __future__ import annotations

from .manager import graph_pass


@graph_pass("eliminate_dead_code", "remove operators whose outputs are unused")
def run(graph, cx):
    graph.remove_dead(keep=lambda op: bool(op.meta.get("unsupported")) or op.type in ("pnnx.Input", "Input"))
