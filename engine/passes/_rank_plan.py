"""Index arithmetic for :mod:`legalize_tensor_rank`: merging the dims a permutation keeps
together, and splitting a permutation of more than four blocks into permutations of at most
four.

A *block permutation* step regroups the current sequence of items into at most four contiguous
blocks and reorders the blocks: ncnn runs it as one ``Reshape`` (the blocks' sizes) and one
``Permute`` of at most 4 dims. :func:`plan_block_permutes` finds a shortest sequence of such
steps (breadth-first over the orderings, up to 6 items; insertion steps beyond).
"""
from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Sequence

MAX_DIMS = 4


def merge_kept_runs(order: Sequence[int], kept: Sequence[int]) -> list[list[int]]:
    """Group the dims ``kept`` (in input order) into runs that stay consecutive and in order in
    the output order ``order`` (a permutation of ``kept``); returns the groups in input order."""
    pos = {d: i for i, d in enumerate(kept)}
    groups: list[list[int]] = []
    for d in order:
        if groups and pos[groups[-1][-1]] + 1 == pos[d]:
            groups[-1].append(d)
        else:
            groups.append([d])
    return sorted(groups, key=lambda g: pos[g[0]])


def _apply(seq: tuple, cuts: tuple, order: tuple) -> tuple:
    bounds = (0,) + cuts + (len(seq),)
    blocks = [seq[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
    return tuple(x for b in order for x in blocks[b])


def _steps(n: int):
    """Every non-trivial block permutation of ``n`` items: (cuts, block order)."""
    for nblocks in range(2, MAX_DIMS + 1):
        for cuts in itertools.combinations(range(1, n), nblocks - 1):
            for order in itertools.permutations(range(nblocks)):
                if order != tuple(range(nblocks)):
                    yield cuts, order


@lru_cache(maxsize=256)
def plan_block_permutes(target: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """Steps ``(cuts, block_order)`` turning ``range(n)`` into the order ``target``: apply each
    by cutting the current sequence at ``cuts`` and concatenating the blocks in ``block_order``."""
    n = len(target)
    start = tuple(range(n))
    if target == start:
        return ()
    if n <= 6:
        steps = list(_steps(n))
        previous = {start: None}
        frontier = [start]
        while frontier:
            nxt = []
            for seq in frontier:
                for cuts, order in steps:
                    new = _apply(seq, cuts, order)
                    if new in previous:
                        continue
                    previous[new] = (seq, cuts, order)
                    if new == target:
                        path = []
                        while previous[new] is not None:
                            seq_, cuts_, order_ = previous[new]
                            path.append((cuts_, order_))
                            new = seq_
                        return tuple(reversed(path))
                    nxt.append(new)
            frontier = nxt
    # insertion: bring target's items into place one by one (each a swap of at most 4 blocks:
    # the placed prefix, the items before the next one, the next one, the rest)
    seq, path = start, []
    for i, item in enumerate(target):
        j = seq.index(item)
        if j == i:
            continue
        spans = [s for s in ((0, i), (i, j), (j, j + 1), (j + 1, n)) if s[1] > s[0]]
        moved = spans.index((j, j + 1))
        order = tuple(range(moved - 1)) + (moved, moved - 1) + tuple(range(moved + 1, len(spans)))
        cuts = tuple(s[0] for s in spans[1:])
        path.append((cuts, order))
        seq = _apply(seq, cuts, order)
    return tuple(path)


def apply_plan(seq: Sequence, plan) -> list:
    out = tuple(seq)
    for cuts, order in plan:
        out = _apply(out, cuts, order)
    return list(out)
