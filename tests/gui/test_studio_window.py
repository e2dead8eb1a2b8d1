"""The main window driven like a user would: real widgets, real engine, real .pt2 files."""
from __future__ import annotations

import os

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtTest import QTest

import engine
from tests.gui.conftest import TINY_CNN, TINY_TRANSFORMER, open_model
from engine.reader.tensors import to_float32
from gui.panels.weights import HIST_BINS


def _visible(panel, names) -> bool:
    """Every named node is inside the panel's viewport."""
    view = panel.view
    area = view.mapToScene(view.viewport().rect()).boundingRect()
    return all(area.intersects(panel.scene.item(n).sceneBoundingRect()) for n in names)


def test_open_populates_both_views(window, qtbot):
    open_model(window, TINY_CNN)
    aten, right = window.aten_panel, window.right_panel
    ep = window.doc.program
    op_nodes = [n for n in aten.graph.nodes if n.kind == "op"]
    assert len(op_nodes) == sum(1 for n in ep.nodes)  # one box per graph node
    assert len(aten.scene.nodes) == len(aten.graph.nodes) > 0
    assert right.graph is not None and right.graph.vocabulary == window.right_key == "pnnx"
    assert {n.type for n in right.graph.nodes} >= {"pnnx.Input", "nn.Conv2d", "pnnx.Output"}
    assert len(right.scene.nodes) == len(right.graph.nodes)
    assert len(right.scene.edges) == len(right.graph.edges) > 0
    assert window.tensors.model.rowCount() == 0  # behind the Passes tab: not listed yet
    window.docks["tensors"].raise_()  # listed when the Tensors tab comes to the front
    qtbot.waitUntil(lambda: window.tensors.isVisible())
    assert window.tensors.model.rowCount() == len(ep.tensors.entries()) + len(ep.signature.user_inputs) + len(
        ep.signature.user_outputs)
    assert "x" in window.signature.group_texts()["Inputs (1)"]
    assert TINY_CNN.name in window.windowTitle()
    assert window.settings.recent_files()[0] == str(TINY_CNN)


def test_selecting_an_aten_node_highlights_what_it_became(window):
    open_model(window, TINY_CNN)
    result = window.doc.conversion.result
    right = window.right_panel

    def became(node: str, graph) -> set[str]:
        return {op.name for op in graph.ops if node in op.provenance.nodes}

    # one-to-one in the pnnx graph, which keeps the BatchNorm exact
    window.aten_panel.select(["batch_norm"], emit=True)
    linked = {right.scene.nodes[i].node.name for i in right.scene.linked_indices}
    assert linked == became("batch_norm", result.pnnx) and len(linked) == 1
    assert window.inspector.current == ("aten", "batch_norm")
    assert _visible(right, linked)

    # many-to-one in the ncnn graph: batch_norm was folded into the convolution
    window.show_right("ncnn")
    assert window.wait_settled()
    window.aten_panel.select(["batch_norm"], emit=True)
    linked = {right.scene.nodes[i].node.name for i in right.scene.linked_indices}
    assert linked == became("batch_norm", result.ncnn) == {"conv2d"}
    assert _visible(right, linked)

    # one-to-many in the ncnn graph: conv2d_1 became a depthwise convolution and a Split
    window.aten_panel.select(["conv2d_1"], emit=True)
    linked = {right.scene.nodes[i].node.name for i in right.scene.linked_indices}
    assert linked == became("conv2d_1", result.ncnn)
    assert len(linked) >= 2

    # and back: an ncnn layer → every ATen node fused into it
    right.select(["conv2d"], emit=True)
    aten_linked = {window.aten_panel.scene.nodes[i].node.name for i in window.aten_panel.scene.linked_indices}
    ncnn_conv = next(op for op in result.ncnn.ops if op.name == "conv2d")
    assert aten_linked == set(ncnn_conv.provenance.nodes) == {"conv2d", "batch_norm", "hardswish"}
    assert window.aten_panel.scene.selected_names() == []
    assert _visible(window.aten_panel, aten_linked)


