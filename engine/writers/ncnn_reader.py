"""Read an ncnn model (``.ncnn.param`` and optionally ``.ncnn.bin``) back into an IR graph in
the ncnn vocabulary — for tests and for verifying user-edited param files.

Params are typed as ncnn types them (:mod:`.ncnn_param`). With a ``.bin``, each layer's
weights are located with the layer table (which weights the params make the runtime load, and
their sizes) and attached as lazy 1-D :class:`engine.ir.Attribute`\\ s named as in the table
(fp32, fp16 or int8 as stored). Problems raise :class:`engine.errors.ModelFileError` naming
the file (and line) and the reason.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from ..errors import ModelFileError
from ..ir import Attribute, Graph
from ..ncnn import layers as L
from . import ncnn_bin
from .ncnn_param import ParamSyntaxError, parse_param_text

log = logging.getLogger(__name__)


def read_ncnn_param(path: str | os.PathLike, bin_path: str | os.PathLike | None = None) -> Graph:
    """Parse ``path`` (and attach weights from ``bin_path`` when given) into a Graph whose
    operators are the layers (type, name, blobs, ``{id: value}`` params) in file order."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ModelFileError(str(path), e.strerror or str(e)) from None
    except UnicodeDecodeError:
        raise ModelFileError(str(path), "not a text file (a binary .param.bin is not supported)") from None
    try:
        pf = parse_param_text(text)
    except ParamSyntaxError as e:
        raise ModelFileError(f"{path}:{e.line}", e.reason) from None
    if pf.layer_count != len(pf.layers):
        raise ModelFileError(str(path), f"the header says {pf.layer_count} layers but the file has {len(pf.layers)}")
    g = Graph()
    seen_layers: set[str] = set()
    for rec in pf.layers:
        where = f"{path}:{rec.line}"
        if rec.name in seen_layers:
            raise ModelFileError(where, f"layer name {rec.name!r} is used twice")
        seen_layers.add(rec.name)
        inputs = []
        for b in rec.inputs:
            if b not in g.operands:
                raise ModelFileError(where, f"layer {rec.name!r}: input blob {b!r} is not produced by an earlier layer")
            inputs.append(g.operands[b])
        outputs = []
        for b in rec.outputs:
            if b in g.operands:
                raise ModelFileError(where, f"layer {rec.name!r}: blob {b!r} is produced twice")
            outputs.append(g.new_operand(b, exact=True))
        op = g.add_op(rec.type, rec.name, inputs, outputs, params=rec.params, exact=True)
        op.meta["line"] = rec.line
    if pf.blob_count < len(g.operands):
        raise ModelFileError(str(path), f"the header says {pf.blob_count} blobs but the layers use {len(g.operands)}")
    if pf.blob_count > len(g.operands):
        log.warning("%s: header says %d blobs, layers use %d", path, pf.blob_count, len(g.operands))
    g.meta["ncnn_param"] = str(path)
    if bin_path is not None:
        attach_weights(g, bin_path, param_path=path)
    return g


def attach_weights(graph: Graph, bin_path: str | os.PathLike, *, param_path: str | os.PathLike = "") -> None:
    """Locate every layer's weights in ``bin_path`` and attach them as lazy attributes."""
    bin_path = Path(bin_path)
    try:
        size = bin_path.stat().st_size
        f = open(bin_path, "rb")
    except OSError as e:
        raise ModelFileError(str(bin_path), e.strerror or str(e)) from None
    with f:
        offset = 0
        for op in graph.ops:
            where = f"{param_path}:{op.meta.get('line', '?')}"
            try:
                problems, want = L.layer_loads(op.type, op.params)
            except L.LayerSpecError as e:
                problems, want = [str(e)], []
            if problems:
                raise ModelFileError(where, f"layer {op.name!r}: " + "; ".join(problems))
            attrs = {}
            for w in want:
                tag = None
                if w.tagged:
                    f.seek(offset)
                    raw = f.read(4)
                    if len(raw) < 4:
                        raise ModelFileError(str(bin_path), f"ends at byte {size} before the type tag of layer "
                                                            f"{op.name!r} weight {w.name}")
                    tag = int.from_bytes(raw, "little")
                    offset += 4
                nbytes = ncnn_bin.stored_size(w.size, tag)
                if offset + nbytes > size:
                    raise ModelFileError(str(bin_path), f"layer {op.name!r} weight {w.name} needs {nbytes} bytes at "
                                                        f"offset {offset}, the file ends at {size}")
                dtype = {ncnn_bin.FP16_TAG: "f16", ncnn_bin.INT8_TAG: "i8"}.get(tag, "f32")
                attrs[w.name] = Attribute(loader=_loader(bin_path, offset, nbytes, w.size, tag),
                                          shape=(w.size,), dtype=dtype)
                offset += nbytes
            op.attrs = attrs
        if offset != size:
            log.warning("%s: %d bytes after the last weight", bin_path, size - offset)
    graph.meta["ncnn_bin"] = str(bin_path)


def _loader(path: Path, offset: int, nbytes: int, n: int, tag: int | None):
    def load() -> np.ndarray:
        with open(path, "rb") as f:
            f.seek(offset)
            buf = f.read(nbytes)
        return ncnn_bin.decode(buf, n, tag)
    return load
