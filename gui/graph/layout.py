"""Layered (Sugiyama-style) layout of a directed graph, in Python (numpy for wide ones) — no Qt.

Input is a :class:`LayoutInput`: node sizes and edges between node indices, nodes given in a
topological order (the IR keeps operators in one). The result is a :class:`LayoutResult`: node
centres, one polyline route per edge, and the layer / in-layer order of every node (keyboard
navigation uses them). Nothing here touches Qt, so the layout runs in a worker thread and the
scene only turns the result into items.

The steps:

1. **Layering** — longest path from the sources, then nodes with more outgoing than incoming
   edges sink towards their consumers (weights and constants sit right above the operator that
   reads them instead of at the top of the graph).
2. **Long edges** — an edge spanning several layers is routed through dummy nodes. All long
   edges of one source share one dummy chain (a trunk from which each consumer branches off),
   which keeps dense fan-out graphs (DenseNet's concatenations) linear in size.
3. **Ordering** — barycentre sweeps down and up, keeping the order with the fewest crossings
   (counted per layer pair with a Fenwick tree).
4. **Coordinates** — each layer is placed at the weighted mean of its neighbours under the
   order and spacing constraints, solved exactly per layer by isotonic regression (pool
   adjacent violators); sweeps alternate down and up.
5. **Routes** — each edge leaves its source's bottom and enters its target's top at a port
   spread by the x of the incoming edges, through its dummies. The routes of one source share
   the points of its trunk (``LayoutResult.trunks``/``parts``): a buffer read by each of 1,000
   stacked layers has 1,000 routes through one trunk, made by slicing it, never point by point.

Groups of the module hierarchy are laid out with this function once per expanded group
(:mod:`.hierarchy`): boxes are ordinary nodes, and the points where edges enter and leave a
group are nodes pinned to its first and last layer (``LayoutInput.pin``). A tall node (an
expanded group) hangs from the top of its layer; small ones are centred in the layer's top band.
"""
from __future__ import annotations

import bisect
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..gcpause import gc_paused

log = logging.getLogger(__name__)

Point = tuple[float, float]


@dataclass
class LayoutInput:
    """What to lay out: ``sizes[i] = (width, height)`` of node ``i``; ``edges`` as
    ``(source, target)`` index pairs. Nodes should come in a topological order; an edge that
    goes backwards in that order is laid out reversed."""

    sizes: Sequence[tuple[float, float]]
    edges: Sequence[tuple[int, int]]
    #: nodes that may sit as satellites above the one node they feed (parameters); optional
    satellite: Sequence[bool] = ()
    #: per node: :data:`PIN_TOP` (first layer, e.g. where a group's inputs enter),
    #: :data:`PIN_BOTTOM` (last layer, a group's outputs) or 0; optional
    pin: Sequence[int] = ()


PIN_TOP, PIN_BOTTOM = 1, 2
#: the ordering and coordinate sweeps run on numpy arrays (:mod:`.layout_arrays`) for a layered
#: graph with at least this many nodes (dummies included) and this many per layer on average;
#: the result is the same either way
NUMPY_MIN_NODES = 4096
NUMPY_MIN_WIDTH = 24


@dataclass
class LayoutOptions:
    rank_sep: float = 34.0  #: vertical gap between layers
    node_sep: float = 22.0  #: horizontal gap between nodes
    dummy_sep: float = 8.0  #: horizontal gap next to a dummy (long edge) node
    dummy_width: float = 6.0
    order_iterations: int = 8  #: barycentre down+up sweeps at most
    coord_iterations: int = 8  #: coordinate sweeps (each down or up)
    port_spacing: float = 14.0  #: distance between edge ports on a node's side


@dataclass
class LayoutResult:
    """Node centres (``x[i]``, ``y[i]``), one route per input edge (list of points from the
    source's bottom to the target's top), every node's ``layer`` and ``order`` (index in its
    layer), the overall ``width``/``height`` and how long the layout took."""

    x: list[float]
    y: list[float]
    routes: list[list[Point]]
    layer: list[int]
    order: list[int]
    width: float
    height: float
    seconds: float = 0.0
    crossings: int = 0
    layers: list[list[int]] = field(default_factory=list)  #: real nodes of each layer, left to right
    #: points down the dummy chains that routes share (see ``parts``)
    trunks: list[list[Point]] = field(default_factory=list)
    #: per route, ``(t, c)`` when its points ``1 .. c`` are ``trunks[t][:c]`` (edges of one source
    #: run down one trunk), else None; empty when no route shares one
    parts: list[tuple[int, int] | None] = field(default_factory=list)


