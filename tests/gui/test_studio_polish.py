"""What the Studio shows fits and agrees (issue 12, "Studio state and polish"): the dark theme
reaches every part, headers and tables never cut what they say at the default size or at
1024×700, counts agree or say what they count, a wide graph opens with its box labels visible,
Fit on a huge graph gives a usable zoom. Real windows, real .pt2 files; looked at through
``grab()`` where pixels are the point."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionButton, QWidget

from gui.graph.model import display_graph
from gui.graph.synthetic import synthetic_graph
from tests.gui.conftest import TINY_CNN, TINY_TRANSFORMER, open_model


def _lightness(c: QColor) -> int:
    return c.lightness()


def _settle(window) -> None:
    assert window.wait_settled()
    for _ in range(5):
        QApplication.processEvents()


# ---------------------------------------------------------------------------------- 7
def test_the_dark_theme_reaches_minimaps_signature_and_checkboxes(window, qtbot):
    window.resize(1500, 950)
    open_model(window, TINY_CNN)
    window.aten_panel.view.set_zoom(1.0)  # the map shows once the graph is larger than the view
    window.docks["signature"].raise_()
    window.docks["passes"].raise_()
    _settle(window)
    assert window.aten_panel.view.minimap.isVisible()
    window.actions.themes["dark"].trigger()
    _settle(window)
    try:
        for panel in (window.aten_panel, window.right_panel):
            img = panel.view.minimap.image
            corner = img.pixelColor(2, 2)
            assert _lightness(corner) < 80, f"{panel.key} map still light: {corner.name()}"
        tree = window.signature.tree.viewport().grab().toImage()
        assert _lightness(tree.pixelColor(tree.width() - 4, tree.height() - 4)) < 80
        # an unchecked box must stand out from the panel behind it
        box = window.passes.hide_unchanged
        assert not box.isChecked()
        img = box.grab().toImage()
        opt = QStyleOptionButton()
        opt.initFrom(box)
        r: QRect = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, opt, box)
        dpr = img.devicePixelRatio()
        background = _lightness(box.palette().color(QPalette.ColorRole.Window))
        edge = max(_lightness(img.pixelColor(int(x * dpr), int(r.center().y() * dpr)))
                   for x in range(r.left(), r.left() + 3))
        assert edge - background >= 40, (edge, background)
    finally:
        window.actions.themes["light"].trigger()
        _settle(window)


# ---------------------------------------------------------------------------------- 9
def _header_fits(panel) -> None:
    info = panel.info
    assert info.isVisible() and info.text(), panel.key
    assert info.width() >= info.sizeHint().width(), (panel.key, info.text(), info.width(), info.sizeHint().width())
    header = info.parentWidget()
    for w in header.findChildren(QWidget):  # every widget of the header
        if w.isVisible() and w.parent() is header:
            g = w.geometry()
            assert header.rect().contains(g), (w, g, header.rect())
            assert g.width() >= w.minimumSizeHint().width() - 1, (w, g.width(), w.minimumSizeHint().width())


@pytest.mark.parametrize("size, model", [((1480, 920), "densenet121"), ((1024, 700), "tiny_cnn")])
def test_graph_headers_never_clip_their_counts(window, exported, size, model):
    """At the default size with four-digit counts (DenseNet-121), and at 1024×700."""
    window.resize(*size)
    open_model(window, TINY_CNN if model == "tiny_cnn" else exported(model))
    _settle(window)
    for panel in (window.aten_panel, window.right_panel):
        _header_fits(panel)
    # a pass with additions, removals and changes: its marks are counted in the header too
    records = window.doc.conversion.result.records
    busiest = max(range(1, len(records)), key=lambda i: (sum(v > 0 for v in records[i].diff.counts().values()),
                                                         sum(records[i].diff.counts().values())))
    window.docks["passes"].raise_()
    window.passes.select_pass(busiest)
    _settle(window)
    assert sum(sign in window.right_panel.info.text() for sign in "+−~") >= 2, window.right_panel.info.text()
    _header_fits(window.right_panel)


def test_signature_problems_and_pass_names_are_not_cut_at_the_default_size(window, exported):
    open_model(window, exported("unsupported"))
    _settle(window)
    # Signature: the shapes are in view, whole
    window.docks["signature"].raise_()
    _settle(window)
    tree = window.signature.tree
    model = window.signature.model
    vp = tree.viewport().rect()
    for r in range(model.rowCount()):
        group = model.item(r, 0)
        for k in range(group.rowCount()):
            cell = model.indexFromItem(group.child(k, 3))
            text = cell.data()
            if not text or group.text().startswith("Structure"):
                continue
            rect = tree.visualRect(cell)
            assert vp.contains(rect.topLeft()), (text, rect, vp)
            assert tree.fontMetrics().horizontalAdvance(text) <= rect.width(), (text, rect.width())
    # Problems: every cell's text is shown in full (the reason wraps in its row)
    window.docks["problems"].raise_()
    _settle(window)
    table = window.problems.table
    pm = window.problems.model
    assert pm.rowCount() >= 1
    for row in range(pm.rowCount()):
        for col in range(1, pm.columnCount()):
            idx = pm.index(row, col)
            text = idx.data() or ""
            rect = table.visualRect(idx).adjusted(3, 0, -3, 0)
            need = table.fontMetrics().boundingRect(rect, int(Qt.TextFlag.TextWordWrap), text)
            assert need.width() <= rect.width() + 1 and need.height() <= rect.height(), (pm.COLUMNS[col], text)
            assert rect.right() <= table.viewport().width(), (pm.COLUMNS[col], rect, table.viewport().width())
    # Passes: every pass name is whole
    window.docks["passes"].raise_()
    _settle(window)
    pt = window.passes.table
    for row in range(window.passes.proxy.rowCount()):
        idx = window.passes.proxy.index(row, 1)
        rect = pt.visualRect(idx)
        assert pt.fontMetrics().horizontalAdvance(idx.data()) + 6 <= rect.width(), idx.data()  # 3 px margins
        assert rect.right() <= pt.viewport().width()


def test_an_error_dialog_keeps_a_path_on_one_line(window, qtbot):
    import shutil
    import tempfile
    from pathlib import Path

    from PySide6.QtWidgets import QLabel

    short = Path(tempfile.mkdtemp(prefix="m"))  # a path that fits the offscreen screen (800 px) on one line
    deep = short / "exported_models"
    deep.mkdir(parents=True)
    bad = deep / "not_a_model.pt2"
    bad.write_text("this is not a zip archive")
    window.open_file(bad)
    assert window.wait_settled()
    qtbot.waitUntil(lambda: bool(window.reporter.dialogs), timeout=5000)
    box = window.reporter.dialogs[-1]
    label = box.findChild(QLabel, "qt_msgbox_informativelabel")
    assert str(bad) in label.text()
    assert label.width() >= label.fontMetrics().horizontalAdvance(str(bad)), (label.width(), str(bad))
    window.reporter.dismiss_all()
    shutil.rmtree(short)


# ---------------------------------------------------------------------------------- 13
def test_counts_agree_or_say_what_they_count(window):
    open_model(window, TINY_CNN)
    conv = window.doc.conversion
    records = conv.result.records
    ops_column = [window.passes.model.index(i, 6).data() for i in range(len(records))]
    # the ATen header and the first pass count the same operators
    aten_ops = window.aten_panel.info.text().split()[0]
    assert aten_ops == ops_column[0], (aten_ops, ops_column[0])
    assert "operators" in window.aten_panel.info.toolTip() and "weights" in window.aten_panel.info.toolTip()
    assert "operators" in window.passes.model.headerData(6, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
    # the ncnn header counts layers as the status bar does
    window.show_right("ncnn")
    _settle(window)
    layers = conv.result.layer_count
    assert window.right_panel.info.text().startswith(f"{layers} layers"), window.right_panel.info.text()
    assert f"{layers} ncnn layers" in window.status_label.text()
    # a pass's graph counts what the Passes table lists for it
    for i in (3, len(records) // 2):
        window.passes.select_pass(i)
        _settle(window)
        shown = window.right_panel.info.text().split()[0]
        assert shown == ops_column[i], (records[i].name, shown, ops_column[i])
        tip = window.passes.model.index(i, 6).data(Qt.ItemDataRole.ToolTipRole)
        assert "graph nodes" in tip and "weights" in tip


# ---------------------------------------------------------------------------------- 10
def _wide_model(tmp_path):
    torch = pytest.importorskip("torch")
    from torch import nn

    from tests.gui import studio_models as models

    class Branches(nn.Module):
        def __init__(self):
            super().__init__()
            self.branch = nn.ModuleList(nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, 1))
                                        for _ in range(10))

        def forward(self, x):
            out = x
            for b in self.branch:
                out = out + b(x)
            return out

    class Wide(nn.Module):
        """A Swin-like first screen: a narrow stem, then a block as wide as ten branches, both in
        one ``features`` module whose label sits at the far left."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), Branches())

        def forward(self, x):
            return self.features(x)

    return models.export(Wide(), (torch.randn(1, 3, 8, 8),), tmp_path / "wide.pt2")


