"""Fuse the channel-shuffle pattern (ShuffleNet's ``view → transpose → view``, and what
``run_decompositions()`` makes of ``channel_shuffle``) into ``nn.ChannelShuffle``, as pnnx's
``fuse_channel_shuffle`` does::

    Tensor.reshape (N, C, H, W) → (N, g, C/g, H, W)
    Tensor.permute dims=(0, 2, 1, 3, 4)   or   torch.transpose dim0=1 dim1=2
    Tensor.reshape → (N, C, H, W)

and the same over (N, C, D, H, W) (ncnn's ShuffleChannel moves whole channels of a 3-D or
4-D blob).

The matcher of ``reshape → permute → reshape`` chains is shared with ``fuse_pixel_shuffle``.
"""
from __future__ import annotations

from typing import Any

from ..ir import Graph, Operand, Operator
from ..records import record
from ._rewrite import replace_chain
from .manager import graph_pass

_RESHAPE = ("Tensor.reshape", "Tensor.view")
_PERMUTE = ("Tensor.permute", "torch.permute", "torch.transpose")


@record
class Chain:
    """A ``reshape → permute → reshape`` chain whose intermediates have no other use."""

    first: Operator
    permute: Operator
    last: Operator
    dims: list[int]

    @property
    def input(self) -> Operand:
        return self.first.inputs[0]

    @property
    def mid_shape(self) -> list:
        return list(self.first.outputs[0].shape or [])

    @property
    def output(self) -> Operand:
        return self.last.outputs[0]


def _single_use(op: Operator, consumer_types: tuple[str, ...]) -> Operator | None:
    if len(op.outputs) != 1 or len(op.outputs[0].consumers) != 1:
        return None
    c = op.outputs[0].consumers[0]
    return c if c.type in consumer_types else None


def _dims(op: Operator) -> list[int] | None:
    rank = len(op.inputs[0].shape or [])
    if op.type == "torch.transpose":
        dims = list(range(rank))
        d0, d1 = op.params["dim0"] % rank, op.params["dim1"] % rank
        dims[d0], dims[d1] = dims[d1], dims[d0]
        return dims
    return [d % rank for d in op.params.get("dims", [])] if rank else None


def reshape_permute_reshape_chains(graph: Graph):
    """Every :class:`Chain` in the graph (static shapes only)."""
    for op in list(graph.ops):
        if op.type not in _RESHAPE or not op.inputs:
            continue
        perm = _single_use(op, _PERMUTE)
        last = _single_use(perm, _RESHAPE) if perm is not None else None
        if last is None:
            continue
        shapes = [op.inputs[0].shape, op.outputs[0].shape, last.outputs[0].shape]
        if any(s is None or not all(isinstance(d, int) for d in s) for s in shapes):
            continue
        dims = _dims(perm)
        if dims is not None:
            yield Chain(op, perm, last, dims)


def fuse_chain(graph: Graph, chain: Chain, type_: str, params: dict[str, Any]) -> Operator:
    """Replace the chain by one operator ``type_`` from its input to its output."""
    return replace_chain(graph, chain.last, [chain.first, chain.permute], type_, [chain.input], params=params)


@graph_pass("fuse_channel_shuffle", "reshape(N,g,C/g,[D,]H,W) → transpose(1,2) → reshape(N,C,[D,]H,W) → "
            "nn.ChannelShuffle")
def run(graph, cx):
    for chain in list(reshape_permute_reshape_chains(graph)):
        if any(op not in graph.ops for op in (chain.first, chain.permute, chain.last)):
            continue
        x, mid = chain.input.shape, chain.mid_shape
        if len(x) not in (4, 5) or len(mid) != len(x) + 1 or chain.dims != [0, 2, 1] + list(range(3, len(mid))):
            continue
        n, c, *spatial = x
        groups = mid[1]
        if mid != [n, groups, c // groups, *spatial] or groups * (c // groups) != c or chain.output.shape != x:
            continue
        fuse_chain(graph, chain, "nn.ChannelShuffle", {"groups": groups})
