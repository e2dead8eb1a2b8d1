"""Put ``F.local_response_norm`` back together (ATen level, before lowering) where ncnn's LRN
computes exactly the same thing.

PyTorch exports ``local_response_norm`` of an (N, C, H, W) input as a 3-D average pool over a
zero-padded channel axis::

    s = view(x * x, [N, 1, C, H, -1])
    s = pad(s, [0, 0, 0, 0, size // 2, (size - 1) // 2])          # constant_pad_nd in core ATen
    s = view(squeeze(avg_pool3d(s, [size, 1, 1], [1, 1, 1]), 1), x.shape)
    y = x / (s * alpha + k) ** beta

which becomes one ``F.local_response_norm`` (``size, alpha, beta, k``), lowered to ncnn's
``LRN`` (region across channels: ``x * (k + alpha / size * sum) ** -beta`` over the channels
``q - size/2 .. q + size/2``). That window is PyTorch's only for an odd ``size``; an even size,
or another rank, keeps the chain (it converts op by op: Padding + Pooling3D + BinaryOps). Every
intermediate value must have no other user.
"""
from __future__ import annotations

import logging

from ..ir import Graph, Operand, Operator
from ._match import Match, arg, number
from ._rewrite import replace_chain, rewrite_from_roots
from .manager import graph_pass

log = logging.getLogger(__name__)

_VIEWS = ("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default")
_SQUEEZES = ("aten.squeeze.dim", "aten.squeeze.dims")
_PADS = ("aten.pad.default", "aten.constant_pad_nd.default")


def _squeezes_dim1(op: Operator) -> bool:
    dim = op.params.get("dim")
    return dim == 1 or (isinstance(dim, (list, tuple)) and list(dim) == [1])


def _zero_channel_pad(op: Operator, size: int) -> bool:
    mode = op.params.get("mode") or "constant"
    value = op.params.get("value") or 0.0
    return mode == "constant" and float(value) == 0.0 and \
        list(op.params.get("pad") or []) == [0, 0, 0, 0, size // 2, (size - 1) // 2]


def _window_size(pool: Operator) -> int | None:
    """The channel window of the average pool when it is ``avg_pool3d(s, [size, 1, 1], 1)``."""
    p = pool.params
    kernel, stride = list(p.get("kernel_size") or []), list(p.get("stride") or [])
    if len(kernel) != 3 or kernel[1:] != [1, 1] or stride not in ([], [1, 1, 1], [1]):
        return None
    if p.get("ceil_mode") or not p.get("count_include_pad", True) or p.get("divisor_override") \
            or list(p.get("padding") or [0]) not in ([0], [0, 0, 0]):
        return None
    return int(kernel[0])


def _square_sum_of(m: Match, s: Operand, x: Operand) -> int | None:
    """The window size when ``s`` is the channel-window average of ``x * x`` (see the docstring)."""
    view = m.take(s, *_VIEWS)
    squeeze = m.take(view.inputs[0] if view else None, *_SQUEEZES)
    if squeeze is None or not _squeezes_dim1(squeeze) or list(view.outputs[0].shape or []) != list(x.shape):
        return None
    pool = m.take(squeeze.inputs[0], "aten.avg_pool3d.default")
    size = _window_size(pool) if pool else None
    pad = m.take(pool.inputs[0], *_PADS) if size else None
    if pad is None or not _zero_channel_pad(pad, size):
        return None
    view5 = m.take(pad.inputs[0], *_VIEWS)
    n, c, h = x.shape[:3]
    if view5 is None or list(view5.outputs[0].shape or [])[:4] != [n, 1, c, h]:
        return None
    square = m.take(view5.inputs[0], "aten.mul.Tensor")
    if square is None or arg(square, "self") is not x or arg(square, "other") is not x:
        return None
    return size


def _fuse(graph: Graph, root: Operator) -> bool:
    if root.type != "aten.div.Tensor":
        return False
    x, denom = arg(root, "self"), arg(root, "other")
    if x is None or x.shape is None or len(x.shape) != 4:
        return False
    m = Match()
    power = m.take(denom, "aten.pow.Tensor_Scalar")
    beta = number(power, "exponent") if power else None
    add = m.take(arg(power, "self"), "aten.add.Tensor", "aten.add.Scalar") if beta is not None else None
    k = number(add, "other") if add is not None and add.params.get("alpha", 1) == 1 else None
    scale = m.take(arg(add, "self"), "aten.mul.Tensor", "aten.mul.Scalar") if k is not None else None
    alpha = number(scale, "other") if scale else None
    size = _square_sum_of(m, arg(scale, "self"), x) if alpha is not None else None
    if size is None or size % 2 == 0:
        return False
    replace_chain(graph, root, m.ops, "F.local_response_norm", [x], input_names=["input"],
                  params={"size": size, "alpha": float(alpha), "beta": float(beta), "k": float(k)})
    return True


@graph_pass("fuse_local_response_norm", "turn PyTorch's avg_pool3d form of local_response_norm (odd size, "
            "N, C, H, W) back into one op for ncnn's LRN")
def run(graph: Graph, cx) -> None:
    rewrite_from_roots(graph, _fuse, "fused local_response_norm", ("aten.div.Tensor",))
