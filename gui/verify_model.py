"""What a verification means for the views, as plain data (no Qt).

:func:`verify_conversion` runs in a worker thread (see :mod:`gui.workers`): it verifies the
document's current conversion with :func:`engine.verify.verify` (torch and ncnn — the ``verify``
extra — are imported only then) and returns a :class:`VerifyRun`. The run answers the views'
questions:

* :meth:`VerifyRun.verdicts` — for every node of a display graph (ATen, pnnx, ncnn or a pass
  snapshot), the ncnn layers its value is checked in and their worst error and status
  (:class:`NodeVerdict`): an ncnn node is its own layer; an ATen node maps to the layers it
  went into; a pnnx / snapshot node to the layers of the ATen nodes it came from;
* :meth:`VerifyRun.names_in_view` — the nodes that stand for one layer in a view, to select it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable

from engine.verify import ErrorStats, LayerRecord, VerifyOptions, VerifyResult, verify
from engine.verify.result import DIVERGENT, FAILED, INHERITED, NOT_COMPARED, OK

from .graph.model import PARAM, DisplayGraph, DisplayNode

log = logging.getLogger(__name__)

#: worst first: the status a node shows when its layers disagree
STATUS_RANK = {FAILED: 4, DIVERGENT: 3, INHERITED: 2, OK: 1, NOT_COMPARED: 0}
#: which error the colours and the plot show: the whole-model run's, or the layer run alone
MEASURES = {"error": "error (whole model)", "own": "own error (layer alone)"}


def relative_error(stats: ErrorStats | None) -> float | None:
    """The number colours and plots use: max relative error (None: not compared)."""
    return None if stats is None else stats.max_rel


def layer_value(rec: LayerRecord, measure: str = "error") -> float | None:
    """A layer's max relative error, from the whole-model run (``error``) or alone (``own``)."""
    return relative_error(rec.own if measure == "own" else rec.error)


@dataclass(frozen=True)
class NodeVerdict:
    """What verification says about one node of a view: the layers checked for it."""

    records: tuple[LayerRecord, ...]
    flagged: bool = False  #: one of them is the first divergent layer

    def value(self, measure: str = "error") -> float | None:
        values = [v for r in self.records if (v := layer_value(r, measure)) is not None]
        return max(values) if values else None

    @property
    def status(self) -> str:
        return max((r.status for r in self.records), key=STATUS_RANK.__getitem__, default=NOT_COMPARED)


@dataclass
class VerifyRun:
    """One verification of a document's conversion (``conversion`` is the
    :class:`gui.document.Conversion` it checked)."""

    result: VerifyResult
    conversion: Any
    _by_node: dict[str, list[LayerRecord]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for rec in self.result.layers:
            for n in rec.aten_nodes:
                self._by_node.setdefault(n, []).append(rec)

    @property
    def first_divergent(self) -> LayerRecord | None:
        return self.result.first_divergent

    @property
    def tolerance(self) -> float:
        """The relative tolerance (``rtol``) the layers were judged with."""
        return self.result.rtol

    def layers_of_nodes(self, aten_nodes: Iterable[str]) -> list[LayerRecord]:
        """The layers these ATen nodes went into (ordered, unique)."""
        out: dict[int, LayerRecord] = {}
        for n in aten_nodes:
            for rec in self._by_node.get(n, ()):
                out.setdefault(rec.index, rec)
        return [out[k] for k in sorted(out)]

    def records_of(self, node: DisplayNode, vocabulary: str) -> list[LayerRecord]:
        """The layers checked for ``node`` of a view of ``vocabulary``."""
        if vocabulary == "ncnn":
            rec = self.result.layer(node.name)
            if rec is not None:
                return [rec]
        if vocabulary == "aten":
            return self.layers_of_nodes([node.name])
        return self.layers_of_nodes(node.provenance)

    def verdicts(self, graph: DisplayGraph) -> dict[str, NodeVerdict]:
        """A verdict for every node of ``graph`` but parameters (they are not computed)."""
        first = self.first_divergent
        out: dict[str, NodeVerdict] = {}
        for node in graph.nodes:
            if node.kind == PARAM or node.ghost:
                continue
            recs = tuple(self.records_of(node, graph.vocabulary))
            out[node.name] = NodeVerdict(recs, first is not None and any(r is first for r in recs))
        return out

    def names_in_view(self, rec: LayerRecord, vocabulary: str, provenance=None) -> list[str]:
        """The nodes standing for layer ``rec`` in a view: the layer itself in the ncnn view,
        its ATen nodes in the ATen view, what those became in a pnnx / snapshot view
        (``provenance``: that view's :class:`gui.provenance.ProvenanceIndex`)."""
        if vocabulary == "ncnn":
            return [rec.layer]
        if vocabulary == "aten":
            return list(rec.aten_nodes)
        return provenance.lowered_of(rec.aten_nodes) if provenance is not None else []


def verify_options(conversion: Any, model: str | None) -> VerifyOptions:
    """Verify exactly what was converted: same fp16 choice, plug-ins and input shapes."""
    opts = conversion.options
    return VerifyOptions(fp16=bool(opts.fp16), converters=list(opts.converters), input_shapes=opts.input_shapes,
                         model=model)


def verify_conversion(ctx, doc: Any, conversion: Any) -> VerifyRun:
    """Compare every ncnn layer of ``conversion`` (a :class:`gui.document.Conversion` of
    ``doc``) with PyTorch (worker thread). Raises :class:`engine.verify.MissingDependency`
    without torch / ncnn, :class:`engine.verify.VerifyError` for what cannot be verified."""
    result = verify(doc.program, verify_options(conversion, doc.model_name), conversion=conversion.result,
                    progress=ctx.progress, cancel=ctx)
    ctx.check()
    log.info("verified %s: %d layers, first divergent %s, %.2fs", doc.name, len(result.layers),
             result.first_divergent.layer if result.first_divergent else None, result.seconds)
    return VerifyRun(result, conversion)
