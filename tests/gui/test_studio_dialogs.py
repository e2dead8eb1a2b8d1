"""The convert dialog (options, dynamic dims), tooltips, and where the window starts."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from tests.gui.conftest import TINY_CNN, open_model
from gui.app import _initial_model
from gui.document import default_sample


@pytest.mark.torch
def test_convert_dialog_binds_dynamic_dims_and_turns_fp16_off(window, exported, qtbot):
    path = exported("dynamic_batch")
    open_model(window, path)
    sig = window.signature.group_texts()
    dyn = next(k for k in sig if k.startswith("Dynamic dimensions"))
    assert dyn == "Dynamic dimensions (1)"
    sym = sig[dyn][0]
    x_shape = window.aten_panel.graph.node("x").detail
    assert x_shape.startswith(sym)  # the batch dim is shown as its symbol
    dlg = window.convert_dialog()
    assert dlg.isVisible() and dlg.shapes.isEnabled()
    assert f"{sym} in [1, 8]" in dlg.inputs.text()  # the symbol's range is shown next to the field
    ok = dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
    dlg.shapes.setText("1,3,16,16")
    ok.click()
    assert dlg.isVisible() and dlg.error.text()  # no brackets: refused with the parser's message
    dlg.shapes.setText("[4,3,16,16]")
    dlg.fp16.setChecked(False)
    ok.click()
    assert not dlg.isVisible()
    assert window.wait_settled()
    conv = window.doc.conversion
    assert conv.options.fp16 is False and conv.options.input_shapes == [[4, 3, 16, 16]]
    assert window.settings.get("convert/fp16", True, bool) is False


@pytest.mark.torch
def test_signature_shows_size_expressions_as_written(window, exported):
    """An input exported as multiples of 8 (``8*h``): its shape reads ``[1, 3, 8*s0, 8*s1]``, not
    sympy's ``Mul(Integer(8), Symbol('s0', ...))``."""
    open_model(window, exported("dynamic_size"))
    model = window.signature.model
    inputs = next(model.item(r, 0) for r in range(model.rowCount()) if model.item(r, 0).text().startswith("Inputs"))
    shape = inputs.child(0, 3).text()
    assert shape.startswith("[1, 3, 8*s") and "Mul" not in shape and "Integer" not in shape, shape
    outputs = next(model.item(r, 0) for r in range(model.rowCount()) if model.item(r, 0).text().startswith("Outputs"))
    assert "Symbol" not in outputs.child(0, 3).text()


def test_convert_dialog_reports_a_missing_plugin(window, qtbot, tmp_path):
    open_model(window, TINY_CNN)
    dlg = window.convert_dialog()
    assert not dlg.shapes.isEnabled()  # every dim is static
    dlg.plugins.setText(str(tmp_path / "nowhere.py"))
    dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    assert dlg.isVisible() and "nowhere.py" in dlg.error.text()
    dlg.reject()


def test_node_and_edge_tooltips_name_shapes_and_dtypes(window):
    open_model(window, TINY_CNN)
    panel = window.aten_panel
    node = panel.scene.item("conv2d")
    text = panel.view._tooltip_at(node.sceneBoundingRect().center())
    assert "aten.conv2d.default" in text and "1×16×32×32" in text and "stem.0" in text
    edge = next(e for e in panel.scene.edges if panel.graph.nodes[e.edge.src].name == "conv2d")
    mid = edge.path().pointAtPercent(0.5)
    text = panel.view._tooltip_at(mid)
    assert edge.edge.operand in text and "[1, 16, 32, 32]".replace(", ", "×").strip("[]") in text and "f32" in text


def test_first_start_opens_the_sample_then_the_last_file(settings, tmp_path):
    fresh = type(settings).at(tmp_path / "fresh.ini")
    assert fresh.first_run
    assert _initial_model(fresh, None) == str(default_sample())
    assert not fresh.first_run
    fresh.add_recent(str(tmp_path / "gone.pt2"))  # missing files are skipped
    fresh.add_recent(str(TINY_CNN))
    fresh.add_recent(str(tmp_path / "gone.pt2"))
    assert _initial_model(fresh, None) == str(TINY_CNN)
    assert _initial_model(fresh, "explicit.pt2") == "explicit.pt2"
