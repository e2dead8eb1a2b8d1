"""The Passes panel shows exactly what the text path shows (every pass's side-by-side diff of
full text snapshots), and a conversion's pnnx graph is on screen before the conversion ends."""
from __future__ import annotations

import threading

from engine.ir import Graph
from gui.document import INPUT, OP, OUTPUT, PARAM, NodeCounts, snapshot_counts
from gui.graph.model import kind_of_type
from gui.panels.passes import PassesPanel, align
from tests.engine.passes.reference import convert_with_reference
from tests.gui.conftest import TINY_CNN, TINY_TRANSFORMER, open_model


def _panel(qtbot, model, width: int, height: int):
    """A shown Passes panel with the records of converting ``model``, and the reference texts."""
    records, texts = convert_with_reference(model)
    panel = PassesPanel()
    qtbot.addWidget(panel)
    panel.resize(width, height)
    panel.show()
    qtbot.waitExposed(panel)
    panel.set_records(records)
    return panel, records, texts


def test_passes_panel_shows_the_diff_of_full_text_snapshots(qtbot):
    panel, records, texts = _panel(qtbot, TINY_TRANSFORMER, 1200, 600)
    shown = 0
    for rec in records[1:]:
        if rec.diff.empty:
            continue
        for changes_only in (True, False):
            panel.changes_only.setChecked(changes_only)
            assert panel.select_pass(rec.index)
            panel._show_current()
            want = align(texts[rec.index - 1], texts[rec.index], changes_only)
            assert panel.diff.aligned == want, rec.name
            assert panel.diff.left.toPlainText() == "\n".join(want.left)
            assert panel.diff.right.toPlainText() == "\n".join(want.right)
        shown += 1
    assert shown >= 3


def test_the_pnnx_graph_is_shown_before_the_conversion_ends(window, qtbot, monkeypatch):
    import engine.passes
    from engine.passes import graph_pass

    # a pass right after the pnnx graph is recorded holds the conversion until the window has
    # laid that graph out (a tiny model would otherwise finish converting first)
    laid_out = threading.Event()

    @graph_pass("wait_for_the_window")
    def wait(graph, cx):
        assert laid_out.wait(60), "the pnnx graph was not shown while converting"

    pipeline = list(engine.passes.PIPELINE)
    at = [getattr(p, "pass_name", "") for p in pipeline].index("record_pnnx_graph") + 1
    monkeypatch.setattr(engine.passes, "PIPELINE", pipeline[:at] + [wait] + pipeline[at:])
    seen, layouts = [], []

    def started(task):
        if task.name == "Conversion":
            task.partial.connect(lambda p, t=task: seen.append((p, t.is_done, window.right_panel.full_graph)))
        if task.name == "layout of the right graph":
            layouts.append(task)

    def right_ready():
        if seen and window.right_panel.graph is not None:
            laid_out.set()

    window.runner.taskStarted.connect(started)
    window.right_panel.layoutReady.connect(right_ready)
    open_model(window, TINY_CNN)
    assert len(seen) == 1
    preview, conversion_done, shown = seen[0]
    assert not conversion_done and shown is preview.display  # on screen while lowering to ncnn
    assert {n.type for n in preview.display.nodes} >= {"nn.Conv2d", "pnnx.Output"}
    conv = window.doc.conversion
    final = conv.displays["pnnx"]
    assert [n.name for n in final.nodes] == [n.name for n in preview.display.nodes]
    # the final graph replaced the preview in place: laid out once
    assert window.right_panel.full_graph is final and len(layouts) == 1
    assert window.right_panel.graph.vocabulary == "pnnx" and len(window.right_panel.scene.nodes) == len(final.nodes)
    # the conversion reused the document's ATen graph and its display (no problems to mark)
    assert conv.result.aten is window.doc.aten and conv.aten_display is window.doc.aten_display


def _coloured_rows(ed) -> dict[int, str]:
    """Row → background colour name of the full-width selections of an editor."""
    from PySide6.QtGui import QTextFormat

    return {s.cursor.blockNumber(): s.format.background().color().name() for s in ed.extraSelections()
            if s.format.property(QTextFormat.Property.FullWidthSelection)}


