"""Verify in the Studio, driven like a user would: a 20+-layer CNN exported with torch at test
time, converted, then Model ▸ Verify — real torch and ncnn runs in the window's worker, real
widgets. A converter plug-in loaded through the Convert dialog mis-lowers one relu: that layer
is flagged, selected, scrolled to and shown in the inspector in both views, in the error colour;
the plot and the table pick layers; without ncnn the action says what to install and nothing
else changes."""
from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialogButtonBox

from tests.gui.conftest import open_model

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from engine.verify.result import DIVERGENT, INHERITED, OK  # noqa: E402
from tests.engine.verify.models import BROKEN_RELU, RELU_AS_SIGMOID, deep_cnn, export, write_plugin  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.ncnn]


@pytest.fixture(scope="session")
def cnn_pt2(tmp_path_factory):
    """The verify tests' 20+-layer CNN (residual blocks, pooling, squeeze-excite, concat,
    hardswish, relu6, linear head) saved as a .pt2 with its sample input."""
    torch.manual_seed(1)
    return export(deep_cnn(), [torch.randn(1, 3, 16, 16)], tmp_path_factory.mktemp("verify_gui") / "cnn.pt2")


@pytest.fixture
def broken(window, cnn_pt2, tmp_path):
    """The CNN converted with a plug-in that lowers one relu to sigmoid, then verified: the run."""
    plugin = write_plugin(tmp_path / "relu_as_sigmoid.py", RELU_AS_SIGMOID)
    open_model(window, cnn_pt2)
    _convert_with_plugin(window, plugin)
    _run_verify(window)
    return window.verifier.run


def _verify_action(window):
    acts = [a for a in window.actions.toolbar.actions() if a.objectName() == "verifyAction"]
    assert len(acts) == 1, "Verify is not in the toolbar"
    return acts[0]


def _run_verify(window) -> None:
    _verify_action(window).trigger()
    assert window.wait_settled(), "verification did not finish"
    assert window.verifier.run is not None, window.reporter.history


def _visible(panel, names) -> bool:
    view = panel.view
    area = view.mapToScene(view.viewport().rect()).boundingRect()
    return all(area.intersects(panel.scene.item(n).sceneBoundingRect()) for n in names)


def _convert_with_plugin(window, plugin) -> None:
    """Model ▸ Convert with Options: fp32 weights and the plug-in, as a user would."""
    dlg = window.convert_dialog()
    dlg.fp16.setChecked(False)
    dlg.plugins.setText(str(plugin))
    dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    assert window.wait_settled()
    assert [str(p) for p in window.doc.conversion.options.converters] == [str(plugin)]


def _pixel(panel, scene_point: QPointF):
    view = panel.view
    img = view.viewport().grab().toImage()
    p = view.mapFromScene(scene_point)
    dpr = img.devicePixelRatio()
    return img.pixelColor(int(p.x() * dpr), int(p.y() * dpr))


def test_verify_action_is_in_the_menu_toolbar_and_has_a_shortcut(window):
    a = _verify_action(window)
    assert a.shortcut() == QKeySequence("Ctrl+Shift+V")
    model_menu = next(m.menu() for m in window.menuBar().actions() if m.text() == "&Model")
    assert a in model_menu.actions()
    assert not a.isEnabled()  # nothing open yet
    assert window.docks["verify"].widget() is window.verify_panel


