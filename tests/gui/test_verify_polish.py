"""Verify in the Studio leaves the graphs readable and nothing stale (issue 12, items 10 and
14): the error legend sits beside the graph, never over a node, and another model starts with an
empty plot. Real torch and ncnn runs (the verify tests' CNN with one relu broken by a plug-in)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QRect

from tests.gui.conftest import TINY_CNN, open_model

pytest.importorskip("torch")
pytest.importorskip("ncnn")

from tests.gui.test_verify_gui import broken, cnn_pt2  # noqa: E402,F401  (fixtures)

pytestmark = [pytest.mark.torch, pytest.mark.ncnn]


def _rect_in(widget, ancestor) -> QRect:
    return QRect(widget.mapTo(ancestor, widget.rect().topLeft()), widget.size())


def test_the_error_legend_covers_no_node(window, broken):  # noqa: F811
    for key, panel in (("aten", window.aten_panel), ("right", window.right_panel)):
        legend = window.verifier.legends[key]
        assert legend.isVisible()
        viewport = _rect_in(panel.view.viewport(), panel)
        assert not _rect_in(legend, panel).intersects(viewport), (key, _rect_in(legend, panel), viewport)
        assert legend.width() >= panel.view.viewport().width() * 0.9  # a strip across the panel
    # and it goes with the colouring
    window.verify_panel.colour.setChecked(False)
    assert not any(leg.isVisible() for leg in window.verifier.legends.values())


def test_another_model_starts_with_an_empty_error_plot(window, broken):  # noqa: F811
    plot = window.verify_panel.plot
    n = len(broken.result.layers)
    assert plot.plot.isVisible()
    lo, hi = plot.plot.getViewBox().viewRange()[0]
    assert hi >= n - 1
    open_model(window, TINY_CNN)
    assert not plot.plot.isVisible()  # no old axes under "Not verified yet"
    assert plot.plot.getViewBox().viewRange()[0][1] < n - 1
    assert "Not verified yet" in window.verify_panel.summary.text()
