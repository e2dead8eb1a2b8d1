"""Module groups in the graph views: the grouping follows the module tree, boxes collapse and
expand (edges into, out of and across boxes stay), positions stay put when a group opens, and
selection, provenance links and search reach nodes hidden in collapsed groups."""
from __future__ import annotations

import engine
import pytest
from engine.build import build_graph
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest

from tests.gui.conftest import TINY_TRANSFORMER, open_model
from gui.graph.grouping import ROOT, group_tree, short_class
from gui.graph.model import PARAM, display_graph
from gui.graph.synthetic import synthetic_graph
from gui.sync import ATEN, RIGHT


def _aten(path):
    pkg = engine.load(str(path))
    ep = pkg.models[pkg.model_names[0]]
    return ep, display_graph(build_graph(ep), "aten")


def test_grouping_matches_the_module_tree_of_the_fixture():
    ep, disp = _aten(TINY_TRANSFORMER)
    modules = {m.path: m for m in ep.module_tree().walk()}
    tree = group_tree(disp)
    # every box is a module of the program, with its class; modules of one operator get no box
    assert {g.path for g in tree.groups[1:]} == {"attn", "mlp"}
    for g in tree.groups[1:]:
        assert g.path in modules and g.type == short_class(modules[g.path].type)
        assert g.parent == ROOT and g.label.startswith(g.path)
    # every operator the module tree gives to a module sits in that module's box (or the root)
    by_name = {n.name: i for i, n in enumerate(disp.nodes)}
    for m in modules.values():
        box = tree.by_path.get(m.path, tree.by_path.get(m.path.split(".")[0], ROOT))
        for name in m.nodes:
            if name in by_name:
                assert box in [tree.group_of[by_name[name]]] + tree.ancestors(by_name[name]), (name, m.path)
    # the attention box holds exactly the attention module's operators and the weights they read
    attn = tree.groups[tree.by_path["attn"]]
    ops = {disp.nodes[i].name for i in attn.members if disp.nodes[i].kind != PARAM}
    assert ops == {n for m in modules.values() if m.path.startswith("attn") for n in m.nodes}
    params = {disp.nodes[i].name for i in attn.members if disp.nodes[i].kind == PARAM}
    assert {"p_attn_in_proj_weight", "p_attn_out_proj_weight"} <= params
    assert attn.ops == len(ops) and attn.size == len(attn.members)


def test_synthetic_hierarchy_nests_blocks_and_counts_nodes():
    disp = display_graph(synthetic_graph(600), "aten")
    tree = group_tree(disp)
    enc = tree.groups[tree.by_path["encoder"]]
    layers = [tree.groups[c] for c in enc.children]
    assert [g.path for g in layers] == [f"encoder.layers.{i}" for i in range(len(layers))]
    assert {tree.groups[c].path.rsplit(".", 1)[-1] for c in layers[0].children} == {"attn", "mlp"}
    assert layers[2].type == "ConvBlock" and [tree.groups[c].path for c in layers[2].children] == [
        "encoder.layers.2.body"]
    assert tree.root.size == len(disp.nodes) == sum(len(g.members) for g in tree.groups)
    assert tree.max_depth == 3
    # the representative of a node is its outermost collapsed group
    q = disp.index["linear_q_0"]
    assert tree.representative(q, set()) == -1 - enc.id
    assert tree.representative(q, {enc.id}) == -1 - layers[0].id
    assert tree.representative(q, tree.all_groups()) == q


def _show(panel, qtbot, disp):
    with qtbot.waitSignal(panel.layoutReady, timeout=60_000):
        panel.show_graph(disp)


def _expand(panel, qtbot, fn, *args):
    with qtbot.waitSignal(panel.layoutReady, timeout=60_000):
        fn(*args)


