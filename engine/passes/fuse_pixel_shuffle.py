"""Fuse the ``reshape → permute → reshape`` chains that ``run_decompositions()`` makes of
``pixel_shuffle`` / ``pixel_unshuffle`` back into ``F.pixel_shuffle`` / ``F.pixel_unshuffle``
(pnnx's ``fuse_pixel_shuffle`` / ``fuse_pixel_unshuffle``)::

    shuffle:   (N, C·r², H, W) → (N, C, r, r, H, W) → dims (0, 1, 4, 2, 5, 3) → (N, C, H·r, W·r)
    unshuffle: (N, C, H·r, W·r) → (N, C, H, r, W, r) → dims (0, 1, 3, 5, 2, 4) → (N, C·r², H, W)
"""
from __future__ import annotations

from .fuse_channel_shuffle import fuse_chain, reshape_permute_reshape_chains
from .manager import graph_pass


def _shuffle_factor(x, mid, out, dims) -> int | None:
    if dims != [0, 1, 4, 2, 5, 3] or len(x) != 4:
        return None
    n, c, r, r2, h, w = mid
    if r == r2 and x == [n, c * r * r, h, w] and out == [n, c, h * r, w * r]:
        return r
    return None


def _unshuffle_factor(x, mid, out, dims) -> int | None:
    if dims != [0, 1, 3, 5, 2, 4] or len(x) != 4:
        return None
    n, c, h, r, w, r2 = mid
    if r == r2 and x == [n, c, h * r, w * r] and out == [n, c * r * r, h, w]:
        return r
    return None


@graph_pass("fuse_pixel_shuffle", "reshape → permute → reshape chains of (un)shuffling pixels → F.pixel_(un)shuffle")
def run(graph, cx):
    for chain in list(reshape_permute_reshape_chains(graph)):
        if any(op not in graph.ops for op in (chain.first, chain.permute, chain.last)) or len(chain.mid_shape) != 6:
            continue
        args = (list(chain.input.shape), chain.mid_shape, list(chain.output.shape), chain.dims)
        r = _shuffle_factor(*args)
        if r is not None:
            fuse_chain(graph, chain, "F.pixel_shuffle", {"upscale_factor": r})
            continue
        r = _unshuffle_factor(*args)
        if r is not None:
            fuse_chain(graph, chain, "F.pixel_unshuffle", {"downscale_factor": r})
