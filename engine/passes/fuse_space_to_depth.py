"""Fuse space-to-depth written as strided slices + concat into one reshape → permute → reshape
(pnnx level, before ``legalize_tensor_rank``).

Swin's patch merging ``cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :],
x[..., 1::2, 1::2, :]], -1)`` and YOLOv5's Focus (the same on NCHW along the channels) read
every ``s``-th element of two dims at each of the ``s²`` offsets and stack the pieces along a
third dim. That is a reshape splitting the two dims into ``(n/s, s)``, a permute moving the two
offset axes in front of the stacking dim (in the order the pieces come: first offset varying
fastest, or slowest) and a reshape merging them — in ncnn one Reshape, one Permute and one
Reshape instead of a strided slice (Crop + Pooling) per piece and dim and a Concat.
"""
from __future__ import annotations

from ..ir import Graph, Operand, Operator
from ._rewrite import replace_chain
from .manager import graph_pass

_INT64_MAX = 2**63 - 1


def _norm(d: int, rank: int) -> int:
    return d % rank if rank else 0


def _slices(piece: Operand, cat: Operator) -> tuple[Operand, dict[int, tuple[int, int]], list[Operator]] | None:
    """(source, {dim: (start, step)}, the slice ops) of a chain of strided slices to the end."""
    found: dict[int, tuple[int, int]] = {}
    ops: list[Operator] = []
    x = piece
    while x.producer is not None and x.producer.type == "Tensor.slice" and len(x.consumers) == 1:
        op = x.producer
        src = op.inputs[0]
        if src.shape is None:
            return None
        d = _norm(op.params["dim"], len(src.shape))
        size, end = src.shape[d], op.params["end"]
        if d in found or not isinstance(size, int) or not (end >= size or end == _INT64_MAX):
            return None
        found[d] = (op.params["start"], op.params.get("step", 1))
        ops.append(op)
        x = src
    return (x, found, ops) if ops else None


def _match(cat: Operator):
    """The space-to-depth the concat computes: (source, dims (a, b), step, cat dim, a-major)."""
    pieces = [_slices(p, cat) for p in cat.inputs]
    if any(p is None for p in pieces) or len({id(p[0]) for p in pieces}) != 1:
        return None
    x = pieces[0][0]
    rank = len(x.shape)
    dims = sorted(pieces[0][1])
    if len(dims) != 2 or any(sorted(p[1]) != dims for p in pieces):
        return None
    a, b = dims
    step = pieces[0][1][a][1]
    if step < 2 or any(s != step for p in pieces for _, s in p[1].values()) or len(pieces) != step * step:
        return None
    if any(x.shape[d] % step for d in (a, b)):
        return None
    offsets = [(p[1][a][0], p[1][b][0]) for p in pieces]
    if sorted(offsets) != [(i, j) for i in range(step) for j in range(step)]:
        return None
    c = _norm(cat.params.get("dim", 0), rank)
    if c in (a, b):
        return None
    if offsets == [(i, j) for i in range(step) for j in range(step)]:
        a_major = True
    elif offsets == [(i, j) for j in range(step) for i in range(step)]:
        a_major = False
    else:
        return None
    return x, (a, b), step, c, a_major, [op for p in pieces for op in p[2]]


def _emit(graph: Graph, cat: Operator, type_: str, x: Operand, shape: list, params: dict) -> Operand:
    name = graph.unique_op_name(f"{cat.name}_s2d")
    out = graph.new_operand(name, dtype=x.dtype, shape=shape)
    op = graph.add_op(type_, name, [x], [out], params=params, provenance=cat.provenance, before=cat)
    op.meta.update({k: cat.meta[k] for k in ("source", "module_stack", "aten_op") if k in cat.meta})
    return out


@graph_pass("fuse_space_to_depth", "strided slices at every offset concatenated → reshape, permute, reshape")
def run(graph: Graph, cx) -> None:
    for cat in list(graph.ops):
        if cat.type != "torch.cat" or cat not in graph.ops or len(cat.inputs) < 4:
            continue
        found = _match(cat)
        if found is None:
            continue
        x, (a, b), s, c, a_major, slices = found
        split, where = [], {}  # the source's dims with a and b split into (n/s, s)
        for d, n in enumerate(x.shape):
            if d in (a, b):
                where[d] = (len(split), len(split) + 1)
                split += [n // s, s]
            else:
                where[d] = (len(split),)
                split.append(n)
        offsets = [where[a][1], where[b][1]] if a_major else [where[b][1], where[a][1]]
        dims = []
        for d in range(len(x.shape)):
            dims += offsets + [where[d][0]] if d == c else [where[d][0]]
        mid = _emit(graph, cat, "Tensor.reshape", x, split, {"shape": split})
        moved = _emit(graph, cat, "Tensor.permute", mid, [split[i] for i in dims], {"dims": dims})
        replace_chain(graph, cat, slices, "Tensor.reshape", [moved], params={"shape": list(cat.outputs[0].shape)})