def _dark_pixels(img, x0: int, y0: int, x1: int, y1: int) -> int:
    """Pixels dark enough to be text (light theme) in a rectangle of an image."""
    dpr = img.devicePixelRatio()
    return sum(img.pixelColor(int(x * dpr), int(y * dpr)).lightness() < 110
               for x in range(max(x0, 0), x1) for y in range(max(y0, 0), y1))


def test_a_wide_graph_shows_the_labels_of_boxes_cut_by_the_left_edge(window, tmp_path):
    open_model(window, _wide_model(tmp_path))
    _settle(window)
    view = window.aten_panel.view
    p = window.aten_panel.scene.layout
    vis = view.mapToScene(view.viewport().rect()).boundingRect()
    assert p.width > vis.width(), "the graph must be wider than the view for this test"
    # the first view, and the view scrolled to the far right
    for step in ("first view", "scrolled right"):
        vis = view.mapToScene(view.viewport().rect()).boundingRect()
        cut = [gid for gid in p.expanded if p.boxes[gid][0] < vis.left() < p.boxes[gid][2] - 250
               and vis.top() <= p.boxes[gid][1] < vis.bottom() - 30]  # cut, with room left for a label
        img = view.viewport().grab().toImage()
        for gid in cut:
            top = view.mapFromScene(vis.left(), p.boxes[gid][1]).y()
            # where the label would be at the view's left edge: text, not an empty frame
            assert _dark_pixels(img, 4, top + 4, 90, top + 20) >= 15, (step, window.aten_panel.tree.groups[gid].path)
        for gid, rect in view.label_rects().items():  # no label starts left of the view
            assert vis.left() <= rect.left(), (step, gid, rect, vis)
        bar = view.horizontalScrollBar()
        bar.setValue(bar.maximum())
        QApplication.processEvents()
    assert cut, "scrolled to the right, some box must cross the left edge"


