"""From a failing lowering to a working converter without leaving Studio: Problems ▸ Write a
converter… writes a plug-in for the node, saving it (as an editor does) converts the model
again, the model exports, and Verify rule checks the node's layer against PyTorch; a broken
plug-in is one Problems row with ``file:line`` and the previous conversion stays; unchecking a
plug-in in the Plug-ins panel converts without it. Real torch.export, real widgets, real ncnn."""
from __future__ import annotations

import os

import pytest
from PySide6.QtCore import Qt

from tests.gui.conftest import open_model

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from tests.gui import studio_models  # noqa: E402

HYPOT = "aten.hypot.default"
BODY = '    return ctx.emit("pnnx.Expression", [x, other], params={"expr": "sqrt(add(mul(@0,@0),mul(@1,@1)))"})'

#: a plug-in for the model's hypot node, written by hand; each breakage replaces ``marker`` and
#: says what Problems must show and on which line of the file
RULE = '''from engine.convert import aten_converter


def check(op, ctx):
    return None  # VALIDATOR


@aten_converter("aten.hypot.default", validator=check)
def hypot_rule(ctx, op):
    x, other = op.inputs
    return ctx.emit("pnnx.Expression", [x, other], params={"expr": "sqrt(add(mul(@0,@0),mul(@1,@1)))"})  # BODY
'''
BREAKAGES = {
    "syntax error": ("def hypot_rule(ctx, op):", "def hypot_rule(ctx, op)", "syntax error", 9),
    "validator raises": ("return None  # VALIDATOR", "return 1 / 0", "ZeroDivisionError", 5),
    "body raises": ("x, other = op.inputs", "x, other = op.inputs[5]", "IndexError", 10),
    # a wrong return is blamed on the rule: the line it is defined on
    "wrong return type": ("return ctx.emit(", "return 42 or ctx.emit(", "returned int", 8),
}


