"""Write an IR graph in the ncnn vocabulary as ``.ncnn.param`` + ``.ncnn.bin``.

The graph is checked first (:mod:`.ncnn_check`); nothing is written while there is a problem.
Both files are written atomically together (:mod:`.atomic`). Weights go to the .bin in layer
order and, per layer, in the order the layer loads them (the order of ``Operator.attrs``; a
custom layer's raw, float32 or int32);
weights the runtime loads tagged are stored fp16 when ``fp16`` (pnnx's default), fp32
otherwise; raw weights are always fp32 (see :mod:`.ncnn_bin`). Weight data is read (and a
lazy :class:`engine.ir.Attribute` loaded) one weight at a time.
"""
from __future__ import annotations

import logging
import math
import os
from typing import Callable

import numpy as np

from ..errors import WriteError
from ..ir import Attribute, Graph, Operator
from ..ncnn import layers as L
from . import ncnn_bin
from ..records import record
from .atomic import atomic_files
from .ncnn_check import check_graph, ncnn_layers, summarize
from .ncnn_param import MAGIC, format_layer, format_value, kinds_for

log = logging.getLogger(__name__)

#: ``progress(done, total)`` is called after each layer; raising from it cancels the write
#: (no file is left behind and the exception propagates).
Progress = Callable[[int, int], None]
#: ``warn(operator, reason)`` is called for a weight holding NaN or infinite values.
Warn = Callable[[Operator, str], None]


def nonfinite_reason(key: str, data: np.ndarray, fp16: bool) -> str | None:
    """Why weight ``key`` deserves a warning (NaN or infinite values), or None."""
    if data.dtype.kind != "f" or not data.size or np.isfinite(data).all():
        return None
    nan = int(np.isnan(data).sum())
    inf = int(np.isinf(data).sum())
    parts = [f"{nan} NaN"] * bool(nan) + [f"{inf} infinite"] * bool(inf)
    tail = "; stored as fp16 the infinities become ±65504" if inf and fp16 else ""
    return (f"weight {key!r} holds {' and '.join(parts)} value(s) of {data.size} (the ncnn model will "
            f"compute NaN/inf where they are used{tail})")


@record(frozen=True)
class _RawWeight:
    """How a custom layer's weight is stored (raw, with or without the type tag)."""

    tagged: bool = False


#: how a custom layer's weights are stored: raw float32 (int32 for integers), no tag
_RAW = _RawWeight()


@record(frozen=True)
class NcnnWriteResult:
    """What :func:`write_ncnn` wrote: counts of layers and blobs, file sizes, weights by storage."""

    layers: int
    blobs: int
    param_bytes: int
    bin_bytes: int
    fp16_weights: int
    fp32_weights: int


def param_text(graph: Graph) -> str:
    """The ``.ncnn.param`` text of a graph (which must pass :func:`.ncnn_check.check_graph`)."""
    layers = ncnn_layers(graph)
    lines = [str(MAGIC), ""]
    blobs: set[str] = set()
    for op in layers:
        ins, outs = [i.name for i in op.inputs], [o.name for o in op.outputs]
        blobs.update(ins)
        blobs.update(outs)
        if op.meta.get("custom_layer"):  # unconverted op written for a custom ncnn layer: no params
            lines.append(format_layer(op.type, op.name, ins, outs, []))
            continue
        # a plug-in's custom layer: params as given, kinds by value
        known = {} if op.meta.get("plugin_layer") else L.param_kinds(op.type)
        params = op.params
        kinds = kinds_for(params, known)
        texts = [format_value(k, kinds[k], params[k]) for k in sorted(params)]
        lines.append(format_layer(op.type, op.name, ins, outs, texts))
    lines[1] = f"{len(layers)} {len(blobs)}"
    return "\n".join(lines) + "\n"


def _write_weight(attr: Attribute, write, *, tagged: bool, fp16: bool) -> np.ndarray | None:
    """Write one weight (:func:`ncnn_bin.write_weight`); its data when it holds a NaN or an
    infinite value, else None. A weight computed piece by piece (``attr.piecewise``: a folded
    BatchNorm's kernel) and stored as fp16 is computed, converted and written a chunk at a time
    and never exists whole."""
    n = math.prod(attr.shape)
    if attr.piecewise and attr.dtype == "f32" and tagged and fp16 and n >= ncnn_bin.BITS_MIN:
        return np.asarray(attr.peek()) if ncnn_bin.write_fp16(attr.pieces(), n, write) else None
    data = np.asarray(attr.peek())
    return data if ncnn_bin.write_weight(data, write, tagged=tagged, fp16=fp16) else None


def write_ncnn(graph: Graph, param_path: str | os.PathLike, bin_path: str | os.PathLike, *, fp16: bool = True,
               progress: Progress | None = None, warn: Warn | None = None) -> NcnnWriteResult:
    """Write ``graph`` as an ncnn model. Raises :class:`engine.errors.WriteError` (naming the
    path and the reason, or listing the graph's problems) and leaves no partial files. Weights
    holding NaN or infinite values are written as they are and reported to ``warn`` (checked
    while each weight is in memory for writing: no second read)."""
    loads: dict[int, list[L.LoadedWeight]] = {}
    problems = check_graph(graph, loads)
    if problems:
        raise WriteError(os.fspath(param_path), summarize(problems))
    try:
        text = param_text(graph).encode("utf-8")
    except ValueError as e:  # e.g. a NaN param
        raise WriteError(os.fspath(param_path), f"cannot write the ncnn model: {e}") from None
    layers = ncnn_layers(graph)
    n_fp16 = n_fp32 = 0
    with atomic_files([param_path, bin_path]) as (pf, bf):
        pf.write(text)
        for k, op in enumerate(layers):
            if op.attrs and not op.meta.get("custom_layer"):
                want = ([_RAW] * len(op.attrs) if op.meta.get("plugin_layer") else loads[id(op)])
                for (key, attr), w in zip(op.attrs.items(), want):
                    try:
                        bad = _write_weight(attr, bf.write, tagged=w.tagged, fp16=fp16)
                    except (TypeError, ValueError) as e:
                        raise WriteError(os.fspath(bin_path), f"layer {op.name!r} weight {key!r}: {e}") from None
                    reason = nonfinite_reason(key, bad, fp16 and w.tagged) if bad is not None and warn is not None else None
                    if reason:
                        log.warning("layer %s: %s", op.name, reason)
                        warn(op, reason)
                    if w.tagged and fp16 and attr.dtype != "i8":
                        n_fp16 += 1
                    else:
                        n_fp32 += 1
            if progress is not None:
                progress(k + 1, len(layers))
        bin_bytes = bf.tell()
    blobs = int(text.split(b"\n", 2)[1].split()[1])
    log.info("wrote %s (%d layers, %d blobs) and %s (%d bytes, %d fp16 / %d fp32 weights)",
             param_path, len(layers), blobs, bin_path, bin_bytes, n_fp16, n_fp32)
    return NcnnWriteResult(len(layers), blobs, len(text), bin_bytes, n_fp16, n_fp32)