def test_a_weight_selects_its_tensor_and_links_to_its_consumer(window):
    open_model(window, TINY_CNN)
    window.aten_panel.select(["p_stem_0_weight"], emit=True)
    row = window.tensors.table.currentIndex()
    assert row.isValid() and window.tensors.proxy.index(row.row(), 1).data() == "stem.0.weight"
    linked = {window.right_panel.scene.nodes[i].node.name for i in window.right_panel.scene.linked_indices}
    assert linked == {"conv2d"}


def test_search_lists_results_and_steps_through_them(window, qtbot):
    open_model(window, TINY_CNN)
    window.find()
    qtbot.keyClicks(window.search.edit, "hardswish")
    hits = window.search.run()
    aten_hits = [h.name for h in hits if h.view == "aten"]
    expected = [n.name for n in window.aten_panel.graph.nodes if "hardswish" in (n.type + n.name).lower()]
    assert aten_hits == expected and len(expected) >= 2
    assert any(h.view == "pnnx" and h.type == "F.hardswish" for h in hits)
    window.search.next()
    first = hits[0]
    panel = window.aten_panel if first.view == "aten" else window.right_panel
    assert panel.scene.selected_names() == [first.name]
    assert window.search.count.text() == f"1 of {len(hits)}"
    window.search.next()
    window.search.previous()
    assert window.search.count.text() == f"1 of {len(hits)}"
    window.search.previous()  # wraps around
    assert window.search.count.text() == f"{len(hits)} of {len(hits)}"
    # a module-path search only finds nodes of that module
    window.search.edit.setText("module:blocks.0.se type:conv")
    hits = window.search.run()
    assert hits and all(h.module.startswith("blocks.0.se") and "conv" in h.type.lower() for h in hits)


def test_tensor_table_sorts_and_filters(window):
    open_model(window, TINY_CNN)
    window.docks["tensors"].raise_()  # the Tensors tab to the front, as a user clicks it
    t = window.tensors
    entries = window.doc.program.tensors.entries()
    t.table.sortByColumn(5, Qt.SortOrder.DescendingOrder)  # bytes
    biggest = max(entries, key=lambda e: e.nbytes)
    assert t.proxy.index(0, 1).data() == biggest.fqn
    t.table.sortByColumn(1, Qt.SortOrder.AscendingOrder)  # name
    names = t.visible_names()
    assert names == sorted(names, key=str.lower)
    t.filter.setText("running_var")
    assert t.visible_names() == sorted((e.fqn for e in entries if "running_var" in e.fqn), key=str.lower)
    t.filter.clear()
    t.kind.setCurrentIndex(t.kind.findData("buffer"))
    assert set(t.visible_names()) == {e.fqn for e in entries if e.kind == "buffer"}


def test_histogram_shows_the_tensors_data(window, qtbot):
    open_model(window, TINY_CNN)
    name = "blocks.1.expand.0.weight"
    assert window.tensors.select_name(name)
    qtbot.waitUntil(lambda: window.weights.data is not None and window.weights.data.name == name, timeout=10_000)
    ep = window.doc.program
    values = to_float32(ep.tensor(name), ep.tensor_dtype(name)).ravel()
    counts, edges = np.histogram(values, bins=HIST_BINS, range=(values.min(), values.max()))
    x, y = window.weights.hist_item.getData()
    np.testing.assert_array_equal(y, counts)
    np.testing.assert_allclose(x, edges, rtol=1e-5)
    assert window.weights.stats_labels["elements"].text() == f"{values.size:,}"
    assert float(window.weights.stats_labels["min"].text()) == pytest.approx(values.min(), rel=1e-3)
    img = window.weights.image  # a 4-D conv kernel is shown as a grid of kernels
    assert img is not None and np.nanmax(img) == pytest.approx(values.max())


