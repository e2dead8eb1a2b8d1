"""The module hierarchy of a display graph as a tree of groups — pure Python, no Qt.

:func:`group_tree` builds a :class:`GroupTree` from the module path every
:class:`~gui.graph.model.DisplayNode` carries (``nn_module_stack`` for ATen nodes, provenance for
pnnx / ncnn operators, so the three views group alike). Group 0 is the root (the whole model);
every other group is one ``nn.Module`` path (``layers.3.attn``) with its class when the graph
knows it.

Rules that keep the boxes meaningful:

* a parameter, buffer or constant belongs to the group of the operator that reads it (it is
  drawn above that operator, and its own module may own no operator at all);
* a module whose whole subtree holds fewer than :data:`MIN_GROUP_OPS` operators gets no box of
  its own: its nodes go to the nearest enclosing group (``conv1 · Conv2d`` around one conv node
  says nothing the node does not);
* a module with a single child group and no operators of its own is one box with that child:
  the outer module's, unless only the child has a real class (``encoder`` · TransformerEncoder
  holds ``encoder.layers.0`` … directly; its ``encoder.layers`` ModuleList, never called, has no
  class and no box).

The tree also answers what the views ask: the visible representative of a node for a set of
expanded groups (:meth:`GroupTree.representative`), the groups to expand to reveal a node
(:meth:`GroupTree.ancestors`), and expansion sets (:meth:`GroupTree.to_depth`,
:meth:`GroupTree.default_expanded`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from .model import PARAM, DisplayGraph, plain_path, scope_label

#: A module subtree with fewer operators than this is not a box (its nodes join the parent).
MIN_GROUP_OPS = 2
#: Default expansion keeps about this many boxes and nodes on screen.
DEFAULT_VISIBLE = 400
#: ... but never fewer than this many when a group can be opened
MIN_VISIBLE = 12

ROOT = 0


@dataclass
class Group:
    """One module: ``path`` (``""`` for the root), class name (short, ``Linear``), parent and
    child group ids, the node indices it holds directly (``members``), its depth (root 0) and
    the number of nodes in its whole subtree (``size``)."""

    id: int
    path: str
    type: str
    parent: int
    depth: int
    children: list[int] = field(default_factory=list)
    members: list[int] = field(default_factory=list)
    size: int = 0
    ops: int = 0  #: operators (not parameters) in the subtree
    first: int = 0  #: index of the subtree's first operator (its place in topological order)

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1] if self.path else ""

    @property
    def title(self) -> str:
        """The module path; a repeated call says which (``layer1.0.mlp (call 2)``)."""
        return scope_label(self.path)

    @property
    def label(self) -> str:
        """``layers.3.attn · MultiheadAttention``."""
        return f"{self.title} · {self.type}" if self.type else self.title


def short_class(qualified: str) -> str:
    """``torch.nn.modules.linear.Linear`` → ``Linear``."""
    return qualified.rsplit(".", 1)[-1] if qualified else ""


class GroupTree:
    """Groups of one display graph; see the module docstring."""

    def __init__(self, groups: list[Group], group_of: list[int]):
        self.groups = groups
        #: innermost group of every node
        self.group_of = group_of
        self.by_path = {g.path: g.id for g in groups}

    def __len__(self) -> int:
        return len(self.groups)

    @property
    def root(self) -> Group:
        return self.groups[ROOT]

    @property
    def max_depth(self) -> int:
        return max((g.depth for g in self.groups), default=0)

    def ancestors(self, node: int) -> list[int]:
        """Groups containing ``node``, innermost first, without the root."""
        out = []
        g = self.group_of[node]
        while g != ROOT:
            out.append(g)
            g = self.groups[g].parent
        return out

    def group_ancestors(self, gid: int) -> list[int]:
        """Groups containing group ``gid`` (not itself), innermost first, without the root."""
        out = []
        g = self.groups[gid].parent
        while g not in (ROOT, -1):
            out.append(g)
            g = self.groups[g].parent
        return out

    def representative(self, node: int, expanded: set[int] | frozenset[int]) -> int:
        """What shows ``node`` when exactly ``expanded`` groups are open: the node itself
        (``node``) or the outermost collapsed group containing it (``-1 - group id``)."""
        rep = node
        g = self.group_of[node]
        while g != ROOT:
            if g not in expanded:
                rep = -1 - g
            g = self.groups[g].parent
        return rep

    def subtree(self, gid: int) -> list[int]:
        """Group ``gid`` and all groups below it."""
        out, stack = [], [gid]
        while stack:
            g = stack.pop()
            out.append(g)
            stack.extend(self.groups[g].children)
        return out

    def nodes_of(self, gid: int) -> list[int]:
        """Every node index in the subtree of ``gid``."""
        return [n for g in self.subtree(gid) for n in self.groups[g].members]

    def to_depth(self, depth: int) -> set[int]:
        """Groups to expand so that every module down to ``depth`` levels below the model is open
        (0: everything collapsed)."""
        return {g.id for g in self.groups if g.id != ROOT and g.depth <= depth}

    def all_groups(self) -> set[int]:
        return {g.id for g in self.groups if g.id != ROOT}

    def visible_count(self, expanded: set[int]) -> int:
        """Boxes and nodes drawn with ``expanded`` groups open."""
        n, stack = 0, [ROOT]
        while stack:
            g = self.groups[stack.pop()]
            n += len(g.members)
            for c in g.children:
                if c in expanded:
                    stack.append(c)
                else:
                    n += 1
        return n

    def default_expanded(self, budget: int = DEFAULT_VISIBLE) -> set[int]:
        """What a new graph opens with: groups level by level (outermost first, in graph order)
        as long as at most ``budget`` things stay visible — all of a small graph, the top-level
        boxes of a huge one; a level showing almost nothing (a model wrapped in one module) is
        opened whatever it costs."""
        expanded: set[int] = set()
        visible = self.visible_count(expanded)
        for g in sorted(self.groups[1:], key=lambda g: (g.depth, g.first)):
            if g.parent != ROOT and g.parent not in expanded:
                continue
            grows = len(g.members) + len(g.children) - 1
            if visible + grows <= budget or visible < MIN_VISIBLE:
                expanded.add(g.id)
                visible += grows
        return expanded

    def paths(self, ids: Iterable[int]) -> set[str]:
        return {self.groups[i].path for i in ids}

    def ids(self, paths: Iterable[str]) -> set[int]:
        return {self.by_path[p] for p in paths if p in self.by_path}


def groups_of(graph: DisplayGraph) -> GroupTree:
    """``group_tree(graph)``, made once per display graph (trees are read-only): the worker that
    builds a display graph warms it, so the GUI thread does not walk 10k nodes to show it."""
    key = (id(graph.nodes), len(graph.nodes), id(graph.edges), len(graph.edges), id(graph.module_types))
    hit = graph.__dict__.get("_groups")
    if hit is not None and hit[0] == key:
        return hit[1]
    tree = group_tree(graph)
    graph.__dict__["_groups"] = (key, tree)
    return tree


def group_tree(graph: DisplayGraph, classes: Mapping[str, str] | None = None) -> GroupTree:
    """The groups of ``graph`` (see the module docstring). ``classes`` maps module paths to
    their class (default: what the graph's operators record)."""
    classes = graph.module_types if classes is None else classes

    def cls(path: str) -> str:  # a module call's class is its module's
        return classes.get(path) or classes.get(plain_path(path), "")

    nodes = graph.nodes
    n = len(nodes)
    # a parameter joins its first consumer's module
    first_consumer: dict[int, int] = {}
    for e in graph.edges:
        if e.from_param and e.src not in first_consumer:
            first_consumer[e.src] = e.dst
    # groups are module *calls* (a module used twice is two boxes: the flow stays top-down)
    module = [nd.scope or nd.module for nd in nodes]
    for i, nd in enumerate(nodes):
        if nd.kind == PARAM and i in first_consumer:
            c = nodes[first_consumer[i]]
            module[i] = c.scope or c.module
    # operator counts per module path (whole subtree)
    ops_below: dict[str, int] = {}
    for i, nd in enumerate(nodes):
        if nd.kind == PARAM or not module[i]:
            continue
        parts = module[i].split(".")
        for k in range(1, len(parts) + 1):
            p = ".".join(parts[:k])
            ops_below[p] = ops_below.get(p, 0) + 1
    kept = {p for p, c in ops_below.items() if c >= MIN_GROUP_OPS}
    # a kept module with no operators of its own and a single kept child is merged into it
    direct_ops: dict[str, int] = {}
    for i, nd in enumerate(nodes):
        if nd.kind != PARAM and module[i]:
            direct_ops[module[i]] = direct_ops.get(module[i], 0) + 1
    kept_children: dict[str, list[str]] = {}
    for p in kept:
        kept_children.setdefault(_kept_parent(p, kept), []).append(p)
    for p in sorted(kept, key=lambda s: s.count(".")):
        kids = kept_children.get(p, [])
        if len(kids) == 1 and not direct_ops.get(p) and ops_below.get(p) == ops_below.get(kids[0]):
            # one box for the two: the outer module, unless only the inner one has a real class
            # (``encoder · TransformerEncoder`` over its ``encoder.layers`` ModuleList)
            inner = kids[0]
            drop = inner if _is_container(cls(inner)) and cls(p) else p
            kept.discard(drop)
            if drop == inner:
                kept_children[p] = kept_children.get(inner, [])
    groups: list[Group] = [Group(ROOT, "", short_class(cls("")), -1, 0)]
    gid_of_path: dict[str, int] = {"": ROOT}

    def gid(path: str) -> int:
        hit = gid_of_path.get(path)
        if hit is not None:
            return hit
        parent = gid(_kept_parent(path, kept))
        g = Group(len(groups), path, short_class(cls(path)), parent, groups[parent].depth + 1)
        groups.append(g)
        groups[parent].children.append(g.id)
        gid_of_path[path] = g.id
        return g.id

    group_of = [ROOT] * n
    cache: dict[str, int] = {}
    for i in range(n):
        m = module[i]
        g = cache.get(m)
        if g is None:
            g = cache[m] = gid(m if m in kept else _kept_parent(m, kept)) if m else ROOT
        group_of[i] = g
        groups[g].members.append(i)
    del gid  # it calls itself, a cycle through its closure that held every group until a collection
    # subtree sizes and first index, children first
    for g in groups:  # place in topological order: the first operator (parameters come first in the IR)
        g.first = next((i for i in g.members if nodes[i].kind != PARAM), g.members[0] if g.members else n)
        g.size = len(g.members)
        g.ops = sum(1 for i in g.members if nodes[i].kind != PARAM)
    for g in sorted(groups, key=lambda x: -x.depth):
        if g.parent >= 0:
            p = groups[g.parent]
            p.size += g.size
            p.ops += g.ops
            p.first = min(p.first, g.first)
    for g in groups:
        g.children.sort(key=lambda c: groups[c].first)
    return GroupTree(groups, group_of)


_CONTAINERS = ("ModuleList", "Sequential", "ModuleDict")


def _is_container(qualified: str) -> bool:
    """A class that only holds submodules (or an unknown one: containers are never called, so
    ``nn_module_stack`` does not name them)."""
    return not qualified or short_class(qualified) in _CONTAINERS


def _kept_parent(path: str, kept: set[str]) -> str:
    while "." in path:
        path = path.rsplit(".", 1)[0]
        if path in kept:
            return path
    return ""



def flat_tree(n: int) -> GroupTree:
    """A tree without groups: every node directly in the root (grouping switched off)."""
    root = Group(ROOT, "", "", -1, 0, members=list(range(n)), size=n, ops=n)
    return GroupTree([root], [ROOT] * n)


def group_text(tree: GroupTree) -> list[tuple[str, str]]:
    """(label, detail) of every group's box: ``layers.3.attn`` and ``MultiheadAttention · 25
    ops``."""
    out = []
    for g in tree.groups:
        ops = f"{g.ops:,} op{'s' if g.ops != 1 else ''}"
        out.append((g.title or "model", f"{g.type} · {ops}" if g.type else ops))
    return out