def test_verify_a_correct_cnn_plots_every_layer_and_flags_nothing(window, cnn_pt2):
    window.settings.set("convert/auto", False)
    open_model(window, cnn_pt2)
    assert window.doc.conversion is None
    _run_verify(window)  # converts first, then verifies
    run = window.verifier.run
    assert run.conversion is window.doc.conversion
    layers = run.result.layers
    assert len(layers) >= 20 and run.result.ok and run.first_divergent is None
    assert all(r.status == OK for r in layers), [(r.layer, r.status) for r in layers if r.status != OK]

    panel = window.verify_panel
    plot = panel.plot
    assert len(plot.points.data) == len(layers)  # one point per layer
    left = plot.plot.getAxis("left")
    assert left.logMode and left.labelString().find("x0.") < 0  # log axis in plain powers of ten
    assert sorted(plot.points.data["x"]) == list(range(len(layers)))
    assert panel.model.rowCount() == len(layers)
    assert "within tolerance" in panel.summary.text()
    assert not plot.first_line.isVisible()

    scale = window.verifier.scale
    for gp in (window.aten_panel, window.right_panel):
        assert gp.scene.flagged_names == []
        tints = gp.scene.tints
        assert tints and window.verifier.legends["aten" if gp is window.aten_panel else "right"].isVisible()
        verdicts = run.verdicts(gp.graph)
        for name, v in verdicts.items():
            value = v.value()
            assert tints[name] == (scale.neutral(gp.scene.theme) if value is None
                                   else scale.fill(value, gp.scene.theme))
            assert value is None or scale.position(value) < scale.tolerance_position, (name, value)
    assert window.right_panel.graph.vocabulary == "pnnx"  # nothing to point at: the view stays
    pnnx_ops = [n.name for n in window.right_panel.graph.nodes if n.kind == "op"]
    assert set(pnnx_ops) <= set(window.right_panel.scene.tints)  # every pnnx op coloured
    assert window.docks["verify"].isVisible()


def test_misconverted_relu_is_flagged_selected_and_focused_in_both_views(window, broken):
    run = broken
    first = run.first_divergent
    assert first is not None and BROKEN_RELU in first.aten_nodes, run.result.to_dict()["first_divergent"]
    assert first.status == DIVERGENT and first.module == "block2.conv1"
    assert [r.layer for r in run.result.layers if r.blamed] == [first.layer]
    assert all(r.status == OK for r in run.result.layers[:first.index])

    aten, right = window.aten_panel, window.right_panel
    assert right.graph.vocabulary == "ncnn"  # the layers are ncnn layers: shown on the right
    assert right.scene.flagged_names == [first.layer]
    assert set(aten.scene.flagged_names) == set(first.aten_nodes)
    assert right.scene.selected_names() == [first.layer]
    assert set(aten.scene.selected_names()) == set(first.aten_nodes)
    assert _visible(right, [first.layer]) and _visible(aten, first.aten_nodes)

    # its colour is the error colour: the scale's colour of its error, at the red end, as painted
    scale = window.verifier.scale
    tint = right.scene.tints[first.layer]
    assert tint == scale.fill(first.max_rel, right.scene.theme)
    assert scale.position(first.max_rel) > scale.tolerance_position
    item = right.scene.item(first.layer)
    assert item.tint == tint and item.flagged
    r = item.sceneBoundingRect()
    got = _pixel(right, QPointF(r.left() + 8, r.center().y() + 3))
    assert max(abs(got.red() - tint.red()), abs(got.green() - tint.green()), abs(got.blue() - tint.blue())) <= 8, \
        (got.name(), tint.name())
    for name in first.aten_nodes:
        assert aten.scene.tints[name] == scale.fill(first.max_rel, aten.scene.theme)
    # downstream layers inherit the error: coloured beyond tolerance, not flagged
    later = next(x for x in run.result.layers[first.index + 1:] if x.status == INHERITED)
    assert scale.position(later.max_rel) > scale.tolerance_position and later.layer not in right.scene.flagged_names

    # inspector: the layer, its ATen nodes, module and source
    assert window.inspector.current == ("ncnn", first.layer)
    text = window.inspector.text()
    assert all(n in text for n in first.aten_nodes) and "block2.conv1" in text and "models.py:" in text
    # dock: the verdict names it; table row and plot point picked
    panel = window.verify_panel
    assert first.layer in panel.summary.text() and "block2.conv1" in panel.summary.text()
    assert panel.current_layer() == first.layer and panel.plot.selected == first.index
    assert panel.plot.first_line.isVisible() and panel.plot.first_line.value() == first.index

    # the table sorts by error: the worst layer first
    panel.table.sortByColumn(4, Qt.SortOrder.DescendingOrder)
    top = panel.proxy.index(0, 1).data()
    assert top == max(run.result.layers, key=lambda x: x.max_rel or 0).layer
    panel.problems_only.setChecked(True)
    assert panel.proxy.rowCount() == sum(1 for x in run.result.layers if x.status not in (OK, "not_compared"))