def test_collapse_and_expand_change_what_is_shown_and_keep_edges_across_boxes(panel, qtbot):
    _ep, disp = _aten(TINY_TRANSFORMER)
    _show(panel, qtbot, disp)
    scene = panel.scene
    tree = panel.tree
    attn = tree.by_path["attn"]
    assert panel.expanded == tree.all_groups()  # a small graph opens fully expanded
    assert len(scene.layout.nodes) == len(disp.nodes)
    _expand(panel, qtbot, panel.collapse_all)
    shown = set(scene.layout.nodes)
    inside = set(tree.nodes_of(attn))
    assert not shown & inside and len(shown) == len(disp.nodes) - len(inside) - len(tree.nodes_of(tree.by_path["mlp"]))
    assert set(scene.groups) == {attn, tree.by_path["mlp"]} and not scene.groups[attn].expanded
    assert all(not scene.nodes[i].isVisible() for i in inside if i in scene._node_items)
    box = -1 - attn
    into = [e for e in scene.edges if scene.layout.edges[e.index][1] == box]
    out = [e for e in scene.edges if scene.layout.edges[e.index][0] == box]
    assert into and out  # a collapsed box shows its inputs and outputs as edges
    # the residual x → add skips the attention box and stays drawn
    x, add = disp.index["x"], disp.index["add"]
    assert any(e.edge.src == x and e.edge.dst == add for e in scene.edges)
    assert all(len(e.points) >= 2 for e in scene.edges)
    _expand(panel, qtbot, panel.toggle_group, attn)
    assert inside <= set(scene.layout.nodes) and scene.groups[attn].expanded
    assert all(scene.nodes[i].isVisible() for i in inside)
    # the expanded box frames its nodes
    x0, y0, x1, y1 = scene.layout.boxes[attn]
    for i in inside:
        cx, cy = scene.layout.nodes[i]
        assert x0 < cx < x1 and y0 < cy < y1


def test_a_group_opens_in_place(panel, qtbot):
    disp = display_graph(synthetic_graph(900), "aten")
    _show(panel, qtbot, disp)
    tree = panel.tree
    enc = tree.by_path["encoder"]
    _expand(panel, qtbot, panel.set_expanded, {enc})
    before = panel.scene.layout
    layers = tree.groups[enc].children
    target = layers[3]
    _expand(panel, qtbot, panel.toggle_group, target)
    after = panel.scene.layout
    assert target in after.expanded and set(after.boxes) >= set(before.boxes)
    # the boxes around it keep their places relative to each other: those before it stay at
    # the same height, those after it move down by what it grew, all by the same sideways
    # shift (the panel keeps the opened box where it was on screen)
    grow = (after.boxes[target][3] - after.boxes[target][1]) - (before.boxes[target][3] - before.boxes[target][1])
    dx = after.boxes[layers[0]][0] - before.boxes[layers[0]][0]
    for k, g in enumerate(layers):
        if g == target:
            continue
        assert after.boxes[g][1] - before.boxes[g][1] == pytest.approx(0 if k < 3 else grow)
        assert after.boxes[g][0] - before.boxes[g][0] == pytest.approx(dx, abs=1.0)


def test_clicking_a_box_expands_it_and_its_header_collapses_it(panel, qtbot):
    _ep, disp = _aten(TINY_TRANSFORMER)
    _show(panel, qtbot, disp)
    _expand(panel, qtbot, panel.collapse_all)
    view, scene = panel.view, panel.scene
    attn = panel.tree.by_path["attn"]
    rect = scene.groups[attn].rect
    view.centerOn(rect.center())
    with qtbot.waitSignal(panel.layoutReady, timeout=60_000):
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(rect.center()))
    assert attn in panel.expanded
    header = scene.groups[attn].header_rect()
    pos = view.mapFromScene(QPointF(header.left() + 60, header.center().y()))
    assert view.viewport().rect().contains(pos)  # the box stayed where it was on screen
    with qtbot.waitSignal(panel.layoutReady, timeout=60_000):
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert attn not in panel.expanded
    assert "MultiheadAttention" in view._tooltip_at(scene.groups[attn].rect.center())


