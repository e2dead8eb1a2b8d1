"""Hierarchical layout: the layered layout run once per expanded group — pure Python, no Qt.

A :class:`HierarchicalLayout` holds one display graph's structure split by its
:class:`~gui.graph.grouping.GroupTree`. For a set of expanded groups, :meth:`~HierarchicalLayout.place`
lays out every expanded group on its own — its direct nodes, its child groups as boxes (a
collapsed one sized by its label, an expanded one by its own inner layout) and *ports*: one node
pinned to the top per outside operand entering the group, one pinned to the bottom per operand
leaving it — and composes the results into absolute positions (:class:`Placement`).

Why per group: expanding one group lays out that group (once; results are cached by the sizes of
its child boxes) and re-runs only its ancestors, each a small graph of boxes. Layering and order
depend only on structure, never on sizes, so when a box grows its ancestors keep their layers
and order and only the coordinates move: neighbours shift by what the box needs, nothing else.

Edges: every display edge ``u → v`` has a lowest common group ``L``; it is an edge between the
two children of ``L`` that contain ``u`` and ``v``, leaves each expanded group on ``u``'s side
through the out-port of ``u``, and enters each expanded group on ``v``'s side through the
in-port of ``u``. The visible route is the concatenation of those pieces; edges inside a
collapsed box disappear, and an edge between two visible things is drawn once.
"""
from __future__ import annotations

import heapq
import logging
import threading
import time
from dataclasses import astuple, dataclass, field
from typing import Callable, Sequence

from .grouping import ROOT, GroupTree
from .layout import PIN_BOTTOM, PIN_TOP, LayoutInput, LayoutOptions, LayoutResult, Point, layered_layout
from .model import PARAM, DisplayGraph

log = logging.getLogger(__name__)

#: inner padding of an expanded group's frame (left, right, bottom) and its header height
PAD = 14.0
HEADER = 26.0
PORT_W = 6.0


def gcode(gid: int) -> int:
    """Element code of group ``gid`` (nodes are their own index ≥ 0, groups negative)."""
    return -1 - gid


@dataclass
class _Inner:
    """The layout of one expanded group's content (coordinates relative to its content's
    top-left)."""

    elems: list[int]
    in_ports: list[int]
    out_ports: list[int]
    result: LayoutResult
    index: dict[int, int]  #: element code → layout node index
    edge_index: dict[tuple, int]  #: edge key → route index
    width: float
    height: float


@dataclass
class Placement:
    """Where everything visible is, for one set of expanded groups.

    ``nodes``: visible node index → centre; ``boxes``: visible group id → (x0, y0, x1, y1) for
    both collapsed boxes and expanded frames (``expanded`` tells which); ``edges``: one entry per
    visible connection, ``(src element, dst element, display edge index, route)``; element codes
    are node indices or :func:`gcode` of a group.
    """

    expanded: frozenset[int]
    nodes: dict[int, Point] = field(default_factory=dict)
    boxes: dict[int, tuple[float, float, float, float]] = field(default_factory=dict)
    edges: list[tuple[int, int, int, list[Point]]] = field(default_factory=list)
    rep: list[int] = field(default_factory=list)  #: every node's visible element
    width: float = 0.0
    height: float = 0.0
    seconds: float = 0.0
    laid_out: int = 0  #: groups laid out anew (not from the cache)
    crossings: int = 0

    def is_visible(self, node: int) -> bool:
        return node in self.nodes


