"""Tensors assembled in uninitialised memory (ATen level, before lowering).

Model code often allocates a tensor and writes its parts::

    k = x.new_empty(*shape[:-1], 192)      # torch.empty(...) / empty_like(...) likewise
    k[..., :128].copy_(k_nope)
    k[..., 128:].copy_(k_rot)              # DeepSeek-V3's attention keys

Functionalized, that is ``new_empty`` → ``slice`` → ``copy`` → ``slice_scatter`` per write (or
``select_scatter`` for ``k[:, i] = v``). The ``empty`` has no value ncnn could compute, so the
chain did not convert. This pass replaces a chain of writes along one dim that, together, cover
the whole of an uninitialised tensor by the concatenation of what was written (the last write
wins where two overlap): ``cat([k_nope, k_rot], -1)``.

Core ATen spells ``out[:, i] = v`` as ``where(arange == i, expand(v), out)``: a write through a
mask. A chain of such ``where``s over an ``empty``, whose masks (constants by now: the pass runs
after ``fold_constants``) together cover every position, reads the ``empty`` only where a later
``where`` overwrites it; the first ``where`` becomes its written value, and the ``empty`` goes.

A ``copy`` into a part of uninitialised memory reads only that part's shape; when the source has
the same shape and dtype it is the source itself, and the copy goes, so nothing reads the
``empty`` any more. The tensor's other dims may have run-time sizes (DeepSeek-V3's keys at any
sequence length). Writes with a step or bounds computed at run time, along a dynamic dim, or
that leave part of the tensor unwritten, are left as they are (and an ``empty`` that is still
read stays unconverted, named in the report).
"""
from __future__ import annotations

import logging

import numpy as np

from ..converters.shape import is_static
from ..ir import Graph, Operand, Operator
from ..ir.vocab import is_aten
from ._aten import AtenEmitter
from ._match import const_array
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

#: creation ops whose values are unspecified
UNINITIALISED = {"aten.empty.memory_format", "aten.empty.default", "aten.new_empty.default",
                 "aten.empty_like.default", "aten.new_empty_strided.default", "aten.empty_strided.default",
                 "aten.empty_permuted.default"}
#: views of a tensor, and writes into it, through which a value stays (partly) uninitialised
_VIEWS = {"aten.slice.Tensor", "aten.select.int"}
_WRITES = {"aten.slice_scatter.default", "aten.select_scatter.default"}


def _rooted_in_empty(opd: Operand) -> bool:
    """``opd`` is (a view of, or writes into) an uninitialised tensor."""
    p = opd.producer
    while p is not None and p.inputs and (p.type in _VIEWS or p.type in _WRITES):
        p = p.inputs[0].producer
    return p is not None and p.type in UNINITIALISED


def _drop_copies(graph: Graph) -> int:
    """Copies into uninitialised memory whose source has the destination's shape and dtype: the
    source itself."""
    dropped = 0
    for op in list(graph.ops):
        if op.type != "aten.copy.default" or len(op.inputs) < 2 or len(op.outputs) != 1:
            continue
        dst, src, out = op.inputs[0], op.named_input("src") or op.inputs[1], op.outputs[0]
        if out.shape is not None and list(src.shape or ()) == list(out.shape) and src.dtype == out.dtype \
                and _rooted_in_empty(dst):  # a run-time size is the same symbol in both
            graph.replace_all_uses(out, src)
            graph.remove_op(op)
            graph.prune([dst])
            dropped += 1
    return dropped


def _write(op: Operator) -> tuple[int, int, int, Operand] | None:
    """``(dim, start, end, src)`` of one scatter along a dim of static size, with static bounds and
    step 1, else None (the other dims may have run-time sizes: the parts are joined along ``dim``)."""
    shape = op.outputs[0].shape
    dim = op.params.get("dim", 0)
    if shape is None or not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
        return None
    dim %= len(shape)
    size = shape[dim]
    if not isinstance(size, int):
        return None
    src = op.named_input("src")
    if src is None or src.dtype != op.outputs[0].dtype:
        return None
    if op.type == "aten.select_scatter.default":
        i = op.params.get("index")
        if not isinstance(i, int) or not -size <= i < size:
            return None
        i %= size
        return dim, i, i + 1, src
    start, end, step = op.params.get("start"), op.params.get("end"), op.params.get("step", 1)
    if step != 1 or not isinstance(start if start is not None else 0, int) \
            or not isinstance(end if end is not None else 0, int):
        return None
    start, end = (0 if start is None else start), (size if end is None else end)
    start, end = (max(0, min(size, v + size if v < 0 else v)) for v in (start, end))
    return (dim, start, end, src) if start < end else None


def _chain(op: Operator) -> list[tuple[Operator, tuple]] | None:
    """The writes, in program order, of a chain ending at ``op`` that starts from an ``empty``;
    None unless every write is static and along one dim."""
    writes = []
    cur = op
    while cur is not None and cur.type in _WRITES:
        w = _write(cur)
        if w is None or (writes and writes[0][1][0] != w[0]):
            return None
        writes.insert(0, (cur, w))
        cur = cur.inputs[0].producer
    return writes if cur is not None and cur.type in UNINITIALISED else None


