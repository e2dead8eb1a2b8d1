"""Merge ncnn ``Crop`` → ``Crop`` on different axes into one ``Crop`` (pnnx's slice fusion):
``x[:, a:b, c:d]`` is one slice per dim in ATen, and each becomes a Crop with numpy-style
``starts``/``ends``/``axes``. Cropping one axis does not move the others, so the two lists
simply concatenate."""
from __future__ import annotations

from ..ncnn.layers import make_params, param_values
from ._rewrite import replace_chain
from .manager import graph_pass

_NUMPY_STYLE = {"starts", "ends", "axes"}


def _numpy_crop(op) -> dict | None:
    if op.type != "Crop" or len(op.inputs) != 1 or len(op.outputs) != 1:
        return None
    values = param_values("Crop", op.params)
    if set(values) != _NUMPY_STYLE or not len(values["axes"]) == len(values["starts"]) == len(values["ends"]):
        return None
    return values


@graph_pass("merge_adjacent_crops", "merge Crop → Crop on different axes (numpy-style starts/ends/axes) into one")
def run(graph, cx):
    for op in list(graph.ops):
        second = _numpy_crop(op) if op in graph.ops else None
        if second is None:
            continue
        x = op.inputs[0]
        first = _numpy_crop(x.producer) if x.producer is not None and len(x.consumers) == 1 else None
        if first is None or set(first["axes"]) & set(second["axes"]):
            continue
        params = make_params("Crop", starts=list(first["starts"]) + list(second["starts"]),
                             ends=list(first["ends"]) + list(second["ends"]), axes=list(first["axes"]) + list(second["axes"]))
        replace_chain(graph, op, [x.producer], "Crop", [x.producer.inputs[0]], params=params)