# ---------------------------------------------------------------------------------- 18
@pytest.mark.slow
def test_fit_on_an_8500_node_graph_gives_a_usable_zoom(panel, qtbot):
    big = display_graph(synthetic_graph(8_500), "aten")
    with qtbot.waitSignal(panel.layoutReady, timeout=120_000):
        panel.show_graph(big)
    with qtbot.waitSignal(panel.layoutReady, timeout=300_000):
        panel.expand_all()
    panel.view.setFocus()
    QTest.keyClick(panel.view, Qt.Key.Key_F)
    view = panel.view
    assert view.zoom >= 0.05, view.zoom
    assert panel.zoom_label.text() not in ("0%", "0.0%"), panel.zoom_label.text()
    vis = view.mapToScene(view.viewport().rect()).boundingRect()
    # not a one-pixel line: many nodes in view, each still a few pixels wide
    in_view = [i for i, (x, y) in panel.scene.layout.nodes.items() if vis.contains(x, y)]
    assert len(in_view) >= 50
    assert min(panel.scene.sizes[i][0] for i in in_view) * view.zoom >= 3
    # a small graph still fits whole
    panel.collapse_all()
    qtbot.waitUntil(lambda: not panel.busy, timeout=60_000)
    QTest.keyClick(panel.view, Qt.Key.Key_F)
    vis = view.mapToScene(view.viewport().rect()).boundingRect()
    assert vis.contains(panel.scene.sceneRect().adjusted(20, 20, -20, -20))
