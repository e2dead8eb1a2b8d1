"""A chain of reshapes and permutes as one rearrangement of *atoms* (for
:mod:`legalize_tensor_rank`).

The source tensor's data is cut into atoms: runs of elements that every step of the chain keeps
together and in order. A reshape that splits a dim inside an atom splits the atom (everywhere —
an atom is contiguous in the source and in every later view); a permute reorders the atoms of
its dims. At the end the chain is a permutation of the atoms: the source viewed as the atoms'
sizes in source order, permuted into output order, viewed as the output. Atoms adjacent and in
order on both sides merge, size-1 atoms vanish, and what is left is planned as the fewest
permutes of at most four blocks (:func:`._rank_plan.plan_block_permutes`).
"""
from __future__ import annotations

import math
from typing import Sequence

from ..records import record
from ._rank_plan import merge_kept_runs


class NotRearrangement(Exception):
    """The chain cannot be followed atom by atom (a split that does not divide)."""


@record
class Rearrangement:
    """Source data viewed as ``sizes`` (atoms in source order) and permuted by ``order`` (the
    atoms' indices in output order)."""

    sizes: list[int]
    order: list[int]


class AtomView:
    """The current view: dims as lists of atom ids; ``size[a]`` per atom; ``base`` the atom ids
    in source order."""

    def __init__(self, shape: Sequence[int]):
        self.size: dict[int, int] = {}
        self._next = 0
        self.dims: list[list[int]] = []
        for n in shape:
            self.dims.append([self._new(n)] if n != 1 else [])
        self.base = [a for d in self.dims for a in d]

    def _new(self, n: int) -> int:
        a, self._next = self._next, self._next + 1
        self.size[a] = n
        return a

    def _split(self, a: int, outer: int) -> tuple[int, int]:
        """Atom ``a`` as (outer, inner) atoms of sizes ``outer`` and ``size/outer``."""
        n = self.size[a]
        if n % outer:
            raise NotRearrangement(f"cannot split {n} by {outer}")
        hi, lo = self._new(outer), self._new(n // outer)
        del self.size[a]

        def swap(seq):
            i = seq.index(a)
            seq[i:i + 1] = [hi, lo]

        swap(self.base)
        for d in self.dims:
            if a in d:
                swap(d)
        return hi, lo

    def _coalesced(self) -> list[int]:
        """The view's atoms in order, those next to each other in order in the source too
        merged into one (so a reshape may cut them anywhere)."""
        pos = {a: i for i, a in enumerate(self.base)}
        runs: list[list[int]] = []
        for a in (a for d in self.dims for a in d):
            if runs and pos[runs[-1][-1]] + 1 == pos[a]:
                runs[-1].append(a)
            else:
                runs.append([a])
        flat = []
        for run in runs:
            if len(run) > 1:
                merged = self._new(math.prod(self.size.pop(a) for a in run))
                i = self.base.index(run[0])
                self.base[i:i + len(run)] = [merged]
                run = [merged]
            flat.append(run[0])
        return flat

    def reshape(self, shape: Sequence[int]) -> None:
        flat = self._coalesced()
        dims: list[list[int]] = []
        i = 0
        for n in shape:
            dim, acc = [], 1
            while acc < n:
                if i >= len(flat):
                    raise NotRearrangement("reshape to a larger size")
                a = flat[i]
                if acc * self.size[a] <= n:
                    dim.append(a)
                    acc *= self.size[a]
                    i += 1
                else:
                    if n % acc:
                        raise NotRearrangement(f"dim {n} does not divide into the atoms")
                    hi, lo = self._split(a, n // acc)
                    flat[i:i + 1] = [hi, lo]
            if acc != n:
                raise NotRearrangement(f"dim {n} is not a product of the atoms")
            dims.append(dim)
        if i != len(flat):
            raise NotRearrangement("reshape to a smaller size")
        self.dims = dims

    def permute(self, dims: Sequence[int]) -> None:
        self.dims = [self.dims[d] for d in dims]

    def result(self) -> Rearrangement:
        out = [a for d in self.dims for a in d]
        groups = merge_kept_runs(out, self.base)
        sizes = [math.prod(self.size[a] for a in g) for g in groups]
        first = {g[0]: k for k, g in enumerate(groups)}
        order = [first[a] for a in out if a in first]
        return Rearrangement(sizes, order)