def test_clicking_a_plot_point_selects_that_layer_and_hovering_describes_it(window, broken):
    run = broken
    plot = window.verify_panel.plot
    target = next(x for x in run.result.layers if x.type == "Pooling")
    pos = plot.point_widget_pos(target.index)
    assert plot.nearest(plot.point_scene_pos(target.index), 1.0) == target.index

    QTest.mouseMove(plot.plot.viewport(), pos)
    assert plot.hovered == target.index
    readout = plot.readout.text()
    assert target.layer in readout and "Pooling" in readout and "max rel" in readout

    QTest.mouseClick(plot.plot.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, pos)
    right, aten = window.right_panel, window.aten_panel
    assert right.scene.selected_names() == [target.layer]
    assert set(aten.scene.selected_names()) == set(target.aten_nodes)
    assert _visible(right, [target.layer])
    assert window.inspector.current == ("ncnn", target.layer)
    assert window.verify_panel.current_layer() == target.layer and plot.selected == target.index

    # a click far from every point selects nothing new
    QTest.mouseClick(plot.plot.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, QPoint(2, 2))
    assert right.scene.selected_names() == [target.layer]

    # a table row selects its layer too
    panel = window.verify_panel
    other = run.result.layers[3]
    panel.table.setCurrentIndex(panel.proxy.mapFromSource(panel.model.index(other.index, 0)))
    assert right.scene.selected_names() == [other.layer] and plot.selected == other.index


def test_converting_again_drops_the_colours_and_own_error_recolours(window, broken, qtbot):
    run = broken
    first = run.first_divergent
    right = window.right_panel
    later = next(x for x in run.result.layers[first.index + 1:] if x.status == INHERITED and x.own is not None)
    scale = window.verifier.scale
    panel = window.verify_panel
    panel.measure_box.setCurrentIndex(panel.measure_box.findData("own"))  # each layer alone
    assert right.scene.tints[later.layer] == scale.fill(later.own.max_rel, right.scene.theme)
    assert scale.position(later.own.max_rel) < scale.tolerance_position  # fine by itself
    panel.colour.setChecked(False)
    assert right.scene.tints == {} and right.scene.flagged_names == []
    assert not window.verifier.legends["right"].isVisible()
    panel.colour.setChecked(True)
    assert right.scene.flagged_names == [first.layer]
    window.set_scheme("dark")  # fills follow the theme: dark fills under light text
    try:
        qtbot.waitUntil(lambda: right.scene.theme.dark and right.scene.tints[first.layer] == scale.fill(
            first.max_rel, right.scene.theme))
        assert right.scene.tints[first.layer].lightness() < 128
    finally:
        window.set_scheme("system")

    window.convert()  # the same model converted again: the result no longer applies
    assert window.wait_settled()
    assert window.verifier.run is None and panel.model.rowCount() == 0
    assert window.right_panel.scene.tints == {} and window.aten_panel.scene.tints == {}
    assert "converted again" in panel.summary.text()


def test_verify_waits_for_the_conversion_and_says_when_it_failed(window, cnn_pt2, tmp_path):
    bad = tmp_path / "bad_plugin.py"
    bad.write_text("this is not python\n")
    window.settings.set("convert/auto", False)
    window.settings.set("convert/plugins", str(bad))
    open_model(window, cnn_pt2)
    _verify_action(window).trigger()
    assert window.wait_settled()
    assert window.verifier.run is None and window.doc.conversion is None
    assert any(title == "Conversion failed" for title, _m in window.reporter.history), window.reporter.history
    assert "conversion failed" in window.verify_panel.summary.text()
    assert not window.verifier._after_convert  # a later conversion does not start a verification
    window.reporter.dismiss_all()


