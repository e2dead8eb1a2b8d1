"""Merge the ncnn ``Crop`` layers that cut one blob into consecutive pieces along one axis into a
single ``Slice`` (ncnn level): q, k and v cropped out of a qkv projection, the halves of a
chunk written as slices. One Slice reads the blob once and needs no ``Split`` in front of it.

Applies when every reader of the blob is a single-axis numpy-style Crop (``starts``/``ends``/
``axes``) on the same axis and their ranges tile the whole (static) axis without gaps or
overlaps; the Slice outputs are the Crops' outputs, so names and readers stay."""
from __future__ import annotations

from ..convert.shapes import ncnn_shape
from ..ir import Operator, Provenance
from ..ncnn.layers import make_params
from .manager import graph_pass
from .merge_adjacent_crops import _numpy_crop


def _pieces(blob) -> tuple[int, list[tuple[int, int, Operator]]] | None:
    """(axis, [(start, end, crop)...] sorted) when the blob's readers tile one axis, else None."""
    if len(blob.consumers) < 2 or blob.consumers[0].type != "Crop":  # the usual answer, before the shape
        return None
    shape = ncnn_shape(blob)
    if shape is None or len(set(map(id, blob.consumers))) != len(blob.consumers):
        return None
    axis, pieces = None, []
    for c in blob.consumers:
        v = _numpy_crop(c)
        if v is None or len(v["axes"]) != 1 or not -len(shape) <= v["axes"][0] < len(shape):
            return None
        if axis is not None and v["axes"][0] % len(shape) != axis:
            return None
        axis = v["axes"][0] % len(shape)
        size = shape[axis]
        if not isinstance(size, int):
            return None
        start, end = v["starts"][0], v["ends"][0]
        start, end = start + size if start < 0 else start, size if end == -233 else end + size if end < 0 else end
        pieces.append((start, min(end, size), c))
    pieces.sort(key=lambda p: p[0])
    bounds = [0] + [p[1] for p in pieces]
    if [p[0] for p in pieces] != bounds[:-1] or bounds[-1] != shape[axis] or any(e <= s for s, e, _ in pieces):
        return None
    return axis, pieces


@graph_pass("merge_crops_into_slice", "Crops that cut a blob into consecutive pieces along one axis → one Slice")
def run(graph, cx):
    for blob in list(graph.operands.values()):
        found = _pieces(blob) if blob.name in graph.operands else None
        if found is None:
            continue
        axis, pieces = found
        crops = [c for _, _, c in pieces]
        outs = [c.outputs[0] for c in crops]
        first = crops[0]
        params = make_params("Slice", slices=[e - s for s, e, _ in pieces[:-1]] + [-233], axis=axis)
        name = graph.unique_op_name(f"{blob.name}_slice")
        for c in crops:  # free the outputs for the Slice
            c.outputs = []
            graph.remove_op(c, drop_outputs=False)
        for o in outs:
            o.producer = None
        op = graph.add_op("Slice", name, [blob], outs, params=params,
                          provenance=Provenance.merge(c.provenance for c in crops), after=blob.producer)
        for k in ("source", "module_stack", "aten_op"):
            if k in first.meta:
                op.meta[k] = first.meta[k]
