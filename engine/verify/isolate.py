"""Which ncnn runs re-run every compared layer alone: :func:`plan_isolation`.

A layer runs alone when its input blobs are set to PyTorch's values (``Extractor.input`` accepts
any blob) and its outputs are extracted: the runtime computes only what is missing. An input
without a PyTorch counterpart (an intermediate of an op lowered to several layers, a blob whose
layout no pass recorded) is computed too, by its producer — the *region* of the layer grows
through such producers until every input is a blob with a PyTorch value, a model input, or
:data:`~.mapping.MAX_REGION` layers were taken (then the whole-model run's value is set there).

Many layers share one ncnn run: a run sets the inputs of all its layers and extracts all their
outputs, so two layers may share it only when neither computes a blob (any output of a layer
of its region) the other's run sets. Layers are packed greedily, in topological order, into the
first run they fit — a chain alternates between two runs, a residual block takes three — so
the whole model is re-run layer by layer in a handful of runs instead of one run per layer.
"""
from __future__ import annotations

from typing import Callable

from ..ir import Graph
from ..records import field, record
from .mapping import sources


@record
class Job:
    """One layer run alone."""

    layer: str
    region: list[str]  #: the layer, then the layers without counterpart run with it
    feeds: set[str]  #: blobs set before the run
    computes: set[str]  #: every blob the run computes (outputs of the region's layers)
    wanted: list[str]  #: blobs extracted and compared


@record
class Plan:
    rounds: list[list[Job]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  #: layers that cannot run alone (an input ncnn failed)


def _job(op, wanted: list[str], fed: Callable[[str], bool], available: Callable[[str], bool]) -> Job | None:
    found = sources(op, lambda b: fed(b.name), lambda b: available(b.name))
    if found is None:
        return None  # nothing to set at an edge
    feeds, through = found
    computes = {o.name for layer in (op, *through) for o in layer.outputs}
    return Job(op.name, [op.name, *(p.name for p in through)], {b.name for b in feeds}, computes, wanted)


def plan_isolation(graph: Graph, records, fed: Callable[[str], bool], available: Callable[[str], bool]) -> Plan:
    """The runs re-running the layers of ``records`` (LayerRecords with compared blobs) alone.
    ``fed(blob)``: PyTorch's value of the blob can be set; ``available(blob)``: the whole-model
    run computed it (set at a region's edge when it has no PyTorch value)."""
    ops = {op.name: op for op in graph.ops}
    plan = Plan()
    runs: list[tuple[set[str], set[str]]] = []  # per run: blobs set, blobs computed
    for rec in records:
        op = ops[rec.layer]
        if not op.inputs:
            continue
        job = _job(op, [b.blob for b in rec.blobs if b.compared], fed, available)
        if job is None:
            plan.skipped.append(rec.layer)
            continue
        for k, (feeds, computes) in enumerate(runs):
            if not (job.computes & feeds or job.feeds & computes):
                break
        else:
            k = len(runs)
            runs.append((set(), set()))
            plan.rounds.append([])
        runs[k][0].update(job.feeds)
        runs[k][1].update(job.computes)
        plan.rounds[k].append(job)
    return plan
