"""Merge ``F.pad`` → ``F.pad`` (same mode and value, padding different dims) into one ``F.pad``:
``run_decompositions()`` spells a 2-D reflect/replicate pad as one gather per dim, which the
pad converter turns into one ``F.pad`` each."""
from __future__ import annotations

from ._rewrite import replace_chain
from .manager import graph_pass


def _padded_dims(pad: list) -> set[int]:
    return {i for i in range(len(pad) // 2) if pad[2 * i] or pad[2 * i + 1]}


def _mergeable(first, second) -> bool:
    if first.params.get("mode") != second.params.get("mode") or first.params.get("value") != second.params.get("value"):
        return False
    a, b = first.params["pad"], second.params["pad"]
    return all(p >= 0 for p in a + b) and not (_padded_dims(a) & _padded_dims(b))


@graph_pass("merge_adjacent_pads", "merge F.pad → F.pad of other dims (same mode/value) into one F.pad")
def run(graph, cx):
    for op in list(graph.ops):
        if op.type != "F.pad" or op not in graph.ops:
            continue
        x = op.inputs[0]
        first = x.producer
        if first is None or first.type != "F.pad" or len(x.consumers) != 1 or not _mergeable(first, op):
            continue
        a, b = list(first.params["pad"]), list(op.params["pad"])
        n = max(len(a), len(b))
        a, b = a + [0] * (n - len(a)), b + [0] * (n - len(b))
        params = dict(op.params, pad=[p + q for p, q in zip(a, b)])
        replace_chain(graph, op, [first], "F.pad", [first.inputs[0]], params=params)
