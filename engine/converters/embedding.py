"""Embedding lookups.

ATen → pnnx: ``aten.embedding.default(weight, indices)`` with a constant 2-D ``weight``:

* constant ``indices`` (position ids made with ``arange``, folded earlier) → the looked-up rows
  as a constant (``pnnx.Attribute``, computed lazily) — a positional embedding costs nothing;
* indices that are an int32 model input (``meta["int32_indices"]``, set by the
  ``mark_integer_inputs`` pass: token ids) → ``nn.Embedding`` (``num_embeddings,
  embedding_dim``; attr ``weight``). ``padding_idx`` only matters for training and is ignored;
* computed indices are turned into arithmetic before lowering (``decompose_runtime_lookups``);
  one that reaches this rule is refused with the reason.

pnnx → ncnn: ``Embed`` (``num_output, input_dim, weight_data_size``; tagged weight). ncnn's Embed
reads its input as **int32** token ids (feed an ``int32`` Mat; out-of-range ids are clamped) and
looks up ``w`` of them, for any number of them (a dynamic sequence length); indices of more than
one (batch-less) dim are flattened before the lookup and the ``(n, D)`` result reshaped back.
"""
from __future__ import annotations

import logging
import math

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_shape
from ._weights import derived
from .shape import intermediate, reshape_to

log = logging.getLogger(__name__)


def _check_weight(op, ctx):
    w = ctx.attribute(op.named_input("weight"))
    if w is None or len(w.shape) != 2:
        return f"unsupported: embedding weight {op.named_input('weight').name} is not a constant 2-D tensor"
    return None


@aten_converter("aten.embedding.default", validator=_check_weight)
def embedding(ctx, op):
    weight = ctx.attribute(op.named_input("weight"))
    indices = op.named_input("indices")
    ids = ctx.const_value(indices)
    if ids is not None:
        ids = np.asarray(ids, np.int64)
        rows, dim = (int(s) for s in weight.shape)
        if ids.size and (ids.min() < -rows or ids.max() >= rows):
            ctx.unsupported(f"constant embedding indices out of range [0, {rows})")
        data = derived(lambda: np.ascontiguousarray(np.asarray(weight.data)[ids]), ids.shape + (dim,), weight.dtype)
        return ctx.emit("pnnx.Attribute", [], attrs={"data": data}, dtype=weight.dtype, shape=list(ids.shape) + [dim])
    if not op.meta.get("int32_indices"):
        ctx.unsupported(f"embedding indices {indices.name} are computed in the graph and could not be turned into a "
                        "lookup by arithmetic (ncnn's Embed reads int32 ids from a model input)")
    return ctx.emit("nn.Embedding", [indices], attrs={"weight": weight},
                    params={"num_embeddings": int(weight.shape[0]), "embedding_dim": int(weight.shape[1])})


def _check_indices(op, ctx):
    shape = ncnn_shape(op.inputs[0])
    if shape is not None and len(shape) == 1:
        return None  # Embed reads a 1-D blob of any length
    if shape is None or not all(isinstance(d, int) for d in shape):
        return f"unsupported: embedding indices {op.inputs[0].name} of dynamic or unknown shape {op.inputs[0].shape}"
    if len(shape) > 3:
        return f"unsupported: embedding indices of {len(shape)} dims without the batch axis"
    return None


@ncnn_rule("nn.Embedding", validator=_check_indices)
def embed_layer(ctx, op):
    x = op.inputs[0]
    n, d = int(op.params["num_embeddings"]), int(op.params["embedding_dim"])
    shape = ncnn_shape(x)
    if shape is not None and len(shape) == 1:  # already the 1-D blob Embed reads (of any length)
        return ctx.layer("Embed", [x], weights={"weight_data": op.attrs["weight"]}, num_output=d, input_dim=n,
                         weight_data_size=n * d)
    words = math.prod(shape) if shape else 1
    flat = reshape_to(ctx, x, [words])
    y = ctx.layer("Embed", [flat], weights={"weight_data": op.attrs["weight"]}, num_output=d, input_dim=n,
                  weight_data_size=n * d)
    want = ncnn_shape(op.outputs[0])
    if want == [words, d]:
        return y
    return reshape_to(ctx, intermediate(y, [words, d]), want, final=True)