def test_depth_and_flat_views(panel, qtbot):
    disp = display_graph(synthetic_graph(900), "aten")
    _show(panel, qtbot, disp)
    tree = panel.tree
    _expand(panel, qtbot, panel.expand_to_depth, 2)
    assert panel.expanded == frozenset(g.id for g in tree.groups[1:] if g.depth <= 2)
    assert not any(tree.groups[g].depth == 3 and g in panel.expanded for g in panel.scene.groups)
    _expand(panel, qtbot, panel.set_grouping, False)
    assert not panel.scene.groups and len(panel.scene.layout.nodes) == len(disp.nodes)


@pytest.mark.torch
def test_selecting_a_hidden_node_expands_its_group_and_links_through_provenance(window, qtbot):
    open_model(window, TINY_TRANSFORMER)
    aten, right = window.aten_panel, window.right_panel
    for p in (aten, right):
        with qtbot.waitSignal(p.layoutReady, timeout=60_000):
            p.collapse_all()
    attn = aten.tree.by_path["attn"]
    name = next(disp_n.name for disp_n in aten.graph.nodes if disp_n.type == "aten.linear.default"
                and disp_n.module == "attn")
    idx = aten.graph.index[name]
    assert not aten.scene.is_visible(idx)
    # a selection that lands inside a collapsed group: the box shows it at once ...
    with qtbot.waitSignal(aten.layoutReady, timeout=60_000):
        linked = window.sync.select(ATEN, [name])
    assert attn in aten.expanded and aten.scene.is_visible(idx)
    assert aten.scene.selected_names() == [name] and aten.scene.nodes[idx].selected
    visible = aten.view.mapToScene(aten.view.viewport().rect()).boundingRect()
    assert visible.intersects(aten.scene.nodes[idx].sceneBoundingRect())
    # ... and the lowered operators it became are revealed in the other view too
    assert linked
    qtbot.waitUntil(lambda: all(right.scene.is_visible(right.graph.index[n]) for n in linked), timeout=60_000)
    assert {right.graph.nodes[i].name for i in right.scene.linked_indices} == set(linked)
    # the reverse: a lowered operator hidden in a collapsed group of the right view
    if right.expanded:
        with qtbot.waitSignal(right.layoutReady, timeout=60_000):
            right.collapse_all()
    rtree = right.tree
    op = next(n.name for i, n in enumerate(right.graph.nodes) if rtree.group_of[i] != ROOT and n.provenance)
    assert not right.scene.is_visible(right.graph.index[op])
    with qtbot.waitSignal(right.layoutReady, timeout=60_000):
        back = window.sync.select(RIGHT, [op])
    assert right.scene.is_visible(right.graph.index[op]) and right.scene.selected_names() == [op]
    assert back and set(back) <= {n.name for n in aten.graph.nodes}
    assert {aten.graph.nodes[i].name for i in aten.scene.linked_indices} == set(back)


@pytest.mark.torch
def test_search_results_inside_collapsed_groups_are_revealed(window, qtbot):
    open_model(window, TINY_TRANSFORMER)
    aten = window.aten_panel
    with qtbot.waitSignal(aten.layoutReady, timeout=60_000):
        aten.collapse_all()
    window.find()
    window.search.edit.setText("module:mlp")
    qtbot.waitUntil(lambda: bool(window.search.hits), timeout=5000)
    hits = [h for h in window.search.hits if h.view == "aten"]
    mlp = aten.tree.by_path["mlp"]
    assert aten.scene.groups[mlp].hit  # the collapsed box shows it holds hits
    with qtbot.waitSignal(aten.layoutReady, timeout=60_000):
        window.search.hitActivated.emit(hits[0])
    i = aten.graph.index[hits[0].name]
    assert aten.scene.is_visible(i) and aten.scene.nodes[i].hit and aten.scene.selected_names() == [hits[0].name]