def _pieces(size: int, writes: list[tuple[Operator, tuple]]) -> list[tuple[Operator, int, int]] | None:
    """Split ``[0, size)`` into runs each written last by one write: ``(write, start, end)``;
    None when some position is never written."""
    cuts = sorted({0, size, *(w[1] for _, w in writes), *(w[2] for _, w in writes)})
    runs: list[tuple[Operator, int, int]] = []
    for a, b in zip(cuts, cuts[1:]):
        last = next((op for op, (_, start, end, _) in reversed(writes) if start <= a and b <= end), None)
        if last is None:
            return None
        if runs and runs[-1][0] is last and runs[-1][2] == a:
            runs[-1] = (last, runs[-1][1], b)
        else:
            runs.append((last, a, b))
    return runs


def _assemble(graph: Graph, last: Operator) -> bool:
    writes = _chain(last)
    if writes is None:
        return False
    out = last.outputs[0]
    dim = writes[0][1][0]
    size = out.shape[dim]
    runs = _pieces(size, writes)
    if runs is None:
        return False
    bases = [w.inputs[0] for w, _ in writes]
    emit, by_op = AtenEmitter(graph, last), dict(writes)
    parts = []
    for write, a, b in runs:
        _, start, end, src = by_op[write]
        if write.type == "aten.select_scatter.default":
            shape = list(src.shape[:dim]) + [1] + list(src.shape[dim:])
            src = emit.op("aten.unsqueeze.default", {"self": src}, shape=shape, dtype=src.dtype,
                          name=f"{write.name}_unsqueeze", dim=dim)
        if (a, b) != (start, end):
            shape = list(out.shape[:dim]) + [b - a] + list(out.shape[dim + 1:])
            src = emit.op("aten.slice.Tensor", {"self": src}, shape=shape, dtype=src.dtype, name=f"{write.name}_part",
                          dim=dim, start=a - start, end=b - start, step=1)
        parts.append(src)
    if len(parts) == 1:
        graph.replace_all_uses(out, parts[0])
        graph.prune([out])
    else:
        new = replace_chain(graph, last, [], "aten.cat.default", parts, params={"dim": dim},
                            input_names=[f"tensors.{k}" for k in range(len(parts))])
        new.meta["target"] = "aten.cat.default"
        new.meta["rewritten_from"] = last.type
    graph.prune(bases)
    return True


def _masked_write(op: Operator) -> tuple[Operand, Operand, bool] | None:
    """``(base, value, written where the condition holds)`` of ``where(cond, value, base)`` (or
    ``where(cond, base, value)``) whose base is an ``empty`` or another ``where``, else None."""
    if op.type != "aten.where.self" or len(op.inputs) != 3:
        return None
    _, a, b = op.inputs
    for base, value, where_true in ((b, a, True), (a, b, False)):
        p = base.producer
        if p is not None and (p.type in UNINITIALISED or p.type == "aten.where.self"):
            return base, value, where_true
    return None


def _unmask(graph: Graph, last: Operator) -> bool:
    """A chain of masked writes over an ``empty`` whose constant masks cover it: the first write
    reads its own value instead of the ``empty``."""
    steps, cur = [], last
    while True:
        w = _masked_write(cur)
        if w is None:
            return False
        steps.append((cur, w[2]))
        if w[0].producer.type in UNINITIALISED:
            break
        cur = w[0].producer
    out, value = cur.outputs[0], w[1]
    if not is_static(out.shape) or list(value.shape or ()) != list(out.shape) or value.dtype != out.dtype:
        return False
    covered = np.zeros(out.shape, bool)
    for op, where_true in steps:
        mask = const_array(op.inputs[0])
        if mask is None or list(op.outputs[0].shape or ()) != list(out.shape):
            return False
        try:
            mask = np.broadcast_to(np.asarray(mask, bool), out.shape)
        except ValueError:
            return False
        covered |= mask if where_true else ~mask
    if not covered.all():
        return False
    graph.replace_all_uses(out, value)
    graph.prune([out])
    return True


@graph_pass("eliminate_uninitialised", "tensors written part by part into empty memory become the "
                                       "concatenation of the parts")
def run(graph: Graph, cx) -> None:
    if not any(op.type in UNINITIALISED for op in graph.ops):
        return
    dropped = _drop_copies(graph)
    assembled = 0
    for op in list(graph.ops):
        if op.type in _WRITES and is_aten(op) and op in graph.ops and _assemble(graph, op):
            assembled += 1
    for op in reversed(list(graph.ops)):
        if op.type == "aten.where.self" and op in graph.ops and _unmask(graph, op):
            assembled += 1
    if dropped or assembled:
        log.debug("eliminate_uninitialised: %d copies dropped, %d tensors assembled", dropped, assembled)