def test_convert_lists_passes_and_shows_a_pass_diff(window, qtbot):
    open_model(window, TINY_CNN)
    records = window.doc.conversion.result.records
    passes = window.passes
    assert passes.model.rowCount() == len(records)
    changed = next(r for r in records[1:] if r.diff.removed)
    with qtbot.waitSignal(passes.passSelected) as sig:
        assert passes.select_pass(changed.index)
    assert sig.args == [changed.index]
    assert window.wait_settled()
    d = passes.diff.aligned
    assert d is not None and d.counts["removed"] + d.counts["changed"] > 0
    assert passes.diff.left.toPlainText() and passes.diff.right.toPlainText()
    assert all(e.before.split()[1] in passes.diff.left.toPlainText() for e in changed.diff.removed)
    # the right view shows the snapshot, removed operators ghosted and marked
    right = window.right_panel
    assert window.pass_view is not None and window.pass_view.index == changed.index
    marks = right.scene.marks
    assert {e.name for e in changed.diff.removed} <= {n for n, m in marks.items() if m == "removed"}
    assert all(right.graph.node(e.name).ghost for e in changed.diff.removed)
    # arrow keys step to the next pass
    passes.table.setFocus()
    with qtbot.waitSignal(passes.passSelected) as sig:
        QTest.keyClick(passes.table, Qt.Key.Key_Down)
    assert sig.args == [changed.index + 1]
    # hiding passes that changed nothing
    unchanged = sum(1 for r in records[1:] if r.diff.empty)
    passes.hide_unchanged.setChecked(True)
    assert passes.proxy.rowCount() == len(records) - unchanged


@pytest.mark.torch
def test_unsupported_op_is_a_problem_and_a_red_node(window, exported, qtbot):
    path = exported("unsupported")
    open_model(window, path)
    result = window.doc.conversion.result
    assert not result.ok
    rows = window.problems.model.items
    det = [d for d in rows if d.op == "aten.linalg_det.default"]
    assert det and det[0].severity == "error" and "linalg_det" in det[0].node
    aten_node = window.aten_panel.graph.node(det[0].node)
    assert aten_node.problem == det[0].reason
    pnnx_node = window.right_panel.graph.node(det[0].operator)
    assert pnnx_node is not None and pnnx_node.problem
    item = window.aten_panel.scene.item(det[0].node)
    assert item._fill() == window.aten_panel.scene.theme.accent("error_fill")
    assert "red" not in window.problems.summary.text() and "1</b> error" in window.problems.summary.text()
    # clicking the problem selects the node in the ATen graph and scrolls to it
    window.aten_panel.select([])
    row = window.problems.model.items.index(det[0])
    rect = window.problems.table.visualRect(window.problems.model.index(row, 3))
    QTest.mouseClick(window.problems.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert window.aten_panel.scene.selected_names() == [det[0].node]
    assert _visible(window.aten_panel, [det[0].node])
    assert det[0].reason in window.inspector.text()


def test_a_bad_file_shows_the_readers_message_and_keeps_the_model(window, tmp_path, qtbot):
    open_model(window, TINY_CNN)
    bad = tmp_path / "broken.pt2"
    bad.write_bytes(b"this is not a zip archive at all" * 4)
    with pytest.raises(engine.PT2FormatError) as err:
        engine.load(bad)
    window.open_file(bad)
    assert window.wait_settled()
    qtbot.waitUntil(lambda: bool(window.reporter.dialogs), timeout=5000)
    box = window.reporter.dialogs[-1]
    assert box.isVisible()
    assert box.informativeText() == str(err.value)
    assert box.detailedText() == ""  # a one-line message, no traceback
    assert os.path.samefile(window.doc.path, TINY_CNN)
    assert window.aten_panel.graph is not None and window.right_panel.graph is not None
    window.reporter.dismiss_all()
    qtbot.waitUntil(lambda: not window.reporter.dialogs, timeout=5000)
    window.aten_panel.select(["conv2d"], emit=True)  # still alive and working
    assert window.inspector.current == ("aten", "conv2d")


@pytest.mark.ncnn
@pytest.mark.torch
def test_export_writes_files_ncnn_loads_and_runs(window, tmp_path):
    ncnn = pytest.importorskip("ncnn")
    torch = pytest.importorskip("torch")
    open_model(window, TINY_CNN)
    assert window.doc.conversion.result.ok, window.doc.conversion.result.diagnostics
    task = window.export_to(str(tmp_path / "tiny.ncnn.param"), pnnx=True)
    assert window.wait_settled() and task.state == "done", task.error
    names = sorted(os.path.basename(f) for f in window.last_export)
    assert names == ["tiny.ncnn.bin", "tiny.ncnn.param", "tiny.pnnx.bin", "tiny.pnnx.param"]
    assert f"Exported {window.doc.conversion.result.layer_count} layers" in window.status_label.text()
    net = ncnn.Net()
    assert net.load_param(str(tmp_path / "tiny.ncnn.param")) == 0
    assert net.load_model(str(tmp_path / "tiny.ncnn.bin")) == 0
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(x[0]))
    ret, out = ex.extract("out0")
    assert ret == 0
    expected = torch.export.load(str(TINY_CNN)).module()(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(np.array(out).reshape(expected.shape), expected, atol=5e-3)


def test_drop_a_file_opens_it(window, qtbot):
    open_model(window, TINY_CNN)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(TINY_TRANSFORMER))])
    ev = QDropEvent(QPointF(200, 200), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                    Qt.KeyboardModifier.NoModifier)
    window.dropEvent(ev)
    assert window.wait_settled()
    assert os.path.samefile(window.doc.path, TINY_TRANSFORMER)
    assert any("linear" in n.type for n in window.aten_panel.graph.nodes)