class HypotNet(torch.nn.Module):
    """conv → hypot(y, 2y + 1) → relu: hypot has no built-in converter."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(torch.hypot(y, 2 * y + 1))


@pytest.fixture(scope="module")
def hypot_pt2(tmp_path_factory):
    return studio_models.export(HypotNet(), (torch.randn(1, 3, 8, 8),), tmp_path_factory.mktemp("hypot") / "hypot.pt2")


@pytest.fixture
def studio(window, tmp_path):
    window.settings.set("plugins/dir", str(tmp_path / "rules"))
    return window


def save_as_editor(path, text: str) -> None:
    """Write ``path`` the way many editors save: a new file renamed over the old one."""
    tmp = f"{path}.swp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def hypot_node(window) -> str:
    return next(op.name for op in window.doc.aten.ops if op.type == HYPOT)


def wait_converted(qtbot, window, before, timeout=60_000):
    qtbot.waitUntil(lambda: window.doc.conversion is not before and not window.runner.busy, timeout=timeout)
    assert window.wait_settled()


def converted_with_rule(window, qtbot, pt2, tmp_path) -> str:
    """Open ``pt2``, add :data:`RULE` to the session as ``rules/hypot.py``, convert with it."""
    open_model(window, pt2)
    rules = tmp_path / "rules"
    rules.mkdir()
    path = str(rules / "hypot.py")
    save_as_editor(path, RULE)
    before = window.doc.conversion
    window.plugins.add(path)
    window.plugins.reconvert()
    wait_converted(qtbot, window, before)
    return path


def plugin_rows(window) -> list:
    return [d for d in window.problems.model.items if d.plugin]


def test_write_a_converter_save_it_reconvert_export_and_verify(studio, qtbot, hypot_pt2, tmp_path):
    window = studio
    open_model(window, hypot_pt2)
    first = window.doc.conversion
    assert [d.op for d in first.result.errors] == [HYPOT]
    node = hypot_node(window)
    assert window.aten_panel.graph.node(node).problem

    # Problems: select the node's row, click "Write a converter…"
    panel = window.problems
    row = next(i for i, d in enumerate(panel.model.items) if d.op == HYPOT)
    window.docks["problems"].raise_()
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton,
                     pos=panel.table.visualRect(panel.model.index(row, 3)).center())
    assert panel.write_action.isEnabled() and panel.write_button.text() == "Write a converter…"
    qtbot.mouseClick(panel.write_button, Qt.MouseButton.LeftButton)
    dlg = window.plugins.dialog
    assert dlg is not None and dlg.isVisible() and dlg.template == "pnnx"
    path = dlg.path.text()
    assert path == str(tmp_path / "rules" / "hypot_default.py")
    qtbot.mouseClick(dlg.write_button, Qt.MouseButton.LeftButton)

    # the file is written and opened in the built-in editor; as written it refuses the node
    # ("write me"): one Problems row naming the file and line, the first conversion kept
    qtbot.waitUntil(lambda: path in window.plugins.editors and bool(window.plugins.problems), timeout=60_000)
    assert window.wait_settled()
    editor = window.plugins.editors[path]
    text = editor.text.toPlainText()
    assert text == open(path, encoding="utf-8").read() and "Tensor self, Tensor other" in text
    [d] = plugin_rows(window)
    assert "write me" in d.reason and d.plugin.startswith(path + ":") and d.node == node
    assert window.doc.conversion is first

    # the editor's part: the body written, saved by renaming a new file over the old one
    placeholder = next(ln for ln in text.splitlines() if "write me" in ln)
    save_as_editor(path, text.replace(placeholder, BODY))
    wait_converted(qtbot, window, first)
    conv = window.doc.conversion
    assert conv.result.ok, conv.result.errors
    assert not window.problems.model.items and not window.aten_panel.graph.node(node).problem
    assert window.passes.model.records == conv.result.records  # the pass table shows the new run
    qtbot.waitUntil(lambda: editor.text.toPlainText() == open(path, encoding="utf-8").read())

    # the Plug-ins panel: the file, its rule, the node it converted
    tag = f"{path}::hypot_default"
    item = window.plugins_panel.rule_item(tag)
    assert item is not None and item.text(1) == HYPOT and item.text(2) == "100" and node in item.text(3)
    assert window.plugins_panel.file_item(path).checkState(0) == Qt.CheckState.Checked

    # export: the ncnn model, with the layer made by the rule
    out = tmp_path / "out"
    out.mkdir()
    window.export_to(str(out / "hypot.ncnn.param"))
    assert window.wait_settled()
    assert (out / "hypot.ncnn.param").exists() and (out / "hypot.ncnn.bin").exists()

    # Verify rule: the layers made from the node, alone on PyTorch's inputs, within tolerance
    window.plugins_panel.select(tag)
    qtbot.mouseClick(window.plugins_panel.verify_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tag in window.plugins.checks, timeout=180_000)
    check = window.plugins.checks[tag]
    assert check.ok and check.layers and all(node in r.aten_nodes for r in check.layers)
    assert check.worst is not None and check.worst <= check.rtol
    item = window.plugins_panel.rule_item(tag)
    assert "within tolerance" in item.text(4) and item.foreground(4).color().name() == "#2a9d4b"
    assert window.plugins.export_warning() == ""


def test_a_broken_plugin_is_one_problem_with_its_line_and_the_conversion_stays(studio, qtbot, hypot_pt2, tmp_path):
    window = studio
    path = converted_with_rule(window, qtbot, hypot_pt2, tmp_path)
    good = window.doc.conversion
    assert good.result.ok and not window.problems.model.items
    for what, (old, new, reason, line) in BREAKAGES.items():
        assert old in RULE
        save_as_editor(path, RULE.replace(old, new))
        qtbot.waitUntil(lambda r=reason: any(r in d.reason for d in plugin_rows(window)), timeout=60_000)
        assert window.wait_settled()
        rows = plugin_rows(window)
        assert len(rows) == 1, (what, rows)
        assert reason in rows[0].reason and rows[0].plugin == f"{path}:{line}", (what, rows[0])
        assert len(window.problems.model.items) == 1, what  # and nothing else
        assert window.doc.conversion is good, what  # the previous conversion is intact
        assert window.right_panel.graph is not None and not window.aten_panel.graph.node(hypot_node(window)).problem
        assert "kept" in window.status_label.text()
    # fixed again: converted again with it
    save_as_editor(path, RULE)
    wait_converted(qtbot, window, good)
    assert window.doc.conversion.result.ok and not window.problems.model.items


def test_unchecking_a_plugin_converts_without_it(studio, qtbot, hypot_pt2, tmp_path):
    window = studio
    path = converted_with_rule(window, qtbot, hypot_pt2, tmp_path)
    on = window.doc.conversion
    assert on.result.ok
    item = window.plugins_panel.file_item(path)
    item.setCheckState(0, Qt.CheckState.Unchecked)  # what a click on the checkbox does
    wait_converted(qtbot, window, on)
    off = window.doc.conversion
    assert [d.op for d in off.result.errors] == [HYPOT] and path not in off.options.converters
    assert window.plugins_panel.file_item(path).checkState(0) == Qt.CheckState.Unchecked
    assert window.plugins_panel.rule_item(f"{path}::hypot_rule").text(3) == "—"
    window.plugins_panel.file_item(path).setCheckState(0, Qt.CheckState.Checked)
    wait_converted(qtbot, window, off)
    assert window.doc.conversion.result.ok


class LogitNet(torch.nn.Module):
    """conv → sigmoid → logit: logit has no built-in rule; PyTorch decomposes it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.logit(torch.sigmoid(self.conv(x)), eps=1e-6)