class HierarchicalLayout:
    """Structure of one display graph split by its group tree, with a cache of inner layouts."""

    def __init__(self, graph: DisplayGraph, tree: GroupTree, sizes: Sequence[tuple[float, float]],
                 group_sizes: Sequence[tuple[float, float]], options: LayoutOptions | None = None,
                 header_widths: Sequence[float] = ()):
        self.graph = graph
        self.tree = tree
        self.sizes = list(sizes)
        self.group_sizes = list(group_sizes)
        #: least width of an expanded box (its header)
        self.header_widths = list(header_widths) or [w for w, _h in group_sizes]
        self.options = options or LayoutOptions()
        self._lock = threading.Lock()
        self._cache: dict[int, tuple[tuple, _Inner]] = {}
        #: layouts by their whole input: a model repeats its blocks (every decoder layer, every
        #: conv-bn-act), and the same input always gives the same layout
        self._same: dict[tuple, LayoutResult] = {}
        self._options_key = astuple(self.options)  #: the options' part of those keys
        groups = tree.groups
        n_groups = len(groups)
        self._elem_edges: list[dict[tuple[int, int], int]] = [{} for _ in range(n_groups)]
        self._in_edges: list[dict[tuple[int, int], int]] = [{} for _ in range(n_groups)]
        self._out_edges: list[dict[tuple[int, int], int]] = [{} for _ in range(n_groups)]
        #: per display edge: (lca, [(group, element) on u's side, innermost first],
        #: [(group, element) on v's side, innermost first], element of lca with u, with v)
        self._climb: list[tuple[int, list, list, int, int] | None] = []
        parent = [g.parent for g in groups]
        depth = [g.depth for g in groups]
        group_of = tree.group_of
        for k, e in enumerate(graph.edges):
            u, v = e.src, e.dst
            if u == v:
                self._climb.append(None)
                continue
            a, b, ea, eb = group_of[u], group_of[v], u, v
            ups_u: list[tuple[int, int]] = []
            ups_v: list[tuple[int, int]] = []
            while depth[a] > depth[b]:
                ups_u.append((a, ea))
                ea, a = gcode(a), parent[a]
            while depth[b] > depth[a]:
                ups_v.append((b, eb))
                eb, b = gcode(b), parent[b]
            while a != b:
                ups_u.append((a, ea))
                ea, a = gcode(a), parent[a]
                ups_v.append((b, eb))
                eb, b = gcode(b), parent[b]
            self._climb.append((a, ups_u, ups_v, ea, eb))
            if ea != eb:
                self._elem_edges[a].setdefault((ea, eb), k)
            for h, el in ups_u:
                self._out_edges[h].setdefault((el, u), k)
            for h, el in ups_v:
                self._in_edges[h].setdefault((u, el), k)

    # ---------------------------------------------------------------- sizes
    def box_size(self, gid: int, expanded: frozenset[int]) -> tuple[float, float]:
        if gid not in expanded:
            return self.group_sizes[gid]
        inner = self._cache[gid][1]
        return max(inner.width + 2 * PAD, self.header_widths[gid]), inner.height + HEADER + PAD

    def _elem_size(self, code: int, expanded: frozenset[int]) -> tuple[float, float]:
        return self.sizes[code] if code >= 0 else self.box_size(-1 - code, expanded)

    # ---------------------------------------------------------------- layout
    def place(self, expanded: set[int] | frozenset[int], cancel: Callable[[], bool] | None = None) -> Placement:
        """Lay out what ``expanded`` shows (see the module docstring)."""
        t0 = time.perf_counter()
        exp = frozenset(g for g in expanded if 0 < g < len(self.tree.groups)
                        and all(a in expanded for a in self.tree.group_ancestors(g)))
        with self._lock:
            fresh = self._layout_group(ROOT, exp, cancel)
            placement = self._compose(exp)
        placement.laid_out = fresh
        placement.seconds = time.perf_counter() - t0
        log.debug("placed %d nodes, %d boxes, %d edges (%d groups laid out) in %.3fs", len(placement.nodes),
                  len(placement.boxes), len(placement.edges), fresh, placement.seconds)
        return placement

    def _layout_group(self, gid: int, exp: frozenset[int], cancel) -> int:
        g = self.tree.groups[gid]
        fresh = 0
        for c in g.children:
            if c in exp:
                fresh += self._layout_group(c, exp, cancel)
        key = tuple(self.box_size(c, exp) for c in g.children)
        hit = self._cache.get(gid)
        if hit is not None and hit[0] == key:
            return fresh
        self._cache[gid] = (key, self._inner(gid, exp, cancel))
        return fresh + 1

    def _inner(self, gid: int, exp: frozenset[int], cancel) -> _Inner:
        nodes = self.graph.nodes
        elems = self._ordered_elements(gid)
        in_ports = sorted({u for (u, _el) in self._in_edges[gid]})
        out_ports = sorted({u for (_el, u) in self._out_edges[gid]})
        codes: list[tuple[str, int]] = ([("in", u) for u in in_ports] + [("el", c) for c in elems]
                                        + [("out", u) for u in out_ports])
        index = {c: i for i, c in enumerate(codes)}
        sizes: list[tuple[float, float]] = []
        sat: list[bool] = []
        pin: list[int] = []
        for kind, c in codes:
            if kind == "el":
                sizes.append(self._elem_size(c, exp))
                sat.append(c >= 0 and nodes[c].kind == PARAM)
                pin.append(0)
            else:
                sizes.append((PORT_W, 0.0))
                sat.append(False)
                pin.append(PIN_TOP if kind == "in" else PIN_BOTTOM)
        edges: list[tuple[int, int]] = []
        edge_index: dict[tuple, int] = {}
        for (a, b) in self._elem_edges[gid]:
            edge_index[("el", a, b)] = len(edges)
            edges.append((index[("el", a)], index[("el", b)]))
        for (u, el) in self._in_edges[gid]:
            edge_index[("in", u, el)] = len(edges)
            edges.append((index[("in", u)], index[("el", el)]))
        for (el, u) in self._out_edges[gid]:
            edge_index[("out", el, u)] = len(edges)
            edges.append((index[("el", el)], index[("out", u)]))
        key = (tuple(sizes), tuple(edges), tuple(sat), tuple(pin), self._options_key)
        res = self._same.get(key)
        if res is None:
            res = self._same[key] = layered_layout(LayoutInput(sizes, edges, sat, pin), self.options, cancel)
        elem_index = {c: index[("el", c)] for c in elems}
        width = max(res.width, PORT_W)
        height = res.height
        return _Inner(elems, in_ports, out_ports, res, elem_index | {("in", u): index[("in", u)] for u in in_ports}
                      | {("out", u): index[("out", u)] for u in out_ports}, edge_index, width, height)

    def _ordered_elements(self, gid: int) -> list[int]:
        """Direct nodes and child groups of a group in a topological order of the edges between
        them (ties: first operator index); cycles (a module called twice) are broken by index."""
        g = self.tree.groups[gid]
        groups = self.tree.groups
        elems = list(g.members) + [gcode(c) for c in g.children]
        first = {c: (c if c >= 0 else groups[-1 - c].first) for c in elems}
        preds: dict[int, set[int]] = {c: set() for c in elems}
        succs: dict[int, set[int]] = {c: set() for c in elems}
        for (a, b) in self._elem_edges[gid]:
            if b not in preds[a] or a not in succs[b]:
                preds[b].add(a)
                succs[a].add(b)
        indeg = {c: len(preds[c]) for c in elems}
        heap = [(first[c], c) for c in elems if indeg[c] == 0]
        heapq.heapify(heap)
        out: list[int] = []
        done: set[int] = set()
        pending = sorted(elems, key=lambda c: first[c])
        pi = 0
        while len(out) < len(elems):
            if not heap:  # a cycle: take the earliest element not placed yet
                while pending[pi] in done:
                    pi += 1
                heapq.heappush(heap, (first[pending[pi]], pending[pi]))
                indeg[pending[pi]] = 0
            _, c = heapq.heappop(heap)
            if c in done:
                continue
            done.add(c)
            out.append(c)
            for s in succs[c]:
                if s not in done:
                    indeg[s] -= 1
                    if indeg[s] == 0:
                        heapq.heappush(heap, (first[s], s))
        return out

    # ---------------------------------------------------------------- composition
    def _compose(self, exp: frozenset[int]) -> Placement:
        p = Placement(exp)
        origin: dict[int, Point] = {ROOT: (0.0, 0.0)}
        root = self._cache[ROOT][1]
        p.width, p.height = root.width, root.height
        stack = [ROOT]
        while stack:
            gid = stack.pop()
            inner = self._cache[gid][1]
            ox, oy = origin[gid]
            res = inner.result
            p.crossings += res.crossings
            for c in inner.elems:
                i = inner.index[c]
                cx, cy = ox + res.x[i], oy + res.y[i]
                if c >= 0:
                    p.nodes[c] = (cx, cy)
                    continue
                cg = -1 - c
                w, h = self.box_size(cg, exp)
                x0, y0 = cx - w / 2, cy - h / 2
                p.boxes[cg] = (x0, y0, x0 + w, y0 + h)
                if cg in exp:
                    cw = self._cache[cg][1].width
                    origin[cg] = (x0 + (w - cw) / 2, y0 + HEADER)
                    stack.append(cg)
        tree = self.tree
        p.rep = [tree.representative(i, exp) for i in range(len(self.graph.nodes))]
        seen: set[tuple[int, int]] = set()
        trunks: dict[tuple[int, int], list[Point]] = {}
        for k, climb in enumerate(self._climb):
            if climb is None:
                continue
            e = self.graph.edges[k]
            ru, rv = p.rep[e.src], p.rep[e.dst]
            if ru == rv or (ru, rv) in seen:
                continue
            seen.add((ru, rv))
            p.edges.append((ru, rv, k, self._route(e.src, climb, exp, origin, trunks)))
        return p

    def _route(self, u: int, climb, exp: frozenset[int], origin: dict[int, Point],
               trunks: dict[tuple[int, int], list[Point]]) -> list[Point]:
        lca, ups_u, ups_v, ea, eb = climb
        pieces: list[list[Point]] = []
        for h, el in ups_u:  # innermost first; only groups whose whole chain up to lca is open
            if self._open_up_to(h, lca, exp):
                pieces.append(self._piece(h, ("out", el, u), origin, trunks))
        pieces.append(self._piece(lca, ("el", ea, eb), origin, trunks))
        for h, el in reversed(ups_v):
            if self._open_up_to(h, lca, exp):
                pieces.append(self._piece(h, ("in", u, el), origin, trunks))
        route = list(pieces[0])
        for piece in pieces[1:]:
            if not piece:
                continue
            if route:  # the piece starts where the previous one's port is: run on from its x
                route.append((route[-1][0], piece[0][1]))
                route.extend(piece[1:])
            else:
                route.extend(piece)
        return route

    def _open_up_to(self, h: int, lca: int, exp: frozenset[int]) -> bool:
        groups = self.tree.groups
        while h != lca:
            if h not in exp:
                return False
            h = groups[h].parent
        return True

    def _piece(self, gid: int, key: tuple, origin: dict[int, Point],
               trunks: dict[tuple[int, int], list[Point]]) -> list[Point]:
        """One inner route in scene coordinates. The part it shares with the other routes of its
        source (a trunk) is moved once per group and sliced: routes keep sharing those points."""
        inner = self._cache[gid][1]
        k = inner.edge_index.get(key)
        if k is None:
            return []
        ox, oy = origin[gid]
        res = inner.result
        route = res.routes[k]
        part = res.parts[k] if res.parts else None
        if part is None:
            return [(ox + x, oy + y) for x, y in route]
        t, c = part
        trunk = trunks.get((gid, t))
        if trunk is None:
            trunk = trunks[(gid, t)] = [(ox + x, oy + y) for x, y in res.trunks[t]]
        return [(ox + route[0][0], oy + route[0][1]), *trunk[:c], *[(ox + x, oy + y) for x, y in route[c + 1:]]]
