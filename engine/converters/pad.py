"""Padding: constant / reflect / replicate pads of the last 1-3 dims.

ATen → pnnx ``F.pad`` (``pad`` in PyTorch's order — last dim first, (begin, end) pairs —,
``mode``, ``value``):

* ``aten.constant_pad_nd.default``, ``aten.pad.default`` (constant/reflect/replicate);
* ``aten.reflection_pad1d|2d|3d.default``, ``aten.replication_pad1d|2d|3d.default``;
* ``aten.index.Tensor`` with one constant index vector on a non-batch dim that reads the input
  the way a reflect or replicate pad does — what ``run_decompositions()`` turns those pads into
  (after ``fold_constants`` made the index a constant). A vector that repeats the input the way
  a nearest resize does (core ATen's ``upsample_nearest1d``) becomes ``F.interpolate``, and so do
  one constant vector per spatial dim of an (N, C, ...) input, broadcast against each other as
  an outer product, each reading its dim as a nearest resize does (core ATen's
  ``upsample_nearest3d``).

pnnx → ncnn: ``Padding`` (type 0 constant, 1 replicate, 2 reflect; left/right on w, top/bottom
on h, front/behind on c of a 3-D blob or d of a 4-D one); negative pads crop (``Crop``).
"""
from __future__ import annotations

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import is_batched, ncnn_shape
from ..ncnn.enums import PaddingType
from .shape import index_vector, intermediate, outer_index_vectors

_TYPE = {"constant": PaddingType.CONSTANT, "replicate": PaddingType.REPLICATE, "reflect": PaddingType.REFLECT}


def _pad(ctx, x, pad, mode: str, value: float = 0.0):
    computed = [str(p) for p in pad if not isinstance(p, (int, np.integer))]
    if computed:  # e.g. Swin's pad to a multiple of the window at a run-time image size
        ctx.unsupported(f"padding by amounts computed at run time ({', '.join(computed)}): ncnn's Padding takes "
                        "fixed amounts (export with a static size, or pad outside the model)")
    return ctx.emit("F.pad", [x], params={"pad": [int(p) for p in pad], "mode": mode,
                                          "value": float(value) if mode == "constant" else None})


@aten_converter("aten.constant_pad_nd.default")
def constant_pad_nd(ctx, op):
    return _pad(ctx, op.inputs[0], op.params["pad"], "constant", op.params.get("value") or 0.0)


@aten_converter("aten.pad.default")
def pad(ctx, op):
    mode = op.params.get("mode") or "constant"
    return _pad(ctx, op.inputs[0], op.params["pad"], mode, op.params.get("value") or 0.0)


def _fixed_mode(mode: str):
    def convert(ctx, op):
        return _pad(ctx, op.inputs[0], op.params["padding"], mode)

    return convert


for _n in (1, 2, 3):
    aten_converter(f"aten.reflection_pad{_n}d.default")(_fixed_mode("reflect"))
    aten_converter(f"aten.replication_pad{_n}d.default")(_fixed_mode("replicate"))


# ----------------------------------------------------------------------------- index patterns

def _pad_pattern(idx: np.ndarray, n: int):
    """(mode, before, after) when ``idx`` reads a size-``n`` axis as a reflect/replicate pad."""
    m = len(idx)
    for before in range(0, m - n + 1):
        pos = np.arange(-before, m - before)
        if np.array_equal(idx, np.clip(pos, 0, n - 1)):
            return "replicate", before, m - n - before
        if n > 1 and np.array_equal(idx, (n - 1) - np.abs((n - 1) - np.abs(pos))):
            return "reflect", before, m - n - before
    return None


def _nearest_pattern(idx: np.ndarray, n: int) -> bool:
    """Whether ``idx`` is what ncnn's nearest Interp reads for output size len(idx) > n."""
    return len(idx) > n and np.array_equal(idx, _ncnn_nearest(len(idx), n))


def _ncnn_nearest(m: int, n: int) -> np.ndarray:
    """The source index ncnn's nearest Interp reads for each of ``m`` outputs from ``n`` inputs."""
    ws = np.float32(n) / np.float32(m)
    return np.minimum((np.arange(m, dtype=np.float32) * ws).astype(np.int64), n - 1)


def _outer_nearest(op, ctx) -> list[int] | None:
    """The output sizes when ``op`` indexes every spatial dim (2 and up) of an (N, C, ...)
    input with constant vectors broadcast as an outer product, each a nearest resize of its dim."""
    x = op.inputs[0]
    found = outer_index_vectors(op, ctx)
    if x.shape is None or found is None or [d for d, _ in found] != list(range(2, len(x.shape))):
        return None
    for d, vec in found:
        if not isinstance(x.shape[d], int) or not np.array_equal(vec, _ncnn_nearest(len(vec), x.shape[d])):
            return None
    return [len(vec) for _, vec in found]