def test_everything_inside_one_box_opens_and_closes(panel, qtbot):
    disp = display_graph(synthetic_graph(900), "aten")
    _show(panel, qtbot, disp)
    _expand(panel, qtbot, panel.collapse_all)
    tree = panel.tree
    layer = tree.by_path["encoder.layers.1"]
    _expand(panel, qtbot, panel.expand_subtree, layer)
    inside = set(tree.subtree(layer))
    assert panel.expanded == inside | {tree.by_path["encoder"]}
    assert set(tree.nodes_of(layer)) <= set(panel.scene.layout.nodes)
    _expand(panel, qtbot, panel.collapse_subtree, layer)
    assert panel.expanded == {layer, tree.by_path["encoder"]}
    assert {g for g in panel.scene.groups if g in inside} == inside  # the inner boxes show, closed


def test_a_buffer_read_by_every_layer_runs_down_one_trunk_drawn_once(panel, qtbot, exported):
    """The rotary tables of an LLM feed every layer: their edges share one trunk (each route
    leaves it at its layer), and the scene draws every piece of every route exactly once."""
    _ep, disp = _aten(exported("rotary_stack"))
    _show(panel, qtbot, disp)
    p, scene = panel.scene.layout, panel.scene
    assert panel.expanded == panel.tree.all_groups() and len(panel.tree.groups) > 12  # opened fully
    assert len(p.nodes) == len(disp.nodes)
    cos = disp.index["b_cos"]
    routes = sorted((r for _ru, _rv, k, r in p.edges if disp.edges[k].src == cos), key=lambda r: r[-1][1])
    assert len(routes) == 12  # one reader per layer
    deepest = routes[-1]

    def shared(r):
        n = 0
        while n < min(len(r), len(deepest)) and r[n] == deepest[n]:
            n += 1
        return n

    # one trunk: the deeper the layer, the longer its route runs down the deepest one's points
    common = [shared(r) for r in routes[:-1]]
    assert all(c >= 1 for c in common) and common == sorted(common) and common[-1] > len(deepest) // 2
    every = [(a, b, disp.edges[k].from_param) for _ru, _rv, k, r in p.edges for a, b in zip(r, r[1:])]
    assert len(scene._pieces) == len(set(scene._pieces))  # nothing drawn twice with one pen
    assert set(scene._pieces) == set(every)  # nothing left out
    assert len(scene._pieces) < len(every) - 100  # the trunk's pieces counted once, not once per route


def test_repeated_blocks_are_laid_out_once_and_placed_as_if_each_were_laid_out(monkeypatch):
    """The hierarchy lays out each distinct group input once (the synthetic model repeats its
    encoder layers): every node, box and route must land where a layout of every group gives."""
    from gui.graph import hierarchy

    disp = display_graph(synthetic_graph(1500), "aten")
    tree = group_tree(disp)
    sizes = [(60.0 + 7 * (len(n.name) % 5), 30.0) for n in disp.nodes]
    box_sizes = [(180.0, 40.0)] * len(tree.groups)
    calls = []
    real = hierarchy.layered_layout
    monkeypatch.setattr(hierarchy, "layered_layout", lambda *a, **k: calls.append(1) or real(*a, **k))
    everything = tree.all_groups()
    shared = hierarchy.HierarchicalLayout(disp, tree, sizes, box_sizes).place(everything)
    shared_calls = len(calls)

    class Forgetful(dict):  # no layout is ever found again
        def get(self, key, default=None):
            return default

    alone = hierarchy.HierarchicalLayout(disp, tree, sizes, box_sizes)
    alone._same = Forgetful()
    calls.clear()
    each = alone.place(everything)
    assert len(calls) == len(everything) + 1  # every group and the root
    assert shared_calls < len(calls) / 2
    assert shared.nodes == each.nodes and shared.boxes == each.boxes and shared.edges == each.edges
