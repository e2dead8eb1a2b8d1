"""What peers have (issue 12): the graph saved as an SVG or PNG picture (as Netron does), and the
two graph views panned and zoomed together. Driven through the menu actions and the file dialog
in a real window on the bundled sample."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from PySide6.QtCore import QPointF
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QFileDialog

from tests.gui.conftest import TINY_CNN, open_model


def _file_dialog(qtbot) -> QFileDialog:
    qtbot.waitUntil(lambda: any(isinstance(w, QFileDialog) and w.isVisible() for w in QApplication.topLevelWidgets()),
                    timeout=5000)
    return next(w for w in QApplication.topLevelWidgets() if isinstance(w, QFileDialog) and w.isVisible())


def _save_as(qtbot, window, path) -> None:
    window.actions.export_image.trigger()
    dlg = _file_dialog(qtbot)
    dlg.selectFile(str(path))
    dlg.accept()
    QApplication.processEvents()


def test_the_graph_is_saved_as_svg_and_png(window, qtbot, tmp_path):
    open_model(window, TINY_CNN)
    window.aten_panel.view.setFocus()  # the graph last clicked is the one saved
    window.sync.last_side = "aten"
    svg = tmp_path / "cnn-aten.svg"
    _save_as(qtbot, window, svg)
    assert svg.exists() and "Exported the aten graph" in window.status_label.text()
    root = ET.parse(svg).getroot()
    texts = {"".join(t.itertext()).strip() for t in root.iter() if t.tag.endswith("text")}
    labels = {n.label for n in window.aten_panel.graph.nodes if n.kind == "op"}
    assert labels <= texts, sorted(labels - texts)[:10]  # every operator is there, as text
    rect = window.aten_panel.scene.sceneRect()
    vb = [float(v) for v in root.get("viewBox").split()]
    assert abs(vb[2] - rect.width()) <= 1 and abs(vb[3] - rect.height()) <= 1
    assert not list(tmp_path.glob(".*.part"))  # written whole, then put in place

    # the right graph as a PNG: the size of the scene (×2), with the nodes' colours
    window.right_panel.view.setFocus()
    window.sync.last_side = "right"
    png = tmp_path / "cnn-pnnx.png"
    _save_as(qtbot, window, png)
    img = QImage(str(png))
    rect = window.right_panel.scene.sceneRect()
    assert abs(img.width() - 2 * rect.width()) <= 2 and abs(img.height() - 2 * rect.height()) <= 2
    conv = window.right_panel.scene.theme.fill("conv").rgb()
    assert any(img.pixel(x, y) == conv for x in range(0, img.width(), 3) for y in range(0, img.height(), 3))


def test_linked_views_pan_and_zoom_together(window, qtbot):
    open_model(window, TINY_CNN)
    aten, right = window.aten_panel, window.right_panel
    window.actions.link_views.trigger()
    assert window.actions.link_views.isChecked()
    aten.view.set_zoom(0.6)
    assert abs(right.view.zoom - 0.6) < 1e-6
    # pan the ATen view to a node: the right view shows what it became, at its centre
    node = "conv2d_5"
    item = aten.scene.item(node)
    aten.view.centerOn(item.sceneBoundingRect().center())
    QApplication.processEvents()
    became = right.scene.indices(window.sync.counterparts("aten", [node]))
    assert became
    target = right.scene.nodes_rect(became).center()
    centre = right.view.mapToScene(right.view.viewport().rect().center())
    visible = right.view.mapToScene(right.view.viewport().rect()).boundingRect()
    # (across, a graph narrower than the view cannot be scrolled: it stays centred)
    assert visible.contains(target) and abs(centre.y() - target.y()) < 5, (centre, target)
    # and the other way round
    right.view.zoom_by(1.5)
    assert abs(aten.view.zoom - right.view.zoom) < 1e-6
    # unlinked: the views move on their own
    window.actions.link_views.trigger()
    before = right.view.mapToScene(right.view.viewport().rect().center())
    aten.view.centerOn(QPointF(0, 0))
    aten.view.set_zoom(0.3)
    QApplication.processEvents()
    after = right.view.mapToScene(right.view.viewport().rect().center())
    assert right.view.zoom != aten.view.zoom and abs(after.y() - before.y()) < 1
    assert window.settings.get("view/linked", True, bool) is False
