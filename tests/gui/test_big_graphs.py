"""A 10k-node graph in a real graph panel: it opens collapsed, expands fully, renders at every
zoom and reveals a node hidden in a collapsed group (timings are the benchmark's business:
``tests/benchmarks/bench_graph.py``)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter

from gui.graph.model import display_graph
from gui.graph.synthetic import synthetic_graph


@pytest.fixture(scope="module")
def big():
    return display_graph(synthetic_graph(10_000), "aten")


def _render(view) -> QImage:
    vp = view.viewport().rect()
    img = QImage(vp.width(), vp.height(), QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(0)
    painter = QPainter(img)
    view.render(painter, QRectF(img.rect()), vp)
    painter.end()
    return img


def _painted(img: QImage) -> bool:
    """Something but the background was drawn."""
    bg = img.pixel(0, 0)
    w, h = img.width(), img.height()
    return any(img.pixel(x, y) != bg for x in range(0, w, 7) for y in range(0, h, 7))


@pytest.mark.slow
def test_a_10k_node_graph_opens_collapsed_and_expands_fully(panel, qtbot, big):
    assert len(big.nodes) >= 10_000
    with qtbot.waitSignal(panel.layoutReady, timeout=120_000):
        panel.show_graph(big)
    scene = panel.scene
    shown = len(scene.layout.nodes) + len(scene.layout.boxes)
    assert 10 <= shown <= 1000 and scene.groups  # opened collapsed: boxes, not 10k nodes
    assert len(scene._node_items) < 1000  # items only for what is shown
    assert _painted(_render(panel.view))
    with qtbot.waitSignal(panel.layoutReady, timeout=300_000):
        panel.expand_all()
    p = scene.layout
    assert panel.expanded == panel.tree.all_groups()
    assert len(p.nodes) == len(big.nodes) and all(g in p.expanded for g in p.boxes)
    assert len(scene.edges) == len({(e.src, e.dst) for e in big.edges})
    # every zoom renders: overview chunks when far out, items when close
    for zoom in (0.01, 0.05, 0.2, 0.5, 1.0):
        panel.view.set_zoom(zoom, scene.sceneRect().center())
        assert scene.detail == (zoom >= 0.28)
        assert _painted(_render(panel.view)), zoom
    with qtbot.waitSignal(panel.layoutReady, timeout=120_000):
        panel.collapse_all()
    assert len(scene.layout.nodes) < 20


@pytest.mark.slow
def test_selecting_a_node_deep_in_a_collapsed_10k_graph_reveals_it(panel, qtbot, big):
    with qtbot.waitSignal(panel.layoutReady, timeout=120_000):
        panel.show_graph(big)
    name = "softmax_150"
    i = big.index[name]
    assert not panel.scene.is_visible(i)
    with qtbot.waitSignal(panel.layoutReady, timeout=120_000):
        panel.select([name])
    assert panel.scene.is_visible(i) and panel.scene.selected_names() == [name]
    ancestors = panel.tree.ancestors(i)
    assert ancestors and set(ancestors) <= panel.expanded
    visible = panel.view.mapToScene(panel.view.viewport().rect()).boundingRect()
    assert visible.intersects(panel.scene.nodes[i].sceneBoundingRect())
    # only the groups on the way were opened, not the whole graph
    assert len(panel.scene.layout.nodes) < 1500


def _on_screen(view) -> list[int]:
    """The placed nodes whose boxes overlap what the view shows."""
    s = view.graph_scene
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    return [i for i, (x, y) in s.layout.nodes.items()
            if shown.intersects(QRectF(x - s.sizes[i][0] / 2, y - s.sizes[i][1] / 2, *s.sizes[i]))]


def _drawn_where_placed(scene, nodes) -> bool:
    """Every node has its item, in the scene, shown, at its placed position."""
    p = scene.layout
    for i in nodes:
        it = scene._node_items.get(i)
        if it is None or it.scene() is not scene or not it.isVisible() or (it.pos().x(), it.pos().y()) != p.nodes[i]:
            return False
    return True


def _expanded_and_painted(panel, qtbot, big):
    """``big`` shown, every group expanded, the view at 100% on the middle and painted once."""
    with qtbot.waitSignal(panel.layoutReady, timeout=120_000):
        panel.show_graph(big)
    with qtbot.waitSignal(panel.layoutReady, timeout=300_000):
        panel.expand_all()
    scene, view = panel.scene, panel.view
    view.set_zoom(1.0, scene.sceneRect().center())
    view.grab()  # a real paint
    return scene, view


@pytest.mark.slow
def test_expanding_a_10k_graph_makes_the_items_of_what_is_seen(panel, qtbot, big, tmp_path):
    """Node items are made where a view paints (or when asked for), not for every placed node;
    whatever is on screen is drawn at its place, after a scroll too, and an export has them all."""
    scene, view = _expanded_and_painted(panel, qtbot, big)
    seen = _on_screen(view)
    assert seen and _drawn_where_placed(scene, seen)
    assert len(scene._node_items) < len(scene.layout.nodes) / 4  # not 10k items for a screenful
    # scroll to the far end: the next paint makes the items there
    last = max(scene.layout.nodes, key=lambda i: scene.layout.nodes[i][1])
    view.centerOn(*scene.layout.nodes[last])
    assert not _drawn_where_placed(scene, [last])
    assert _painted(_render(view))  # render() makes them too, like a paint
    seen = _on_screen(view)
    assert last in seen and _drawn_where_placed(scene, seen)
    # asking for an item not made yet gives it, placed
    waiting = next(iter(scene._pending))
    assert scene.nodes[waiting].scene() is scene and _drawn_where_placed(scene, [waiting])
    # re-placing (collapse one group, expand it again) keeps made items in step with the layout
    gid = next(panel.tree.ancestors(i)[0] for i in seen if panel.tree.ancestors(i))
    with qtbot.waitSignal(panel.layoutReady, timeout=120_000):
        panel.toggle_group(gid)
    with qtbot.waitSignal(panel.layoutReady, timeout=120_000):
        panel.toggle_group(gid)
    made = [i for i in scene._node_items if i in scene.layout.nodes and i not in scene._pending]
    assert _drawn_where_placed(scene, made)
    # an exported picture draws every node: the export makes all their items
    from gui.graph.export_image import export_image
    export_image(scene, tmp_path / "big.png")
    assert not scene._pending and _drawn_where_placed(scene, list(scene.layout.nodes))


@pytest.mark.slow
def test_edge_chunks_build_their_paths_when_seen_and_hold_them_in_their_bounds(panel, qtbot, big):
    """Edge chunks and arrow heads build their paths on their first paint: after expanding a
    10k graph only those near the view have; each path lies inside the bounds Qt culls by."""
    from gui.graph.items import PATH_MARGIN, ArrowHeads, EdgeChunk

    scene, view = _expanded_and_painted(panel, qtbot, big)
    chunks = [c for c in scene._edge_chunks if isinstance(c, (EdgeChunk, ArrowHeads))]
    assert len(chunks) == len(scene._edge_chunks) > 100
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    built = [c for c in chunks if c._path is not None]
    assert built and len(built) < len(chunks) / 4
    assert all(c._path is not None for c in chunks if c.sceneBoundingRect().intersects(shown))
    inner = PATH_MARGIN - 0.5
    for c in chunks:  # every path (built now) inside its bounds, with the pen's room to spare
        room = c.boundingRect().adjusted(inner, inner, -inner, -inner)
        assert room.contains(c.path().boundingRect()), c
    assert sum(isinstance(c, EdgeChunk) for c in chunks) and sum(isinstance(c, ArrowHeads) for c in chunks)