def test_decompose_template_offered_where_pytorch_decomposes(studio, qtbot, tmp_path):
    window = studio
    pt2 = studio_models.export(LogitNet(), (torch.randn(1, 3, 8, 8),), tmp_path / "logit.pt2")
    open_model(window, pt2)
    first = window.doc.conversion
    [d] = first.result.errors
    panel = window.problems
    panel.table.setCurrentIndex(panel.model.index(0, 3))
    panel.write_action.trigger()
    dlg = window.plugins.dialog
    qtbot.waitUntil(lambda: dlg.templates["decompose"].isEnabled(), timeout=60_000)
    qtbot.mouseClick(dlg.templates["decompose"], Qt.MouseButton.LeftButton)
    assert dlg.template == "decompose"
    qtbot.mouseClick(dlg.write_button, Qt.MouseButton.LeftButton)
    wait_converted(qtbot, window, first)  # unedited, the decomposition converts
    conv = window.doc.conversion
    assert conv.result.ok, conv.result.errors
    tag = f"{dlg.path.text()}::logit_default"
    assert window.plugins.nodes[tag] == [d.node]


def test_override_a_builtin_rule_from_the_selected_node(studio, qtbot, hypot_pt2):
    window = studio
    open_model(window, hypot_pt2)
    relu = next(op.name for op in window.doc.aten.ops if op.type == "aten.relu.default")
    window.sync.select("aten", [relu])
    assert window.inspector.current == ("aten", relu)
    window.plugins.action.trigger()
    dlg = window.plugins.dialog
    assert dlg.isVisible() and dlg.op_name == "aten.relu.default"
    assert "engine.converters" in dlg.head.text() and "takes priority" in dlg.head.text()
    dlg.reject()


def test_a_rule_beyond_tolerance_is_flagged_and_export_asks(studio, qtbot, hypot_pt2, tmp_path):
    window = studio
    path = converted_with_rule(window, qtbot, hypot_pt2, tmp_path)
    wrong = RULE.replace("sqrt(add(mul(@0,@0),mul(@1,@1)))", "add(mul(@0,@0),mul(@1,@1))")  # forgot the root
    before = window.doc.conversion
    save_as_editor(path, wrong)
    wait_converted(qtbot, window, before)
    assert window.doc.conversion.result.ok
    tag = f"{path}::hypot_rule"
    window.plugins_panel.select(tag)
    qtbot.mouseClick(window.plugins_panel.verify_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tag in window.plugins.checks, timeout=180_000)
    check = window.plugins.checks[tag]
    assert not check.ok and check.worst > check.rtol
    item = window.plugins_panel.rule_item(tag)
    assert "beyond tolerance" in item.text(4) and item.foreground(4).color().name() == "#d62828"
    # Export asks first; No writes nothing
    window.export_dialog()
    box = window.exporter.question
    assert box is not None and box.isVisible() and "hypot_rule" in box.text()
    qtbot.mouseClick(box.button(box.StandardButton.No), Qt.MouseButton.LeftButton)
    assert window.exporter.dialog is None


def test_the_builtin_editor_saves_and_the_model_converts_again(studio, qtbot, hypot_pt2, tmp_path):
    window = studio
    path = converted_with_rule(window, qtbot, hypot_pt2, tmp_path)
    window.plugins_panel.select(f"{path}::hypot_rule")
    qtbot.mouseClick(window.plugins_panel.edit_button, Qt.MouseButton.LeftButton)
    editor = window.plugins.editors[path]
    assert editor.isVisible() and editor.text.toPlainText() == RULE
    assert editor.text.textCursor().blockNumber() + 1 == 8  # at the rule
    editor.text.setPlainText(RULE.replace("x, other = op.inputs", "x, other = op.inputs[7]"))
    before = window.doc.conversion
    qtbot.mouseClick(editor.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(plugin_rows(window)), timeout=60_000)
    assert open(path, encoding="utf-8").read() == editor.text.toPlainText()
    assert "IndexError" in plugin_rows(window)[0].reason and window.doc.conversion is before
    # a plug-in problem row opens the file in the editor at its line
    window.plugins.edit(plugin_rows(window)[0].plugin)
    assert editor.text.textCursor().blockNumber() + 1 == 10
