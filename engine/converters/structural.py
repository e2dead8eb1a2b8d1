"""Graph structure: model inputs, outputs and constant tensors.

* ``pnnx.Input`` → ncnn ``Input`` (``meta["ncnn_dtype"]``: ``int32`` for token ids, see the
  ``mark_integer_inputs`` pass, else ``float32``);
* ``pnnx.Output`` → an ``Output`` marker (removed by the ``name_blobs`` pass: ncnn extracts any
  blob by name and has no output layer);
* ``pnnx.Attribute`` (a constant tensor used as data) → ncnn ``MemoryData``.
"""
from __future__ import annotations

import numpy as np

from ..convert.registry import ncnn_rule
from ..convert.shapes import batch_dim, ncnn_shape


@ncnn_rule("pnnx.Input")
def input_layer(ctx, op):
    out = op.outputs[0]
    shape = ncnn_shape(out)
    params = {}
    if shape is not None and all(isinstance(d, int) for d in shape):
        for key, d in zip(("w", "h", "d", "c") if len(shape) == 4 else ("w", "h", "c"), reversed(shape)):
            params[key] = d
    y = ctx.layer("Input", [], **params)
    y.producer.meta["ncnn_dtype"] = op.meta.get("ncnn_dtype", "float32")
    return y


@ncnn_rule("pnnx.Output")
def output_marker(ctx, op):
    """The marker remembers the value's PyTorch shape and batch axis: later passes may hand the
    output another blob holding the same data (a no-op Reshape bypassed), not the same view."""
    if not op.inputs:  # a Python constant returned (RT-DETR's ``dn_meta``, None at inference)
        ctx.warn(f"the model returns the constant {op.params.get('value')!r} here, not a tensor: "
                 "the ncnn model has no blob for it")
        return None
    x = op.inputs[0]
    ctx.emit("Output", [x], outputs=[])
    ctx.emitted[-1].meta["value"] = {"shape": None if x.shape is None else list(x.shape), "torch_dtype": x.dtype,
                                     "batch_dim": batch_dim(x)}
    return None


def _memorydata_check(op, ctx):
    a = op.attrs.get("data")
    if a is None:
        return "unsupported: attribute without data"
    shape = ncnn_shape(op.outputs[0])
    if shape is None or len(shape) > 4:
        return f"unsupported: constant of shape {list(a.shape)} has more than 4 dims after dropping the batch axis"
    return None


@ncnn_rule("pnnx.Attribute", validator=_memorydata_check)
def memory_data(ctx, op):
    shape = ncnn_shape(op.outputs[0])
    data = op.attrs["data"]
    if not shape:  # a 0-d constant (or a batch-of-one scalar) is a one-element blob
        shape = [1]
    keys = {1: ("w",), 2: ("w", "h"), 3: ("w", "h", "c"), 4: ("w", "h", "d", "c")}[len(shape)]
    params = {k: int(v) for k, v in zip(keys, reversed(shape))}
    arr = data.map(lambda a: np.ascontiguousarray(np.asarray(a, dtype=np.float32).reshape(shape)), shape, "f32")
    return ctx.layer("MemoryData", [], weights={"data": arr}, **params)