def test_stop_cancels_a_verification(window, cnn_pt2):
    open_model(window, cnn_pt2)
    task = window.verifier.verify()
    assert task is not None
    window.cancel_tasks()
    assert window.wait_settled()
    assert task.state == "cancelled" and window.verifier.run is None
    assert "stopped" in window.verify_panel.summary.text()
    assert window.reporter.history == []


def test_without_ncnn_verify_says_what_to_install_and_the_rest_works(window, cnn_pt2, monkeypatch, tmp_path):
    open_model(window, cnn_pt2)
    monkeypatch.setitem(sys.modules, "ncnn", None)  # as if the verify extra were not installed
    _verify_action(window).trigger()
    assert window.wait_settled()
    assert window.verifier.run is None
    title, message = window.reporter.history[-1]
    assert title == "Verify needs torch and ncnn"
    assert "torch and ncnn" in message and "ncnn is not" in message
    assert "pip install ncnn torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu" in message
    assert "pt2ncnn[verify]" not in message  # that would pull torch's CUDA build
    assert "Traceback" not in message
    assert "pip install" in window.verify_panel.summary.text()
    assert window.right_panel.scene.tints == {} and window.aten_panel.scene.tints == {}
    window.reporter.dismiss_all()
    # everything else keeps working: convert and export
    window.convert()
    assert window.wait_settled() and window.doc.conversion.result.ok
    window.export_to(str(tmp_path / "cnn.ncnn.param"))
    assert window.wait_settled()
    assert (tmp_path / "cnn.ncnn.param").exists() and (tmp_path / "cnn.ncnn.bin").exists()


def test_headline_and_cli_agree_when_the_model_masks_a_wrong_layer(window, tmp_path):
    """A plug-in mis-lowers a relu whose error a clamp hides from the output: the CLI exits 1
    naming the layer, and the Studio's headline (status bar and Verify panel) names the same
    layer as wrong — never "every output within tolerance"."""
    from engine.cli.main import main
    from tests.engine.verify.models import Clamped

    torch.manual_seed(0)
    pt2 = export(Clamped(), [torch.randn(1, 3, 8, 8)], tmp_path / "clamped.pt2")
    plugin = write_plugin(tmp_path / "p.py", RELU_AS_SIGMOID.replace(BROKEN_RELU, "relu"))
    assert main(["verify", str(pt2), "--fp16", "0", "--converters", str(plugin)]) == 1
    open_model(window, pt2)
    _convert_with_plugin(window, plugin)
    _run_verify(window)
    r = window.verifier.run.result
    assert r.outputs_ok and not r.ok and r.first_divergent.layer == "conv2d"
    assert "first divergent layer conv2d (Convolution)" in window.status_label.text()
    summary = window.verify_panel.summary.text()
    assert "First divergent layer" in summary and "conv2d" in summary and "Every output within" not in summary


def test_fp16_drift_is_no_divergent_layer_in_cli_and_studio(window, tmp_path, capsys):
    """fp16 weights in a deep network: every layer is right by itself but the rounding adds up
    past the output tolerance. Verify says so and exits 0 (CLI) / shows ✓ (Studio) — it is not a
    conversion error — and the same model with fp32 weights passes outright."""
    from engine.cli.main import main
    from tests.engine.verify.models import DeepTanh

    pt2 = export(DeepTanh(), [torch.randn(1, 64)], tmp_path / "deep.pt2")
    assert main(["verify", str(pt2)]) == 0
    out = capsys.readouterr().out
    assert "no divergent layer" in out and "fp16 rounding of the weights adds up" in out
    assert main(["verify", str(pt2), "--fp16", "0"]) == 0
    assert "every compared layer is within tolerance" in capsys.readouterr().out
    open_model(window, pt2)
    _run_verify(window)
    r = window.verifier.run.result
    assert r.fp16 and not r.outputs_ok and r.drift and r.ok and r.first_divergent is None
    assert "outputs drift as rounding adds up" in window.status_label.text()
    summary = window.verify_panel.summary.text()
    assert "No divergent layer" in summary and "fp16 rounding" in summary and "Outputs beyond" not in summary

