"""The layered layout (lists, and numpy arrays for wide graphs): placement invariants, satellites, cancellation, speed."""
from __future__ import annotations

import random

import pytest

from gui.graph.layout import LayoutCancelled, LayoutInput, LayoutOptions, layered_layout


def _chain_with_params(n_ops: int, params_per_op: int = 2, skip_every: int = 5) -> LayoutInput:
    sizes, edges, sat = [], [], []

    def node(w, h, s=False):
        sizes.append((w, h))
        sat.append(s)
        return len(sizes) - 1

    prev = node(80, 34)
    skip_from = prev
    for k in range(n_ops):
        ps = [node(50, 30, True) for _ in range(params_per_op)]
        v = node(100, 38)
        edges.append((prev, v))
        edges.extend((p, v) for p in ps)
        if k % skip_every == 0 and k:
            edges.append((skip_from, v))  # a residual: a long edge
            skip_from = v
        prev = v
    return LayoutInput(sizes, edges, sat)


def _boxes(inp, res):
    return [(res.x[i] - w / 2, res.y[i] - h / 2, res.x[i] + w / 2, res.y[i] + h / 2) for i, (w, h) in
            enumerate(inp.sizes)]


def test_nodes_do_not_overlap_and_edges_point_down():
    inp = _chain_with_params(60)
    res = layered_layout(inp)
    boxes = _boxes(inp, res)
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            a, b = boxes[i], boxes[j]
            overlap = a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5
            assert not overlap, (i, j, a, b)
    for (u, v), route in zip(inp.edges, res.routes):
        assert res.y[u] < res.y[v]
        assert route[0][1] == pytest.approx(res.y[u] + inp.sizes[u][1] / 2)  # leaves the source's bottom
        assert route[-1][1] == pytest.approx(res.y[v] - inp.sizes[v][1] / 2)  # enters the target's top
        assert all(route[k][1] <= route[k + 1][1] + 1e-6 for k in range(len(route) - 1))


def test_parameters_sit_right_above_their_operator():
    inp = _chain_with_params(10, params_per_op=4)
    res = layered_layout(inp)
    for (u, v) in inp.edges:
        if inp.satellite[u]:
            assert res.layer[u] == res.layer[v]
            gap = (res.y[v] - inp.sizes[v][1] / 2) - (res.y[u] + inp.sizes[u][1] / 2)
            assert 0 < gap < 30
            assert abs(res.x[u] - res.x[v]) < 200


def test_a_straight_chain_stays_straight():
    inp = LayoutInput([(90, 36)] * 30, [(i, i + 1) for i in range(29)])
    res = layered_layout(inp)
    assert max(res.x) - min(res.x) < 1e-6
    assert res.crossings == 0


def test_layers_and_order_describe_every_real_node():
    inp = _chain_with_params(20)
    res = layered_layout(inp)
    listed = sorted(i for row in res.layers for i in row)
    assert listed == sorted(i for i in range(len(inp.sizes)) if not inp.satellite[i])
    for row in res.layers:
        assert [res.order[i] for i in row] == list(range(len(row)))
        assert [res.x[i] for i in row] == sorted(res.x[i] for i in row)


def test_cancel_stops_the_layout():
    inp = _chain_with_params(200)
    with pytest.raises(LayoutCancelled):
        layered_layout(inp, cancel=lambda: True)


def _dense_graph(blocks=(6, 12, 24, 16), per_layer=6, params=3, seed=1) -> LayoutInput:
    """A DenseNet-shaped graph: every layer of a block reads the concatenation of all before."""
    rnd = random.Random(seed)
    sizes, edges, sat = [], [], []

    def node(w, h, s=False):
        sizes.append((w, h))
        sat.append(s)
        return len(sizes) - 1

    def op(*ins):
        ps = [node(rnd.randint(40, 110), 30, True) for _ in range(params)]
        v = node(rnd.randint(70, 150), 38)
        edges.extend((i, v) for i in ins)
        edges.extend((p, v) for p in ps)
        return v

    cur = op(node(80, 34))
    for b, n in enumerate(blocks):
        feats = [cur]
        for _ in range(n):
            a = op(*feats)
            for _ in range(per_layer - 1):
                a = op(a)
            feats.append(a)
        cur = op(*feats)
    edges.append((cur, node(80, 34)))
    return LayoutInput(sizes, edges, sat)


def test_a_1500_node_dense_graph_lays_out_with_every_edge_routed():
    """Its speed is measured by tests/benchmarks/bench_graph.py, not asserted here."""
    inp = _dense_graph()
    assert 1400 <= len(inp.sizes) <= 2000
    res = layered_layout(inp)
    assert len(res.routes) == len(inp.edges) and all(res.routes)