def _index_kind(op, ctx):
    x = op.inputs[0]
    sizes = _outer_nearest(op, ctx)
    if sizes is not None:
        return ("nearest", 2, sizes)
    found = index_vector(op, ctx)
    if found is None or x.shape is None:
        return None
    dim, idx, _ = found
    size = x.shape[dim]
    if dim == 0 or not isinstance(size, int):
        return None
    pattern = _pad_pattern(idx, size)
    if pattern is not None:
        return ("pad", dim) + pattern
    if dim == len(x.shape) - 1 and _nearest_pattern(idx, size):
        return ("nearest", dim, [len(idx)])
    return None


def _check_index(op, ctx):
    if _index_kind(op, ctx) is None:
        return ("unsupported: indexing with these indices (converted here: one constant index vector on a non-batch "
                "dim that reads like a reflect/replicate pad or a nearest resize, or one per spatial dim that read "
                "like a nearest resize)")
    return None


@aten_converter("aten.index.Tensor", validator=_check_index)
def index_pattern(ctx, op):
    x = op.inputs[0]
    kind = _index_kind(op, ctx)
    if kind[0] == "nearest":
        return ctx.emit("F.interpolate", [x], params={"size": kind[2], "mode": "nearest", "recompute_scale_factor": None})
    _, dim, mode, before, after = kind
    pad_list = [0, 0] * (len(x.shape) - 1 - dim) + [before, after]
    return _pad(ctx, x, pad_list, mode)


# ----------------------------------------------------------------------------- pnnx → ncnn

#: ncnn Padding param pairs for the innermost dims of a blob of each rank (innermost first)
_SIDES = {1: [("left", "right")], 2: [("left", "right"), ("top", "bottom")],
          3: [("left", "right"), ("top", "bottom"), ("front", "behind")],
          4: [("left", "right"), ("top", "bottom"), ("front", "behind")]}


def _check_pad(op, ctx):
    x = op.inputs[0]
    mode = op.params.get("mode")
    if mode not in _TYPE:
        return f"unsupported: pad mode {mode!r} (ncnn Padding has constant, reflect, replicate)"
    src = ncnn_shape(x)
    if not src or len(src) > 4:
        return f"unsupported: pad of a {len(src or [])}-D ncnn blob"
    pads = op.params["pad"]
    k = _padded_dims(pads)
    torch_rank = len(x.shape)
    if is_batched(x) and k >= torch_rank and any(pads[2 * (torch_rank - 1):]):
        return "unsupported: pad along the batch axis"
    if k > len(_SIDES[len(src)]):
        return f"unsupported: pad of {k} dims of a {len(src)}-D ncnn blob"
    return None


def _padded_dims(pads) -> int:
    """How many dims (innermost first) ``pads`` touches: trailing all-zero pairs are no pad."""
    k = len(pads) // 2
    while k and not pads[2 * k - 2] and not pads[2 * k - 1]:
        k -= 1
    return k


@ncnn_rule("F.pad", validator=_check_pad)
def pad_ncnn(ctx, op):
    x = op.inputs[0]
    src = ncnn_shape(x)
    pads = list(op.params["pad"])
    sides = _SIDES[len(src)]
    grow = {}
    crop_axes, starts, ends = [], [], []
    padded = list(src)
    for i in range(_padded_dims(pads)):
        before, after = pads[2 * i], pads[2 * i + 1]
        axis = len(src) - 1 - i
        names = sides[i]
        if before > 0 or after > 0:
            grow[names[0]], grow[names[1]] = max(before, 0), max(after, 0)
            size = padded[axis]
            padded[axis] = size + grow[names[0]] + grow[names[1]] if isinstance(size, int) else None
        if before < 0 or after < 0:
            crop_axes.append(axis)
            starts.append(-min(before, 0))
            ends.append(min(after, 0) or -233)
    y = x
    if grow:
        mode = op.params["mode"]
        y = ctx.layer("Padding", [x], type=int(_TYPE[mode]), value=float(op.params.get("value") or 0.0), **grow)
        if not crop_axes:
            return y
        intermediate(y, padded)
    if not crop_axes:  # an all-zero pad
        return x
    return ctx.layer("Crop", [y], starts=starts, ends=ends, axes=crop_axes)