def test_diff_colours_follow_the_rows_on_screen(qtbot):
    """A pass that changed every operator: the rows on screen are coloured (and only rows
    around them), scrolling to the end colours the end, and changed rows mark the characters
    that differ."""
    from gui.panels.passes import _differing_spans

    panel, records, texts = _panel(qtbot, TINY_CNN, 1000, 260)
    panel.changes_only.setChecked(False)
    panel.diff.MARGIN = 4  # a small window, so this small model has rows outside it
    rec = max(records[1:], key=lambda r: r.diff.counts()["changed"])
    assert panel.select_pass(rec.index)
    diff = panel.diff
    d = diff.aligned
    colours = {k: c.name() for k, c in diff._colours.items()}

    def check_screen():
        qtbot.wait(20)
        top, bottom = diff._rows_on_screen()
        for ed, side in ((diff.left, "left"), (diff.right, "right")):
            rows = _coloured_rows(ed)
            for i in range(top, min(bottom, len(d.kinds))):
                kind = d.kinds[i]
                if kind == "equal" or (kind, side) in (("added", "left"), ("removed", "right")):
                    assert i not in rows
                else:
                    assert rows[i] == colours[kind], (i, kind)
                    if kind == "changed":
                        spans = [(s.cursor.selectionStart() - ed.document().findBlockByNumber(i).position(),
                                  s.cursor.selectionEnd() - ed.document().findBlockByNumber(i).position())
                                 for s in ed.extraSelections() if s.cursor.blockNumber() == i and s.cursor.hasSelection()]
                        assert spans == _differing_spans(d.left[i], d.right[i], side)
        return top, bottom

    top, bottom = check_screen()
    assert any(k == "changed" for k in d.kinds) and len(d.kinds) > bottom + 50
    far = [i for i in range(bottom + 10, len(d.kinds)) if d.kinds[i] != "equal"]
    assert far and not set(far) & set(_coloured_rows(diff.right))  # not coloured before they show
    sb = diff.left.verticalScrollBar()
    sb.setValue(sb.maximum())
    top_end, bottom_end = check_screen()
    assert bottom_end >= len(d.kinds) - 1 and top_end > top


def test_the_lowering_to_ncnn_waits_until_the_window_has_drawn_the_pnnx_graph(window, qtbot, monkeypatch):
    """Once the pnnx graph exists the conversion waits until the window has laid it out and
    drawn it (they would share the interpreter lock); the window lets it go, it does not time
    out (the wait is made a minute long here)."""
    import engine.passes
    import gui.main_window
    from engine.passes import graph_pass

    monkeypatch.setattr(gui.main_window, "PREVIEW_WAIT", 60.0)
    after_preview = []

    @graph_pass("look_at_the_window")
    def look(graph, cx):  # the first pass after the wait
        after_preview.append(window.right_panel.graph is not None and window.right_panel.graph.vocabulary == "pnnx")

    pipeline = list(engine.passes.PIPELINE)
    at = [getattr(p, "pass_name", "") for p in pipeline].index("record_pnnx_graph") + 1
    monkeypatch.setattr(engine.passes, "PIPELINE", pipeline[:at] + [look] + pipeline[at:])
    open_model(window, TINY_CNN, timeout_ms=30_000)
    assert after_preview == [True]  # laid out before the lowering to ncnn went on
    conv = window.doc.conversion
    assert conv is not None and conv.seconds < 30 and window._preview_shown is None


def test_pass_counts_are_the_counts_of_each_full_text_snapshot():
    """The Passes panel's node counts (read from the structural snapshots, each shared snapshot
    and line once) are what each pass's full text snapshot holds, parsed into a graph."""
    for model in (TINY_CNN, TINY_TRANSFORMER):
        records, texts = convert_with_reference(model)
        counts = snapshot_counts(records)
        want = []
        for text in texts:
            n = {OP: 0, INPUT: 0, OUTPUT: 0, PARAM: 0}
            for op in Graph.from_text(text).ops:
                n[kind_of_type(op.type)] += 1
            want.append(NodeCounts(n[OP], n[INPUT] + n[OUTPUT], n[PARAM]))
        assert counts == want
        assert counts[0].weights > counts[-1].weights and len(set(counts)) >= 3  # passes change them