def test_edges_of_one_source_share_its_trunk():
    """A table read by every layer of a stack (an LLM's rotary cos/sin): its routes are slices
    of one trunk, and still bend only between adjacent layers."""
    rnd = random.Random(3)
    sizes, edges = [(80.0, 34.0)], []  # node 0: the table
    prev = None
    for k in range(40):
        v = len(sizes)
        sizes.append((float(rnd.randint(60, 160)), 38.0))
        if prev is not None:
            edges.append((prev, v))
        if k % 3 == 2:
            edges.append((0, v))
            side = len(sizes)  # a side branch pulls the trunk sideways
            sizes.append((float(rnd.randint(60, 200)), 38.0))
            edges.extend([(prev, side), (side, v)])
        prev = v
    inp = LayoutInput(sizes, edges)
    opt = LayoutOptions()
    res = layered_layout(inp, opt)
    from_table = [k for k, (u, _v) in enumerate(edges) if u == 0]
    long = [k for k in from_table if res.layer[edges[k][1]] > res.layer[0] + 1]  # through dummies
    assert len(long) >= 12 and {res.parts[k][0] for k in long} == {res.parts[long[0]][0]}
    trunk = res.trunks[res.parts[long[0]][0]]
    assert len(trunk) <= 2 * max(res.layer)  # one trunk point per layer side, however many readers
    for k in long:
        t, c = res.parts[k]
        route = res.routes[k]
        assert route[1:1 + c] == trunk[:c]
        assert route[-1][1] == pytest.approx(res.y[edges[k][1]] - 19.0)
        for (x0, y0), (x1, y1) in zip(route, route[1:]):
            assert y0 <= y1
            if abs(x1 - x0) > 1.0:  # a bend crosses one gap between layers, never several
                assert y1 - y0 <= opt.rank_sep + 38.0


def _pav_one_by_one(z: list[float], w: list[float]) -> list[float]:
    """Pool adjacent violators the textbook way: push every value, merge while the block
    below has the larger mean."""
    blocks: list[list] = []  # [mean, weight, count]
    for zi, wi in zip(z, w):
        blocks.append([zi, wi, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks[-1]
            blocks[-1] = [(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2]
    return [m for m, _w, c in blocks for _ in range(c)]


def test_isotonic_fit_equals_the_one_by_one_fit_bit_for_bit():
    """The fit pushes non-decreasing stretches whole; every float must still be the one the
    textbook loop computes (sorted, nearly sorted, tied and random layers)."""
    from gui.graph.layout import _isotonic

    rnd = random.Random(7)
    for _ in range(5000):
        n = rnd.randint(1, 60)
        kind = rnd.randrange(3)
        if kind == 0:
            z = [rnd.uniform(-50, 50) for _ in range(n)]
        elif kind == 1:
            z = sorted(rnd.uniform(-50, 50) for _ in range(n))
            for _ in range(rnd.randint(0, 4)):
                z[rnd.randrange(n)] += rnd.uniform(-30, 30)
        else:
            z = [float(rnd.randint(0, 5)) for _ in range(n)]
        w = [rnd.choice([0.05, 0.5, 1.0, 4.0, 8.0, rnd.uniform(0.1, 9.0)]) for _ in range(n)]
        assert _isotonic(z, w) == _pav_one_by_one(z, w), (z, w)


def _wide_dag(rnd: random.Random, n: int) -> LayoutInput:
    """Random DAG with long edges (many dummies), fan-in and fan-out, leaves and output pins."""
    from gui.graph.layout import PIN_BOTTOM

    sizes = [(rnd.choice([40, 80, 120]), rnd.choice([30, 40])) for _ in range(n)]
    edges = []
    for v in range(1, n):
        for _ in range(rnd.choice([1, 1, 1, 2, 3])):
            edges.append((rnd.randrange(max(0, v - rnd.choice([2, 5, 40])), v), v))
    pins = [0] * n
    for v in rnd.sample(range(n // 2), n // 10):  # outputs leaving from high up: long edges down
        sizes.append((6, 0))
        pins.append(PIN_BOTTOM)
        edges.append((v, len(sizes) - 1))
    return LayoutInput(sizes, edges, [False] * len(sizes), pins)


def test_sweeps_on_arrays_give_the_same_layout_as_on_lists(monkeypatch):
    """Wide layered graphs run the ordering and coordinate sweeps on numpy arrays: the order,
    the crossing count and every x, y and route point must be what the list code computes."""
    from gui.graph import layout as L

    rnd = random.Random(3)
    for n in (60, 200, 400):
        inp = _wide_dag(rnd, n)
        monkeypatch.setattr(L, "NUMPY_MIN_NODES", 10**9)
        lists = layered_layout(inp)
        monkeypatch.setattr(L, "NUMPY_MIN_NODES", 0)
        monkeypatch.setattr(L, "NUMPY_MIN_WIDTH", 0)
        arrays = layered_layout(inp)
        assert all(type(v) is float for v in arrays.x)
        assert (arrays.x, arrays.y, arrays.routes) == (lists.x, lists.y, lists.routes)
        assert (arrays.order, arrays.crossings) == (lists.order, lists.crossings)
        assert len(set(lists.x)) > len(lists.layers) // 2  # not a degenerate picture
