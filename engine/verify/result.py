"""What a verification found: :class:`VerifyResult` with one :class:`LayerRecord` per ncnn
layer (topological order), one :class:`BlobRecord` per layer output and one
:class:`OutputRecord` per model output. Plain data; :meth:`VerifyResult.to_dict` is the
``pt2ncnn verify --json`` document.

Layer status:

* ``ok`` — every compared output within tolerance;
* ``divergent`` — the layer's OWN error exceeds tolerance: run in isolation on PyTorch's values
  of its inputs, it still disagrees with PyTorch (this layer is to blame);
* ``inherited`` — its output is off, but only because its inputs already were;
* ``failed`` — ncnn could not compute it (an error code, or an output of the wrong size) even
  from correct inputs;
* ``not_compared`` — no output has a PyTorch counterpart (an intermediate of an ATen op lowered
  to several layers); the next compared layer is run together with it.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..records import field, record
from .metrics import ErrorStats

OK, DIVERGENT, INHERITED, FAILED, NOT_COMPARED = "ok", "divergent", "inherited", "failed", "not_compared"
BLAMED = (DIVERGENT, FAILED)


def _num(x: float | None) -> float | None:
    """JSON-safe float: None for missing or non-finite values."""
    if x is None or not math.isfinite(x):
        return None
    return float(x)


def _stats_dict(s: ErrorStats | None, prefix: str = "") -> dict[str, float | None]:
    return {f"{prefix}max_abs": _num(s.max_abs) if s else None,
            f"{prefix}max_rel": _num(s.max_rel) if s else None,
            f"{prefix}cosine": _num(s.cosine) if s else None}


@record
class BlobRecord:
    """One output blob of a layer and the PyTorch value it was compared with."""

    blob: str
    value: str | None  #: ATen value name compared against (None: no counterpart)
    how: str  #: how the value was found (``input``, ``output``, ``name``, ``provenance``, ``split``, ``unmapped``)
    ncnn_shape: tuple[int, ...] | None = None  #: the blob as ncnn computed it (c, h, w order)
    torch_shape: tuple[int, ...] | None = None  #: the PyTorch value (batch axis included)
    error: ErrorStats | None = None  #: whole-model run
    own: ErrorStats | None = None  #: layer run in isolation on PyTorch's inputs
    note: str = ""  #: why it was not compared, or what went wrong

    @property
    def compared(self) -> bool:
        return self.error is not None

    def to_dict(self) -> dict[str, Any]:
        return {"blob": self.blob, "value": self.value, "how": self.how,
                "ncnn_shape": list(self.ncnn_shape) if self.ncnn_shape is not None else None,
                "torch_shape": list(self.torch_shape) if self.torch_shape is not None else None,
                **_stats_dict(self.error), **_stats_dict(self.own, "own_"), "note": self.note}


@record
class LayerRecord:
    """One ncnn layer: where it came from and how far its outputs are from PyTorch."""

    index: int  #: position in the ncnn graph (topological order)
    layer: str  #: layer name
    type: str  #: ncnn layer type
    aten_nodes: list[str]  #: provenance: the ATen nodes it came from, in program order
    module: str = ""  #: module path of its first ATen node (``layer1.0.conv1``)
    source: str = ""  #: ``file:line`` of its first ATen node with a source location
    blobs: list[BlobRecord] = field(default_factory=list)
    error: ErrorStats | None = None  #: worst over compared outputs, whole-model run
    own: ErrorStats | None = None  #: worst over compared outputs, isolated run
    status: str = NOT_COMPARED
    #: layers run together with this one in the isolated run (it first; then uncompared producers)
    isolated_with: list[str] = field(default_factory=list)
    within_tolerance: bool | None = None  #: whole-model error within tolerance (None: not compared)
    note: str = ""

    @property
    def max_abs(self) -> float | None:
        return self.error.max_abs if self.error else None

    @property
    def max_rel(self) -> float | None:
        return self.error.max_rel if self.error else None

    @property
    def cosine(self) -> float | None:
        return self.error.cosine if self.error else None

    @property
    def blamed(self) -> bool:
        """True when this layer itself is wrong (``divergent`` or ``failed``)."""
        return self.status in BLAMED

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "layer": self.layer, "type": self.type, "aten_nodes": list(self.aten_nodes),
                "module": self.module, "source": self.source, **_stats_dict(self.error),
                **_stats_dict(self.own, "own_"), "status": self.status, "within_tolerance": self.within_tolerance,
                "isolated_with": list(self.isolated_with), "note": self.note,
                "blobs": [b.to_dict() for b in self.blobs]}


@record
class OutputRecord:
    """One model output: ncnn's blob against PyTorch's returned value."""

    name: str  #: the program's output value name
    blob: str  #: the ncnn blob (``out0``...)
    error: ErrorStats | None = None
    ok: bool = False  #: within tolerance
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "blob": self.blob, **_stats_dict(self.error), "ok": self.ok}
        if self.note:
            d["note"] = self.note
        return d


#: with fp32 weights, outputs beyond tolerance with no layer wrong by itself pass as rounding drift
#: up to this many times the tolerance (Inception-v3 drifts 1.9e-4); beyond it the verification
#: fails with no single layer to blame
DRIFT_FACTOR = 10.0


@record
class VerifyResult:
    """Everything one verification found. ``graph`` is the ncnn graph that was run (from the
    conversion, or read from the user's files), so a GUI can map ``layers`` onto its nodes;
    ``conversion`` is the ConversionResult when the model was converted for this run."""

    layers: list[LayerRecord]
    outputs: list[OutputRecord]
    atol: float
    rtol: float
    input_source: str  #: ``sample`` | ``random`` | ``user``
    graph: Any = None
    conversion: Any = None
    fp16: bool = False  #: whether the ncnn weights were stored as fp16
    ncnn_files: tuple[str, str] | None = None  #: user-given (param, bin), None when converted here
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: how PyTorch ran the program: ``direct`` (from the decoded graph) or ``torch.export.load``
    torch_runner: str = ""
    _by_name: dict[str, LayerRecord] | None = field(default=None, repr=False, compare=False)

    @property
    def outputs_ok(self) -> bool:
        """Every model output within tolerance."""
        return bool(self.outputs) and all(o.ok for o in self.outputs)

    @property
    def drift(self) -> bool:
        """No layer wrong by itself, yet outputs beyond tolerance: rounding adding up over many
        layers, not a conversion error — with fp16 weights (their rounding, however deep the
        network: ResNet-152 drifts 1.3e-1), or with fp32 weights within :data:`DRIFT_FACTOR` ×
        tolerance (summation order). A layer computing something else is wrong by itself
        (blamed), whatever the depth."""
        if not self.outputs or self.outputs_ok or self.first_divergent is not None \
                or not any(r.own is not None for r in self.layers):
            return False
        if self.fp16:  # each layer is checked alone to fp16's tolerance; what adds up is the weights' rounding
            return all(o.ok or o.error is not None and np.isfinite(o.error.max_abs) for o in self.outputs)
        return all(o.ok or (o.error is not None and o.error.within(self.atol * DRIFT_FACTOR, self.rtol * DRIFT_FACTOR))
                   for o in self.outputs)

    @property
    def ok(self) -> bool:
        """The verdict (``pt2ncnn verify`` exits 0 exactly then): every model output within
        tolerance — or beyond it only by rounding adding up over the layers (:attr:`drift`) —
        and no layer wrong by itself: a layer blamed while the outputs
        still pass (its error masked downstream) is still a wrong conversion."""
        return (self.outputs_ok or self.drift) and self.first_divergent is None

    @property
    def first_divergent(self) -> LayerRecord | None:
        """The first layer, in topological order, that is wrong by itself."""
        return next((r for r in self.layers if r.blamed), None)

    @property
    def first_beyond_tolerance(self) -> LayerRecord | None:
        """The first layer whose whole-model error exceeds tolerance (blamed or not)."""
        return next((r for r in self.layers if r.within_tolerance is False), None)

    def layer(self, name: str) -> LayerRecord | None:
        """The record of the layer named ``name``."""
        if self._by_name is None or len(self._by_name) != len(self.layers):
            self._by_name = {r.layer: r for r in self.layers}
        return self._by_name.get(name)

    def layers_of_node(self, aten_node: str) -> list[LayerRecord]:
        """The layers an ATen node went into (a GUI colouring the ATen / pnnx views uses it)."""
        return [r for r in self.layers if aten_node in r.aten_nodes]

    def to_dict(self) -> dict[str, Any]:
        fd = self.first_divergent
        fb = self.first_beyond_tolerance
        return {
            "ok": self.ok,
            "outputs_ok": self.outputs_ok,
            "drift": self.drift,
            "atol": self.atol,
            "rtol": self.rtol,
            "fp16": self.fp16,
            "inputs": self.input_source,
            "outputs": [o.to_dict() for o in self.outputs],
            "layers": [r.to_dict() for r in self.layers],
            "first_divergent": fd.to_dict() if fd else None,
            "first_beyond_tolerance": fb.layer if fb else None,
            "notes": list(self.notes),
            "torch_runner": self.torch_runner,
            "seconds": round(self.seconds, 6),
        }
