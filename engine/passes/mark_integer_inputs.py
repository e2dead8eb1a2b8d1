"""Decide how each integer model input is fed to ncnn, and convert where it is used as numbers.

ncnn Mats hold float32, but its ``Embed`` layer reads token ids as **int32**: that is how ncnn
users (and pnnx's generated scripts) feed ids. So an integer input that indexes an embedding —
directly or through views (``view``, ``reshape``, ``unsqueeze``, ``squeeze``, ``flatten``,
int → int casts) — is an **int32** input (``op.meta["ncnn_dtype"] = "int32"``, carried to the
ncnn ``Input`` layer and ``graph.meta["inputs"]``). Every other integer input (an
``attention_mask``, ``token_type_ids`` used in arithmetic) is fed as float32 values
(``"float32"``, like float and bool inputs; integers are exact up to 2^24).

Where an int32 input is also used as numbers (RoBERTa's ``input_ids.ne(padding_idx)``, CLIP's
``argmax`` over the ids), those readers get a float copy: an ``embedding`` of the ids into the
table ``[[0], [1], ..., [V-1]]`` (``V`` = the largest vocabulary the ids index) and a ``squeeze``
— an ncnn ``Embed`` that converts int32 to float. Ids outside ``[0, V)`` are clamped there, as
ncnn's ``Embed`` clamps them for the lookups themselves.

The embeddings that read the int32 ids are marked ``meta["int32_indices"]``; any other
embedding reads computed (float) indices and is turned into arithmetic by
``decompose_runtime_lookups``.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
from .manager import graph_pass

INT_DTYPES = ("i64", "i32", "i16", "i8", "u8")
#: ops that pass an integer tensor's data on unchanged in order (a view)
_VIEWS = ("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.unsqueeze.default",
          "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.flatten.using_ints",
          "aten.view_copy.default")
_CASTS = ("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device")
#: ops that read only the size of a tensor (they need no float copy)
_SHAPE_READERS = ("aten.sym_size.int", "aten.sym_numel.default", "aten.sym_stride.int")


def _is_view(op: Operator) -> bool:
    if op.type in _VIEWS:
        return True
    return op.type in _CASTS and op.outputs[0].dtype in INT_DTYPES


def _uses(start: Operand) -> tuple[list[Operator], list[tuple[Operator, Operand]]]:
    """Embeddings indexed by ``start`` (through views) and every other (reader, operand) use."""
    lookups, others, pending = [], [], [start]
    while pending:
        opd = pending.pop()
        for c in opd.consumers:
            if c.type == "aten.embedding.default" and c.named_input("indices") is opd:
                lookups.append(c)
            elif _is_view(c) and c.inputs[0] is opd and len(c.outputs) == 1:
                pending.append(c.outputs[0])
            elif c.type not in _SHAPE_READERS:
                others.append((c, opd))
    return lookups, others


def _as_numbers(graph: Graph, opd: Operand, vocab: int, before: Operator) -> Operand:
    """A float copy of int32 ``opd`` (an Embed into ``[[0], [1], ...]``)."""
    em = AtenEmitter(graph, before)
    em.base = f"{opd.name}_values"
    table = em.constant(np.arange(vocab, dtype=np.float32).reshape(vocab, 1), name=f"{opd.name}_value_table")
    looked = em.op("aten.embedding.default", {"weight": table, "indices": opd}, shape=list(opd.shape) + [1],
                   dtype="f32", name=f"{opd.name}_as_float", padding_idx=-1, scale_grad_by_freq=False, sparse=False)
    looked.producer.meta["int32_indices"] = True
    return em.op("aten.squeeze.dim", {"self": looked}, shape=list(opd.shape), dtype=opd.dtype,
                 name=f"{opd.name}_values", dim=-1)


@graph_pass("mark_integer_inputs", "token-id inputs are fed as int32 (ncnn's Embed); other uses get float values")
def run(graph: Graph, cx) -> None:
    for inp in graph.ops_of_type("pnnx.Input"):
        out = inp.outputs[0]
        if out.dtype not in INT_DTYPES:
            continue
        lookups, others = _uses(out)
        inp.meta["ncnn_dtype"] = "int32" if lookups else "float32"
        if not lookups:
            continue
        for e in lookups:
            e.meta["int32_indices"] = True
        vocab = max(int(e.named_input("weight").shape[0]) for e in lookups)
        converted: dict[int, Operand] = {}
        for reader, opd in others:
            if reader.type in ("pnnx.Output",):
                continue  # an input returned as is stays what it was fed as
            if id(opd) not in converted:
                first = min((c for c in opd.consumers), key=graph.ops.index)
                converted[id(opd)] = _as_numbers(graph, opd, vocab, first)
            new = converted[id(opd)]
            for k, x in enumerate(reader.inputs):
                if x is opd:
                    graph.set_input(reader, k, new)
