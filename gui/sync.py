"""Selection kept in step between the ATen view and the lowered view, through provenance.

When the user selects nodes in one view, that view shows them selected (blue) and the other
view outlines their counterparts (orange) and scrolls to them: ATen → the pnnx / ncnn operators
they became (one-to-many), lowered → the ATen nodes they came from (many-to-one). The same
path serves search results, problems and inspector links (:meth:`SelectionSync.select`).
"""
from __future__ import annotations

import logging
from typing import Sequence

from PySide6.QtCore import QObject, Signal

from .graph.panel import GraphPanel
from .provenance import ProvenanceIndex

log = logging.getLogger(__name__)

ATEN = "aten"
RIGHT = "right"


class SelectionSync(QObject):
    #: the user's focus moved to this node: (side "aten" | "right", node name)
    nodeChosen = Signal(str, str)
    selectionCleared = Signal()

    def __init__(self, aten: GraphPanel, right: GraphPanel, parent: QObject | None = None):
        super().__init__(parent)
        self.aten = aten
        self.right = right
        self.index: ProvenanceIndex | None = None
        self.last_side = ATEN
        aten.nodeSelectionChanged.connect(lambda names: self._user_selected(ATEN, names))
        right.nodeSelectionChanged.connect(lambda names: self._user_selected(RIGHT, names))
        aten.layoutReady.connect(self.refresh)
        right.layoutReady.connect(self.refresh)

    def set_index(self, index: ProvenanceIndex | None) -> None:
        """The provenance between the ATen graph and what the right view shows now."""
        self.index = index
        self.refresh()

    def panel(self, side: str) -> GraphPanel:
        return self.aten if side == ATEN else self.right

    def counterparts(self, side: str, names: Sequence[str]) -> list[str]:
        if self.index is None or not names:
            return []
        return self.index.lowered_of(names) if side == ATEN else self.index.aten_of(names)

    def select(self, side: str, names: Sequence[str], *, focus: bool = True) -> list[str]:
        """Select ``names`` in one view as if the user had; returns the counterparts linked."""
        panel = self.panel(side)
        panel.select(list(names), focus=focus)
        return self._apply(side, list(names), focus_self=False, focus_other=focus)

    def _user_selected(self, side: str, names: list[str]) -> None:
        self._apply(side, names, focus_self=False, focus_other=True)

    def _apply(self, side: str, names: list[str], *, focus_self: bool, focus_other: bool) -> list[str]:
        self.last_side = side
        other_side = RIGHT if side == ATEN else ATEN
        own, other = self.panel(side), self.panel(other_side)
        own.scene.set_linked([])
        other.scene.select([])
        linked = self.counterparts(side, names)
        other.link(linked, focus=focus_other)
        if names:
            self.nodeChosen.emit(side, names[-1])
        else:
            self.selectionCleared.emit()
        return linked

    def refresh(self) -> None:
        """Re-link after one view got a new graph (a layout finished, the mode changed)."""
        side = self.last_side
        names = self.panel(side).scene.selected_names()
        other = self.panel(RIGHT if side == ATEN else ATEN)
        other.scene.select([])
        other.link(self.counterparts(side, names), focus=False)
