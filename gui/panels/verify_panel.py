"""The Verify dock: the result of comparing every ncnn layer with PyTorch.

A summary line (every output within tolerance, or the first divergent layer with its module
and source, as a link), the options of the graph colouring (on / off, whole-model error or the
layer's own error), the :class:`~gui.panels.verify_plot.ErrorPlot` of error per layer and the
sortable table of layer records (:mod:`gui.panels.verify_table`). Picking a layer in the plot
(a click), in the table or in the summary emits :attr:`VerifyPanel.layerActivated`; the window
selects it in the graphs. :meth:`VerifyPanel.select_layer` shows a layer chosen elsewhere
without emitting.
"""
from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QEvent, QModelIndex, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QCheckBox, QComboBox, QLabel, QSplitter, QToolButton, QVBoxLayout, QWidget

from engine.verify.result import INHERITED

from ..theme import muted as muted_colour
from ..verify_model import MEASURES, VerifyRun, layer_value
from ..verify_scale import ErrorScale, format_error
from .tables import hrow, row_table, set_widths
from .verify_plot import ErrorPlot
from .verify_table import LayerFilterProxy, LayerTableModel, short_source

OK_COLOUR, BAD_COLOUR = "#1a7f37", "#d62828"


def _e(x: Any) -> str:
    return html.escape(str(x))


def summary_html(run: VerifyRun, muted: str = "#6e7781") -> str:
    """The verdict of a run in one or two lines of rich text (``muted``: colour of the facts)."""
    r = run.result
    first = r.first_divergent
    weights = "fp16" if r.fp16 else "fp32"
    compared = sum(1 for x in r.layers if x.error is not None)
    facts = (f"{compared} of {len(r.layers)} layers compared · {weights} weights · tolerance rtol {r.rtol:g}, "
             f"atol {r.atol:g} · {r.input_source} inputs · {r.seconds:.1f} s")
    if first is not None:
        inherited = sum(1 for x in r.layers if x.status == INHERITED)
        where = " · ".join(_e(x) for x in (first.module, short_source(first.source)) if x)
        err = format_error(first.own.max_rel if first.own is not None else first.max_rel)
        head = (f"<b style='color:{BAD_COLOUR}'>✗ First divergent layer: <a href='layer:{_e(first.layer)}'>"
                f"{_e(first.layer)}</a></b> ({_e(first.type)}{' · ' + where if where else ''}) — wrong by itself "
                f"(max rel error alone {err}); ATen {_e(', '.join(first.aten_nodes))}")
        tail = f"{inherited} later layer{'s' if inherited != 1 else ''} inherit the error · {facts}"
    elif r.drift:
        worst = r.first_beyond_tolerance
        link = f" from <a href='layer:{_e(worst.layer)}'>{_e(worst.layer)}</a>" if worst else ""
        head = (f"<b style='color:{OK_COLOUR}'>✓ No divergent layer</b>: every layer is right by itself; the outputs "
                f"drift beyond tolerance as the {'fp16 rounding of the weights' if r.fp16 else 'float rounding'} adds "
                f"up{link}" + (" (fp32 weights: convert with fp16 off)" if r.fp16 else ""))
        tail = facts
    elif not r.ok:
        worst = r.first_beyond_tolerance
        link = f"<a href='layer:{_e(worst.layer)}'>{_e(worst.layer)}</a>" if worst else "?"
        head = (f"<b style='color:{BAD_COLOUR}'>✗ Outputs beyond tolerance</b>, no single layer to blame "
                f"(errors add up); first beyond tolerance: {link}")
        tail = facts
    else:
        worst = max((v for x in r.layers if (v := layer_value(x)) is not None), default=0.0)
        n = len(r.outputs)
        head = (f"<b style='color:{OK_COLOUR}'>✓ Every output within tolerance</b> ({n} output{'s' if n != 1 else ''})"
                f" · worst layer max rel error {format_error(worst)}")
        tail = facts
    notes = "".join(f"<br><i>{_e(n)}</i>" for n in r.notes)
    return f"{head}<br><span style='color:{muted}'>{tail}</span>{notes}"