def test_keyboard_walks_the_graph(window, qtbot):
    open_model(window, TINY_CNN)
    view = window.aten_panel.view
    view.setFocus()
    window.aten_panel.select(["conv2d"], emit=True)
    QTest.keyClick(view, Qt.Key.Key_Down)
    assert window.aten_panel.scene.selected_names() == ["batch_norm"]
    QTest.keyClick(view, Qt.Key.Key_Up)
    assert window.aten_panel.scene.selected_names() == ["conv2d"]
    QTest.keyClick(view, Qt.Key.Key_Escape)
    assert window.aten_panel.scene.selected_names() == []


def test_hide_parameters_and_click_selection(window, qtbot):
    open_model(window, TINY_CNN)
    window.actions.hide_params.setChecked(True)
    assert window.wait_settled()
    assert all(n.kind != "param" for n in window.aten_panel.graph.nodes)
    assert window.settings.get("view/hide_params", False, bool)
    # a click on a node selects it (in whichever level of detail)
    panel = window.aten_panel
    item = panel.scene.item("hardswish")
    panel.view.centerOn(item)
    pos = panel.view.mapFromScene(item.sceneBoundingRect().center())
    QTest.mouseClick(panel.view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert panel.scene.selected_names() == ["hardswish"]
    panel.view.fit()  # overview mode for a long graph
    pos = panel.view.mapFromScene(item.sceneBoundingRect().center())
    QTest.mouseClick(panel.view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))
    assert panel.scene.selected_names() == ["hardswish"]


def test_recent_files_and_window_state_are_saved(window, settings):
    open_model(window, TINY_TRANSFORMER)
    open_model(window, TINY_CNN)
    assert settings.recent_files()[:2] == [str(TINY_CNN), str(TINY_TRANSFORMER)]
    window.docks["tensors"].raise_()
    window.close()
    geometry, state = settings.window_state()
    assert geometry is not None and state is not None


def test_an_exception_in_a_slot_is_reported_and_the_app_keeps_running(window, qtbot):
    open_model(window, TINY_CNN)
    window.reporter.install_hooks()
    try:
        def boom():
            raise RuntimeError("a bug in a slot")

        window.aten_panel.nodeActivated.connect(boom)
        window.aten_panel.nodeActivated.emit("conv2d")
        qtbot.waitUntil(lambda: bool(window.reporter.dialogs), timeout=5000)
        assert window.reporter.history[-1] == ("Internal error", "RuntimeError: a bug in a slot")
        assert "Traceback" in window.reporter.dialogs[-1].detailedText()
    finally:
        window.reporter.uninstall_hooks()
    window.aten_panel.select(["conv2d"], emit=True)
    assert window.inspector.current == ("aten", "conv2d")


def test_theme_switch_recolours_the_graphs(window):
    open_model(window, TINY_CNN)
    window.set_scheme("dark")
    try:
        assert window.aten_panel.scene.theme.dark
        assert window.aten_panel.scene.backgroundBrush().color().lightness() < 80
    finally:
        window.set_scheme("light")
    assert not window.aten_panel.scene.theme.dark
