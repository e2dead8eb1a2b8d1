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
