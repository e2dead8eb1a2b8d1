"""Ordering and coordinate sweeps of the layered layout on numpy arrays, for wide layered graphs.

:class:`ArrayOrdering` sorts a layer by the same barycentre keys as ``_LayeredGraph._sweep``
and counts crossings as ``_LayeredGraph.crossings`` does (a layer whose edges do not cross is
recognised on arrays; the others are counted on lists). :class:`ArrayPlacement` places a layer
the way ``_LayeredGraph._place_layer`` does, float for float: the same products, sums and
divisions in the same order, a layer at a time on arrays (the isotonic fit of a layer that
needs one runs on lists). A long edge's dummy nodes make layers of hundreds of nodes with one
neighbour each, where the list code spends its time on the interpreter.
``tests/gui/test_studio_layout.py`` checks that both give the same layout.
"""
from __future__ import annotations

import numpy as np

from .layout import _count_inversions, _isotonic, pull_weight


def side_arrays(lg, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Per node of ``lg``: how many neighbours it has on ``side`` ("up" or "down") and, when
    one, which (else -1). Worked out once per layered graph (ordering and placement share it)."""
    cache = lg.side_arrays
    got = cache.get(side)
    if got is None:
        nbs = getattr(lg, side)
        n = len(nbs)
        cnt = np.fromiter(map(len, nbs), dtype=np.intp, count=n)
        one = np.fromiter((ns[0] if len(ns) == 1 else -1 for ns in nbs), dtype=np.intp, count=n)
        got = cache[side] = (cnt, one)
    return got


class ArrayOrdering:
    """The positions of ``lg``'s nodes in their layers as an array; ``lg.layers`` is kept as
    lists, in step."""

    def __init__(self, lg) -> None:
        self.lg = lg
        self.pos = np.array(lg.pos, dtype=np.intp)
        self._edges = []  #: per layer: the (upper, lower) ends of the edges down to the next
        for nodes in lg.layers[:-1]:
            eu = [u for u in nodes for _v in lg.down[u]]
            ev = [v for u in nodes for v in lg.down[u]]
            self._edges.append((np.array(eu, dtype=np.intp), np.array(ev, dtype=np.intp)))

    def sweep(self, down: bool) -> None:
        lg, pos = self.lg, self.pos
        rng = range(1, len(lg.layers)) if down else range(len(lg.layers) - 2, -1, -1)
        nb = lg.up if down else lg.down
        cnt, one = side_arrays(lg, "up" if down else "down")
        for lv in rng:
            nodes = lg.layers[lv]
            arr = np.array(nodes, dtype=np.intp)
            c = cnt[arr]
            own = pos[arr]
            keys = own.astype(np.float64)
            single = c == 1
            keys[single] = pos[one[arr[single]]]
            for k in np.flatnonzero(c > 1).tolist():
                ns = nb[nodes[k]]
                keys[k] = sum(int(pos[u]) for u in ns) / len(ns)
            order = arr[np.lexsort((own, keys))]  # by key, then by position: sort's tuple order
            lg.layers[lv] = order.tolist()
            pos[order] = np.arange(len(order))

    def crossings(self) -> int:
        total = 0
        pos, layers = self.pos, self.lg.layers
        for lv, (eu, ev) in enumerate(self._edges):
            if len(eu) < 2:
                continue
            pu, pv = pos[eu], pos[ev]
            seq = pv[np.lexsort((pv, pu))]
            if (seq[:-1] <= seq[1:]).all():
                continue
            total += _count_inversions(seq.tolist(), len(layers[lv + 1]))
        return total


class ArrayPlacement:
    """The x coordinates of ``lg`` (a ``_LayeredGraph``) as an array, and what placing a layer
    reads as index arrays."""

    def __init__(self, lg) -> None:
        self.lg = lg
        self.x = np.array(lg.x, dtype=np.float64)
        self.leaf = np.array(lg.is_leaf, dtype=bool)
        self.dummy = np.array(lg.is_dummy, dtype=bool)
        #: pull_weight of every (leaf, dummy_u, dummy_v), indexed by those three
        self.pulls = np.array([[[pull_weight(bool(a), bool(b), bool(c)) for c in (0, 1)] for b in (0, 1)]
                               for a in (0, 1)])

    @staticmethod
    def offsets(offsets: list[list[float]]) -> list[np.ndarray]:
        return [np.array(offs, dtype=np.float64) for offs in offsets]

    def plan(self, nodes: list[int], *sides: str):
        """``_LayeredGraph._plan`` as index arrays: the layer's nodes, the positions and
        neighbours of its single-neighbour nodes with their pulls, the positions of nodes
        without neighbours, the nodes with one neighbour above and one below, the rest one by
        one, and every node's total pull."""
        arr = np.array(nodes, dtype=np.intp)
        counts, ones = zip(*(side_arrays(self.lg, side) for side in sides))
        cnt = sum(c[arr] for c in counts)
        single = np.flatnonzero(cnt == 1)
        src = np.full(len(single), -1, dtype=np.intp)
        for c, one in zip(counts, ones):  # the one side that has the neighbour
            has = c[arr[single]] == 1
            src[has] = one[arr[single][has]]
        w = self._pulls(src, arr[single])
        alone = np.flatnonzero(cnt == 0)
        weights = np.full(len(arr), 0.05, dtype=np.float64)
        weights[single] = w
        # one neighbour above and one below (a long edge's dummy in the final pass): two terms
        if len(sides) == 2:
            two = np.flatnonzero((counts[0][arr] == 1) & (counts[1][arr] == 1))
            a, b, dst = ones[0][arr[two]], ones[1][arr[two]], arr[two]
            wa, wb = self._pulls(a, dst), self._pulls(b, dst)
            weights[two] = wa + wb  # 0.0 + wa + wb, as the sum in _plan
            both = (two, a, wa, b, wb)
        else:
            two = np.empty(0, dtype=np.intp)
            both = None
        multi = []
        rest = np.flatnonzero(cnt > 1)
        for k in (np.setdiff1d(rest, two, assume_unique=True) if len(two) else rest).tolist():
            v = nodes[k]
            pairs = tuple((u, self.lg._pull(u, v)) for side in sides for u in getattr(self.lg, side)[v])
            wsum = 0.0
            for _u, wu in pairs:
                wsum += wu
            weights[k] = wsum
            multi.append((k, pairs, wsum))
        return arr, single, src, w, alone, arr[alone], both, multi, weights

    def _pulls(self, src, dst):
        """``_LayeredGraph._pull`` of every (src, dst) pair of two index arrays."""
        return self.pulls[(self.leaf[src] | self.leaf[dst]).astype(np.intp), self.dummy[src].astype(np.intp),
                          self.dummy[dst].astype(np.intp)]

    def place_layer(self, nodes: list[int], offsets, plan) -> bool:
        """``_LayeredGraph._place_layer`` on arrays, float for float the same."""
        x = self.x
        arr, single, src, w, alone, alone_nodes, both, multi, weights = plan
        z = np.empty(len(arr), dtype=np.float64)
        z[single] = w * x[src] / w - offsets[single]
        z[alone] = x[alone_nodes] - offsets[alone]
        if both is not None:
            two, a, wa, b, wb = both
            z[two] = (wa * x[a] + wb * x[b]) / weights[two] - offsets[two]
        for k, pairs, wsum in multi:
            acc = 0.0
            for u, wu in pairs:
                acc += wu * float(x[u])
            z[k] = acc / wsum - float(offsets[k])
        if len(z) > 1 and (z[:-1] > z[1:]).any():
            z = np.array(_isotonic(z.tolist(), weights.tolist()), dtype=np.float64)
        new = z + offsets
        if np.array_equal(new, x[arr]):
            return False
        x[arr] = new
        return True