class VerifyPanel(QWidget):
    layerActivated = Signal(str)  #: the user picked a layer (plot, table or summary link)
    colouringChanged = Signal()  #: graph colouring switched on / off or to another measure
    paletteChanged = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.run: VerifyRun | None = None
        self.scale: ErrorScale | None = None
        self._quiet = False
        self.run_button = QToolButton()
        self.run_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.summary = QLabel("Not verified yet.")
        self.summary.setObjectName("verifySummary")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.linkActivated.connect(self._on_link)
        self.colour = QCheckBox("Colour graphs by error")
        self.colour.setChecked(True)
        self.colour.toggled.connect(lambda _on: self.colouringChanged.emit())
        self.measure_box = QComboBox()
        for key, label in MEASURES.items():
            self.measure_box.addItem(label, key)
        self.measure_box.setToolTip("Colour and plot the whole-model error (it carries over to later layers) or "
                                    "each layer's own error (run alone on PyTorch's values of its inputs)")
        self.measure_box.currentIndexChanged.connect(self._on_measure)
        self.problems_only = QCheckBox("Problems only")
        self.problems_only.setToolTip("List only the layers that are not within tolerance")
        self.problems_only.toggled.connect(self._on_problems_only)

        self.plot = ErrorPlot()
        self.plot.pointClicked.connect(self._on_point)
        self.model = LayerTableModel(self)
        self.proxy = LayerFilterProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = row_table("verifyTable", self.proxy, stretch=8, row_height=21, grid=False)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.selectionModel().currentRowChanged.connect(self._on_row)

        table_box = QWidget()
        tl = QVBoxLayout(table_box)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.setSpacing(2)
        tl.addLayout(hrow(self.colour, self.measure_box, self.problems_only, QWidget(), stretch=3))
        tl.addWidget(self.table, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("verifySplitter")
        split.addWidget(self.plot)
        split.addWidget(table_box)
        split.setSizes([560, 700])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(4)
        head = hrow(self.run_button, self.summary, stretch=1)
        head.setAlignment(self.run_button, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(head)
        lay.addWidget(split, 1)
        self.splitter = split

    # ---------------------------------------------------------------- options
    @property
    def measure(self) -> str:
        return self.measure_box.currentData()

    @property
    def colouring(self) -> bool:
        return self.colour.isChecked()

    # ---------------------------------------------------------------- content
    def clear(self, message: str = "Not verified yet.") -> None:
        self.run, self.scale = None, None
        self.summary.setText(_e(message))
        self.model.set_records([], None, None)
        self.plot.clear()

    def show_running(self, message: str) -> None:
        self.summary.setText(f"<i>{_e(message)}</i>")

    def show_message(self, message: str, *, error: bool = False) -> None:
        colour = f" style='color:{BAD_COLOUR}'" if error else ""
        self.summary.setText(f"<span{colour}>{_e(message)}</span>")

    def show_run(self, run: VerifyRun, scale: ErrorScale) -> None:
        self.run, self.scale = run, scale
        r = run.result
        muted = muted_colour(self.palette()).name()
        self.summary.setText(summary_html(run, muted))
        self.model.set_records(r.layers, scale, r.first_divergent)
        self.model.set_measure(self.measure)
        set_widths(self.table, {0: 34, 1: 150, 2: 96, 3: 100, 4: 64, 5: 64, 6: 64, 7: 74, 9: 120, 10: 100})
        self._plot()

    def _plot(self) -> None:
        run, scale = self.run, self.scale
        if run is None or scale is None:
            return
        layers = run.result.layers
        other = "own" if self.measure == "error" else "error"
        self.plot.set_data(layers, [layer_value(x, self.measure) for x in layers],
                           [layer_value(x, other) for x in layers], scale, run.result.first_divergent)
        self.plot.plot.getPlotItem().setLabel(
            "left", "max rel. error" + (" (layer alone)" if self.measure == "own" else ""))

    def select_layer(self, name: str) -> None:
        """Show layer ``name`` as the current row and ringed point (no signal)."""
        row = self.model.row_of(name)
        if row < 0:
            return
        self._quiet = True
        try:
            pidx = self.proxy.mapFromSource(self.model.index(row, 0))
            if pidx.isValid():
                self.table.setCurrentIndex(pidx)
                self.table.scrollTo(pidx)
            else:
                self.table.clearSelection()
            self.plot.select(self.model.records[row].index)
        finally:
            self._quiet = False

    def current_layer(self) -> str:
        idx = self.table.currentIndex()
        if not idx.isValid():
            return ""
        return self.model.records[self.proxy.mapToSource(idx).row()].layer

    # ---------------------------------------------------------------- events
    def _on_point(self, index: int) -> None:
        if self.run is None or not 0 <= index < len(self.run.result.layers):
            return
        name = self.run.result.layers[index].layer
        self.select_layer(name)
        self.layerActivated.emit(name)

    def _on_row(self, current: QModelIndex, _prev: QModelIndex) -> None:
        if self._quiet or not current.isValid():
            return
        rec = self.model.records[self.proxy.mapToSource(current).row()]
        self.plot.select(rec.index)
        self.layerActivated.emit(rec.layer)

    def _on_link(self, link: str) -> None:
        kind, _, name = link.partition(":")
        if kind == "layer" and name:
            self.select_layer(name)
            self.layerActivated.emit(name)

    def _on_measure(self, _i: int) -> None:
        self.model.set_measure(self.measure)
        selected = self.plot.selected
        self._plot()
        self.plot.select(selected)
        self.colouringChanged.emit()

    def _on_problems_only(self, on: bool) -> None:
        current = self.current_layer()
        self.proxy.set_problems_only(on)
        if current:
            self.select_layer(current)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange) and \
                hasattr(self, "plot"):
            self.plot.apply_palette()
            if self.run is not None:
                muted = muted_colour(self.palette()).name()
                self.summary.setText(summary_html(self.run, muted))
            self.paletteChanged.emit()