#: height of a layer's top band, in which nodes smaller than it are centred
TOP_BAND = 96.0


class LayoutCancelled(Exception):
    """The ``cancel`` callback asked the layout to stop."""


def layered_layout(inp: LayoutInput, options: LayoutOptions | None = None,
                   cancel: Callable[[], bool] | None = None) -> LayoutResult:
    """Lay ``inp`` out top to bottom (see the module docstring)."""
    opt = options or LayoutOptions()
    t0 = time.perf_counter()

    def check() -> None:
        if cancel is not None and cancel():
            raise LayoutCancelled()

    with gc_paused():
        sat = _Satellites.find(inp, opt)
        if not sat.host_of:
            res = _core_layout(inp, opt, check)
        else:
            res = sat.expand(_core_layout(sat.reduced, opt, check), opt)
    res.seconds = time.perf_counter() - t0
    log.debug("laid out %d nodes (%d satellites), %d edges, %d crossings in %.3fs",
              len(inp.sizes), len(sat.host_of), len(inp.edges), res.crossings, res.seconds)
    return res


class _Satellites:
    """Nodes allowed to be satellites (``LayoutInput.satellite``: parameters) that feed exactly
    one node and have no input are not layered: they sit in a row right above the node they
    feed, split left and right of a channel the node's other inputs come down through. The
    host is laid out as one box holding both."""

    SAT_GAP = 12.0  #: vertical gap between the satellite row and the host

    def __init__(self) -> None:
        self.host_of: dict[int, int] = {}
        self.sats: dict[int, list[int]] = {}
        self.main: list[int] = []
        self.reduced: LayoutInput = LayoutInput([], [])
        self.inp: LayoutInput = LayoutInput([], [])
        self.geometry: dict[int, tuple[float, float, float, float]] = {}  # host → (left_w, right_w, channel, row_h)

    @classmethod
    def find(cls, inp: LayoutInput, opt: LayoutOptions) -> "_Satellites":
        s = cls()
        s.inp = inp
        n = len(inp.sizes)
        if not inp.satellite:
            return s
        has_pred = [False] * n
        succ: list[set[int]] = [set() for _ in range(n)]
        main_in: dict[int, int] = {}
        for u, v in inp.edges:
            if u != v:
                has_pred[v] = True
                succ[u].add(v)
        for v in range(n):
            if inp.satellite[v] and not has_pred[v] and len(succ[v]) == 1:
                host = next(iter(succ[v]))
                if not inp.satellite[host]:
                    s.host_of[v] = host
                    s.sats.setdefault(host, []).append(v)
        if not s.host_of:
            return s
        for u, v in inp.edges:
            if u not in s.host_of and u != v:
                main_in[v] = main_in.get(v, 0) + 1
        s.main = [v for v in range(n) if v not in s.host_of]
        new_index = {v: k for k, v in enumerate(s.main)}
        sizes = []
        for v in s.main:
            w, h = inp.sizes[v]
            if v in s.sats:
                members = s.sats[v]
                left, right = members[: (len(members) + 1) // 2], members[(len(members) + 1) // 2:]
                lw = sum(inp.sizes[m][0] for m in left) + opt.node_sep * 0.5 * max(len(left) - 1, 0)
                rw = sum(inp.sizes[m][0] for m in right) + opt.node_sep * 0.5 * max(len(right) - 1, 0)
                channel = max(20.0, opt.port_spacing * (main_in.get(v, 0) + 1))
                row_h = max(inp.sizes[m][1] for m in members)
                s.geometry[v] = (lw, rw, channel, row_h)
                w = max(w, 2 * max(lw, rw) + channel)
                h = h + row_h + cls.SAT_GAP
            sizes.append((w, h))
        edges = [(new_index[u], new_index[v]) for u, v in inp.edges if u not in s.host_of and v not in s.host_of]
        s.reduced = LayoutInput(sizes, edges, (), [inp.pin[v] for v in s.main] if inp.pin else ())
        return s

    def expand(self, res: LayoutResult, opt: LayoutOptions) -> LayoutResult:
        inp = self.inp
        n = len(inp.sizes)
        xs, ys = [0.0] * n, [0.0] * n
        layer, order = [0] * n, [0] * n
        for k, v in enumerate(self.main):
            xs[v], ys[v], layer[v], order[v] = res.x[k], res.y[k], res.layer[k], res.order[k]
        node_top: dict[int, float] = {}
        for host, members in self.sats.items():
            lw, rw, channel, row_h = self.geometry[host]
            w, h = inp.sizes[host]
            box_h = h + row_h + self.SAT_GAP
            box_top = ys[host] - box_h / 2
            ys[host] = box_top + row_h + self.SAT_GAP + h / 2
            node_top[host] = ys[host] - h / 2
            left, right = members[: (len(members) + 1) // 2], members[(len(members) + 1) // 2:]
            cx = xs[host]
            x = cx - channel / 2
            for m in reversed(left):
                mw, mh = inp.sizes[m]
                xs[m], ys[m] = x - mw / 2, box_top + row_h - mh / 2
                x -= mw + opt.node_sep * 0.5
            x = cx + channel / 2
            for m in right:
                mw, mh = inp.sizes[m]
                xs[m], ys[m] = x + mw / 2, box_top + row_h - mh / 2
                x += mw + opt.node_sep * 0.5
            for m in members:
                layer[m], order[m] = layer[host], order[host]
        # routes: main edges from the core result (extended down the channel into hosts),
        # satellite edges as short curves onto the host's top
        routes: list[list[Point]] = []
        core = iter(res.routes)
        core_parts = iter(res.parts or [None] * len(res.routes))
        parts: list[tuple[int, int] | None] = []
        sat_slots: dict[int, int] = {}
        for u, v in inp.edges:
            if u in self.host_of:
                host = v
                members = self.sats[host]
                w, h = inp.sizes[host]
                i = members.index(u)
                tx = xs[host] + (i + 0.5 - len(members) / 2) * min(w / (len(members) + 1), 16.0)
                mw, mh = inp.sizes[u]
                routes.append([(xs[u], ys[u] + mh / 2), (tx, node_top[host])])
                parts.append(None)
                sat_slots[host] = sat_slots.get(host, 0) + 1
                continue
            if v in self.host_of:  # an edge into a satellite (only from another satellite) — none
                routes.append([])
                parts.append(None)
                continue
            r = list(next(core))
            if r and v in node_top and u < v:
                r.append((r[-1][0], node_top[v]))
            elif r and u in node_top and u > v:  # reversed edge ending at a host
                r.insert(0, (r[0][0], node_top[u]))
            routes.append(r)
            parts.append(next(core_parts))
        layers = [[self.main[k] for k in row] for row in res.layers]
        return LayoutResult(xs, ys, routes, layer, order, res.width, res.height, res.seconds, res.crossings, layers,
                            res.trunks, parts if res.parts else [])


def _core_layout(inp: LayoutInput, opt: LayoutOptions, check: Callable[[], None]) -> LayoutResult:
    """Steps 1-5 on a graph without satellites."""
    t0 = time.perf_counter()
    n = len(inp.sizes)
    if n == 0:
        return LayoutResult([], [], [[] for _ in inp.edges], [], [], 0.0, 0.0)
    # forward edges only (u < v in the given order), self loops dropped
    fwd: list[tuple[int, int]] = []
    for u, v in inp.edges:
        if u == v:
            continue
        fwd.append((u, v) if u < v else (v, u))
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in fwd:
        succs[u].append(v)
        preds[v].append(u)

    layer = _assign_layers(n, preds, succs, inp.pin)
    check()
    nodes_w = [float(w) for w, _ in inp.sizes]
    nodes_h = [float(h) for _, h in inp.sizes]
    lg = _LayeredGraph.build(n, layer, succs, nodes_w, opt)
    check()
    crossings = lg.reduce_crossings(opt.order_iterations, check)
    check()
    lg.assign_x(opt, check)
    ys, layer_top, layer_h = _assign_y(lg, nodes_h, opt)
    shift = -min(lg.x[i] - lg.width[i] / 2 for i in range(len(lg.x)))  # the left edge at 0
    lg.x = [x + shift for x in lg.x]
    routes, trunks, parts = _route_edges(inp.edges, lg, layer, ys, nodes_h, layer_top, layer_h, opt)

    xs = lg.x[:n]
    width = max(lg.x[i] + lg.width[i] / 2 for i in range(len(lg.x)))
    height = (layer_top[-1] + layer_h[-1]) if layer_top else 0.0
    order = [0] * n
    real_layers: list[list[int]] = []
    for nodes in lg.layers:
        real = [v for v in nodes if v < n]
        for k, v in enumerate(real):
            order[v] = k
        real_layers.append(real)
    dt = time.perf_counter() - t0
    log.debug("laid out %d nodes, %d edges (%d dummies, %d crossings) in %.3fs",
              n, len(inp.edges), len(lg.x) - n, crossings, dt)
    return LayoutResult(xs, ys[:n], routes, layer, order, width, height, dt, crossings, real_layers, trunks, parts)


# --------------------------------------------------------------------------- 1. layering
def _assign_layers(n: int, preds: list[list[int]], succs: list[list[int]], pin: Sequence[int] = ()) -> list[int]:
    layer = [0] * n
    for v in range(n):
        if preds[v]:
            layer[v] = max(layer[u] for u in preds[v]) + 1
    # sink nodes with more outputs than inputs towards their consumers (reverse order so a
    # chain of such nodes sinks together); moving v down by one changes total edge length by
    # len(preds) - len(succs)
    for v in range(n - 1, -1, -1):
        if succs[v] and len(succs[v]) >= len(preds[v]) and (len(succs[v]) > len(preds[v]) or not preds[v]):
            if pin and pin[v] == PIN_TOP:
                continue
            lowest = min(layer[s] for s in succs[v]) - 1
            if lowest > layer[v]:
                layer[v] = lowest
    if pin and any(pin):
        _pin_layers(layer, pin)
    return layer


def _pin_layers(layer: list[int], pin: Sequence[int]) -> None:
    """Move pinned nodes to a first / last layer of their own (the rest keep their order)."""
    free = [lv for lv, p in zip(layer, pin) if not p]
    top = any(p == PIN_TOP for p in pin)
    shift = 1 if top else 0
    bottom = (max(free) if free else -1) + shift + 1
    for v, p in enumerate(pin):
        if p == PIN_TOP:
            layer[v] = 0
        elif p == PIN_BOTTOM:
            layer[v] = bottom
        else:
            layer[v] += shift


# --------------------------------------------------------------------------- 2-4. layered graph
class _LayeredGraph:
    """The proper layered graph: real nodes ``0..n-1`` then dummy nodes, with segments only
    between adjacent layers."""

    def __init__(self) -> None:
        self.layer_of: list[int] = []
        self.width: list[float] = []
        self.is_dummy: list[bool] = []
        self.is_leaf: list[bool] = []  #: a real node with a single neighbour (weight, output)
        self.up: list[list[int]] = []  #: neighbours in the layer above
        self.down: list[list[int]] = []  #: neighbours in the layer below
        self.layers: list[list[int]] = []
        self.pos: list[int] = []
        self.x: list[float] = []
        self.chain: dict[int, dict[int, int]] = {}  #: source → {layer: dummy}
        self.side_arrays: dict = {}  #: "up"/"down" → neighbour lists as arrays (:mod:`.layout_arrays`)

    def _add(self, layer: int, width: float, dummy: bool) -> int:
        self.layer_of.append(layer)
        self.width.append(width)
        self.is_dummy.append(dummy)
        self.up.append([])
        self.down.append([])
        return len(self.layer_of) - 1

    def _link(self, a: int, b: int) -> None:
        self.down[a].append(b)
        self.up[b].append(a)

    @classmethod
    def build(cls, n: int, layer: list[int], succs: list[list[int]], widths: list[float],
              opt: LayoutOptions) -> "_LayeredGraph":
        g = cls()
        for v in range(n):
            g._add(layer[v], widths[v], False)
        for u in range(n):
            if not succs[u]:
                continue
            targets = sorted(set(succs[u]), key=lambda t: layer[t])
            far = layer[targets[-1]]
            chain: dict[int, int] = {}
            prev = u
            for lv in range(layer[u] + 1, far):
                d = g._add(lv, opt.dummy_width, True)
                g._link(prev, d)
                chain[lv] = d
                prev = d
            if chain:
                g.chain[u] = chain
            for t in targets:
                src = u if layer[t] == layer[u] + 1 else chain[layer[t] - 1]
                g._link(src, t)
        g.is_leaf = [False] * len(g.layer_of)
        for v in range(n):
            g.is_leaf[v] = len(g.up[v]) + len(g.down[v]) == 1
        depth = max(g.layer_of) + 1
        g.layers = [[] for _ in range(depth)]
        for v, lv in enumerate(g.layer_of):
            g.layers[lv].append(v)
        # initial order: real nodes by index; dummies right after their source's position
        g.pos = [0] * len(g.layer_of)
        for nodes in g.layers:
            for k, v in enumerate(nodes):
                g.pos[v] = k
        g.x = [0.0] * len(g.layer_of)
        return g

    # ---------------------------------------------------------------- ordering
    def _sweep(self, down: bool) -> None:
        rng = range(1, len(self.layers)) if down else range(len(self.layers) - 2, -1, -1)
        nb = self.up if down else self.down
        pos = self.pos
        for lv in rng:
            nodes = self.layers[lv]
            keys = {}
            for v in nodes:
                ns = nb[v]
                keys[v] = (sum(pos[u] for u in ns) / len(ns)) if ns else float(pos[v])
            nodes.sort(key=lambda v: (keys[v], pos[v]))
            for k, v in enumerate(nodes):
                pos[v] = k

    def crossings(self) -> int:
        total = 0
        pos = self.pos
        for lv in range(len(self.layers) - 1):
            lower_size = len(self.layers[lv + 1])
            pairs = []
            for u in self.layers[lv]:
                pu = pos[u]
                for v in self.down[u]:
                    pairs.append((pu, pos[v]))
            if len(pairs) < 2:
                continue
            pairs.sort()
            total += _count_inversions([p[1] for p in pairs], lower_size)
        return total

    def _wide(self) -> bool:
        """Whether to run the sweeps on numpy arrays (:mod:`.layout_arrays`): many nodes, wide
        layers. The result is the same either way."""
        return len(self.pos) >= NUMPY_MIN_NODES and len(self.pos) >= NUMPY_MIN_WIDTH * len(self.layers)

    def reduce_crossings(self, iterations: int, check: Callable[[], None]) -> int:
        sweep, crossings = self._sweep, self.crossings
        if self._wide():
            from .layout_arrays import ArrayOrdering

            arrays = ArrayOrdering(self)
            sweep, crossings = arrays.sweep, arrays.crossings
        best = crossings()
        best_layers = [list(nodes) for nodes in self.layers]
        stale = 0
        for _ in range(iterations):
            if best == 0:
                break
            check()
            sweep(down=True)
            sweep(down=False)
            c = crossings()
            if c < best:
                best, stale = c, 0
                best_layers = [list(nodes) for nodes in self.layers]
            else:
                stale += 1
                if stale >= 2:
                    break
        self.layers = best_layers
        for nodes in self.layers:
            for k, v in enumerate(nodes):
                self.pos[v] = k
        return best

    # ---------------------------------------------------------------- coordinates
    def _pull(self, u: int, v: int) -> float:
        """How strongly neighbour ``u`` pulls ``v`` towards its x (:func:`pull_weight`)."""
        return pull_weight(self.is_leaf[u] or self.is_leaf[v], self.is_dummy[u], self.is_dummy[v])

    def _separation(self, a: int, b: int, opt: LayoutOptions) -> float:
        gap = opt.dummy_sep if (self.is_dummy[a] or self.is_dummy[b]) else opt.node_sep
        return (self.width[a] + self.width[b]) / 2 + gap

    def assign_x(self, opt: LayoutOptions, check: Callable[[], None]) -> None:
        x = self.x
        offsets: list[list[float]] = []
        for nodes in self.layers:
            offs = [0.0] * len(nodes)
            for k in range(1, len(nodes)):
                offs[k] = offs[k - 1] + self._separation(nodes[k - 1], nodes[k], opt)
            offsets.append(offs)
            for v, o in zip(nodes, offs):
                x[v] = o
        # centre every layer on the widest one before balancing
        widest = max((offs[-1] for offs in offsets if offs), default=0.0)
        for nodes, offs in zip(self.layers, offsets):
            if nodes:
                shift = (widest - offs[-1]) / 2
                for v in nodes:
                    x[v] += shift
        wide = self._wide()
        place = self._place_layer
        plan = self._plan
        if wide:  # the same arithmetic on arrays, a layer at a time
            from .layout_arrays import ArrayPlacement

            arrays = ArrayPlacement(self)
            offsets = arrays.offsets(offsets)
            place, plan = arrays.place_layer, arrays.plan
        up_plan = [plan(nodes, "up") for nodes in self.layers]
        down_plan = [plan(nodes, "down") for nodes in self.layers]
        still = 0  # sweeps in a row that moved nothing
        for it in range(opt.coord_iterations):
            check()
            down = it % 2 == 0
            rng = range(1, len(self.layers)) if down else range(len(self.layers) - 2, -1, -1)
            plans = up_plan if down else down_plan
            moved = False
            for lv in rng:
                moved |= place(self.layers[lv], offsets[lv], plans[lv])
            still = 0 if moved else still + 1
            if still == 2:  # a fixed point of both directions: the remaining sweeps change nothing
                break
        # final balancing pass looking at both sides
        for lv, nodes in enumerate(self.layers):
            place(nodes, offsets[lv], plan(nodes, "up", "down"))
        if wide:
            self.x = arrays.x.tolist()

    def _plan(self, nodes: list[int], *sides: str) -> tuple[list, list[float]]:
        """What placing one layer reads, per node: its single neighbour on ``sides`` ("up",
        "down" or both), ``None`` without one, else its (neighbour, pull) pairs;
        and the total pulls (the isotonic fit's weights, 0.05 for a node without neighbours).
        Fixed for a layout, so worked out once."""
        pull = self._pull
        srcs: list = []
        weights: list[float] = []
        first, rest = getattr(self, sides[0]), [getattr(self, side) for side in sides[1:]]
        for v in nodes:
            ns = first[v] if not rest else first[v] + [u for side in rest for u in side[v]]
            if not ns:
                srcs.append(None)
                weights.append(0.05)
            elif len(ns) == 1:
                srcs.append(ns[0])
                weights.append(pull(ns[0], v))
            else:
                pairs = tuple((u, pull(u, v)) for u in ns)
                wsum = 0.0
                for _u, w in pairs:
                    wsum += w
                srcs.append(pairs)
                weights.append(wsum)
        return srcs, weights

    def _place_layer(self, nodes: list[int], offsets: list[float], plan: tuple[list, list[float]]) -> bool:
        """Place one layer at the weighted mean of its neighbours, keeping order and spacing:
        least squares under ``x[k+1] - x[k] >= sep`` is isotonic regression of ``target - offset``.
        Returns whether any x changed."""
        x = self.x
        srcs, weights = plan
        z: list[float] = []
        for v, off, src, wsum in zip(nodes, offsets, srcs, weights):
            if src is None:
                z.append(x[v] - off)
            elif src.__class__ is int:
                z.append(wsum * x[src] / wsum - off)  # the sum below with one term
            else:
                acc = 0.0
                for u, w in src:
                    acc += w * x[u]
                z.append(acc / wsum - off)
        y = z if len(z) == 1 else _isotonic(z, weights)  # one node: nothing to keep apart
        moved = False
        for v, yv, off in zip(nodes, y, offsets):
            nx = yv + off
            if nx != x[v]:
                x[v] = nx
                moved = True
        return moved


def pull_weight(leaf: bool, dummy_u: bool, dummy_v: bool) -> float:
    """How strongly neighbour ``u`` pulls ``v`` towards its x, from what they are (``leaf``:
    either is a real node with a single neighbour): trunks stay straight, then chains of real
    operators; a leaf (a weight feeding one operator, an output) follows its neighbour but
    never drags it."""
    if leaf:
        return 0.5
    if dummy_v:
        return 4.0 if dummy_u else 1.0
    return 1.0 if dummy_u else 8.0


def _count_inversions(seq: list[int], size: int) -> int:
    """Pairs i < j with seq[i] > seq[j] (Fenwick tree over values 0..size-1)."""
    tree = [0] * (size + 1)
    inv = 0
    seen = 0
    for val in seq:
        # count seen values > val
        i = val + 1
        le = 0
        while i > 0:
            le += tree[i]
            i -= i & -i
        inv += seen - le
        i = val + 1
        while i <= size:
            tree[i] += 1
            i += i & -i
        seen += 1
    return inv


def _isotonic(z: list[float], w: list[float]) -> list[float]:
    """Weighted least-squares non-decreasing fit of ``z`` (pool adjacent violators).

    Values are pushed one by one onto a stack of blocks, merging while the block below has the
    larger mean. A stretch that starts at or above the top block's mean and does not decrease
    merges nothing, so it is pushed in one go: the work is per violation, not per value, and the
    blocks (and every float) are the ones the one-by-one loop makes."""
    n = len(z)
    drops = [k for k, (a, b) in enumerate(zip(z, z[1:])) if a > b]  # z[k] > z[k + 1]
    if not drops:
        return z
    means: list[float] = []
    wsums: list[float] = []
    counts: list[int] = []
    i = 0
    while i < n:
        if means and z[i] < means[-1]:
            means.append(z[i])
            wsums.append(w[i])
            counts.append(1)
            while len(means) > 1 and means[-2] > means[-1]:
                m2, w2, c2 = means.pop(), wsums.pop(), counts.pop()
                m1, w1 = means[-1], wsums[-1]
                wt = w1 + w2
                means[-1] = (m1 * w1 + m2 * w2) / wt
                wsums[-1] = wt
                counts[-1] += c2
            i += 1
            continue
        d = bisect.bisect_left(drops, i)
        end = drops[d] + 1 if d < len(drops) else n  # the stretch z[i:end] does not decrease
        means.extend(z[i:end])
        wsums.extend(w[i:end])
        counts.extend([1] * (end - i))
        i = end
    out: list[float] = []
    for m, c in zip(means, counts):
        if c == 1:
            out.append(m)
        else:
            out.extend([m] * c)
    return out


# --------------------------------------------------------------------------- 5. y and routes
def _assign_y(lg: _LayeredGraph, heights: list[float], opt: LayoutOptions):
    n = len(heights)
    layer_h = [0.0] * len(lg.layers)
    for v in range(n):
        lv = lg.layer_of[v]
        layer_h[lv] = max(layer_h[lv], heights[v])
    layer_top = [0.0] * len(lg.layers)
    cur = 0.0
    for lv in range(len(lg.layers)):
        layer_top[lv] = cur
        # a layer of nothing but zero-height ports (where edges enter or leave a group) needs
        # only half the gap
        cur += layer_h[lv] + (opt.rank_sep if layer_h[lv] > 0 else opt.rank_sep / 2)
    # small nodes centred in the layer's top band, tall ones (expanded groups) hanging from its top
    ys = []
    for v in range(len(lg.layer_of)):
        lv = lg.layer_of[v]
        band = min(layer_h[lv], TOP_BAND)
        h = heights[v] if v < n else 0.0
        ys.append(layer_top[lv] + (h / 2 if h > band else band / 2))
    return ys, layer_top, layer_h


def _route_edges(edges: Sequence[tuple[int, int]], lg: _LayeredGraph, layer: list[int], ys: list[float],
                 heights: list[float], layer_top: list[float], layer_h: list[float],
                 opt: LayoutOptions) -> tuple[list[list[Point]], list[list[Point]], list[tuple[int, int] | None]]:
    """Routes, the trunks they share and which part of a trunk each uses (``LayoutResult.parts``).
    A route through ``m`` dummies is its source's trunk cut after ``m`` layers: built by slicing
    and simplified with the trunk's own decisions, so the work grows with the trunks, not with
    the sum of the routes."""
    x = lg.x
    raw: list[list[Point] | None] = []
    used: list[int] = []  #: trunk points of each forward route (0: none or a reversed route)
    full: dict[int, list[Point]] = {}  #: source → points down its whole dummy chain
    for u, v in edges:
        if u == v:
            raw.append(None)
            used.append(0)
            continue
        rev = u > v
        a, b = (v, u) if rev else (u, v)
        m = 2 * (layer[b] - layer[a] - 1)
        trunk = full.get(a) if m else None
        if m and trunk is None:
            chain = lg.chain[a]
            trunk = full[a] = [pt for lv in range(layer[a] + 1, layer[a] + 1 + len(chain))
                               for pt in ((x[chain[lv]], layer_top[lv]), (x[chain[lv]], layer_top[lv] + layer_h[lv]))]
        pts = [(x[a], ys[a] + heights[a] / 2), *(trunk[:m] if m else ()), (x[b], ys[b] - heights[b] / 2)]
        raw.append(pts[::-1] if rev else pts)
        used.append(0 if rev else m)
    _spread_ports(raw, edges, x, lg.width, opt)
    routes: list[list[Point]] = []
    parts: list[tuple[int, int] | None] = []
    trunks: list[list[Point]] = []
    kept: dict[tuple[int, Point], tuple[int, list[int]]] = {}  #: (source, start) → (trunk, kept indices)
    for (u, _v), r, m in zip(edges, raw, used):
        if r is None:
            routes.append([])
            parts.append(None)
            continue
        if not m:
            routes.append(_simplify(r))
            parts.append(None)
            continue
        start, last, end = r[0], r[m], r[-1]
        hit = kept.get((u, start))
        if hit is None:
            idx, pts = _simplify_trunk(start, full[u])
            hit = kept[(u, start)] = (len(trunks), idx)
            trunks.append(pts)
        t, idx = hit
        c = bisect.bisect_left(idx, m - 1)  # kept points before the route's last trunk point
        prev = trunks[t][c - 1] if c else start
        route = [start, *trunks[t][:c]]
        if abs(last[0] - prev[0]) > SIMPLIFY_TOL or abs(end[0] - last[0]) > SIMPLIFY_TOL:
            route.append(last)
        route.append(end)
        routes.append(route)
        parts.append((t, c))
    return routes, trunks, parts


#: how far (scene units) from vertical a run may stray and still be drawn as one segment
SIMPLIFY_TOL = 1.0


def _simplify_trunk(start: Point, trunk: list[Point]) -> tuple[list[int], list[Point]]:
    """What :func:`_simplify` keeps of ``[start, *trunk, …]`` before the trunk's last point (which
    every route decides alone: its next point is the route's end): kept indices and points."""
    idx: list[int] = []
    pts: list[Point] = []
    prev = start
    for j in range(len(trunk) - 1):
        p, q = trunk[j], trunk[j + 1]
        if abs(p[0] - prev[0]) > SIMPLIFY_TOL or abs(q[0] - p[0]) > SIMPLIFY_TOL:
            idx.append(j)
            pts.append(p)
            prev = p
    return idx, pts


def _simplify(pts: list[Point], tol: float = SIMPLIFY_TOL) -> list[Point]:
    """Drop interior points of (nearly) vertical runs: a trunk through many layers becomes a
    few segments."""
    if len(pts) < 3:
        return pts
    out = [pts[0]]
    for i in range(1, len(pts) - 1):
        if abs(pts[i][0] - out[-1][0]) > tol or abs(pts[i + 1][0] - pts[i][0]) > tol:
            out.append(pts[i])
    out.append(pts[-1])
    return out


def _spread_ports(routes: list[list[Point] | None], edges: Sequence[tuple[int, int]], x: list[float],
                  width: list[float], opt: LayoutOptions) -> None:
    """Spread the ends of edges meeting one node side by the x of their neighbouring point."""
    incoming: dict[int, list[int]] = {}
    outgoing: dict[int, list[int]] = {}
    for k, (u, v) in enumerate(edges):
        r = routes[k]
        if r is None or len(r) < 2:
            continue
        a, b = (u, v) if u < v else (v, u)
        outgoing.setdefault(a, []).append(k)
        incoming.setdefault(b, []).append(k)

    def spread(node: int, ks: list[int], end: int) -> None:
        # end = -1 adjusts the last point (target side), 0 the first (source side)
        def neighbour_x(k: int) -> float:
            r = routes[k]
            fwd = edges[k][0] < edges[k][1]
            idx = (-2 if end == -1 else 1) if fwd else (1 if end == -1 else -2)
            return r[idx][0]  # type: ignore[index]

        keys = {}
        for k in ks:
            keys.setdefault(round(neighbour_x(k), 1), []).append(k)
        if len(keys) < 2:
            return
        slots = sorted(keys)
        step = min(opt.port_spacing, width[node] / (len(slots) + 1))
        for i, key in enumerate(slots):
            px = x[node] + (i - (len(slots) - 1) / 2) * step
            for k in keys[key]:
                r = routes[k]
                fwd = edges[k][0] < edges[k][1]
                idx = (-1 if end == -1 else 0) if fwd else (0 if end == -1 else -1)
                r[idx] = (px, r[idx][1])  # type: ignore[index]

    for node, ks in incoming.items():
        if len(ks) > 1:
            spread(node, ks, -1)
    for node, ks in outgoing.items():
        if len(ks) > 1:
            spread(node, ks, 0)
