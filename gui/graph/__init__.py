"""Graph views.

The pipeline from an IR graph to pixels, and where each step runs:

1. :mod:`.model` (worker, pure Python) — ``display_graph(ir_graph)`` makes a
   :class:`~.model.DisplayGraph`: one node per operator with its kind, label, output shape,
   colour category, module path, provenance and problem, one edge per operand use, and the
   class of every module path.
2. :mod:`.grouping` (GUI thread, pure Python, linear) — the nodes grouped by ``nn.Module``
   into a :class:`~.grouping.GroupTree` (the same hierarchy for ATen, pnnx and ncnn views: the
   lowered operators carry the module paths of the ATen nodes they came from).
3. :mod:`.items` ``measure()`` / ``group_box_sizes()`` (GUI thread: font metrics) — the size of
   every node and collapsed box.
4. :mod:`.hierarchy` over :mod:`.layout` (worker, pure Python) — the layered layout run once
   per *expanded* group, with child groups as boxes and ports where edges cross a group's
   border, cached per group and composed into a :class:`~.hierarchy.Placement` (positions of
   what is visible, one route per visible connection). Opening a group lays out that group
   and re-places its ancestors.
5. :mod:`.scene` (GUI thread) — items for what the placement shows: nodes and boxes (kept and
   moved while the graph stays the same), edges in spatial chunks (one path each).
6. :mod:`.items` / :mod:`.view` / :mod:`.minimap` — painting with level of detail: full boxes
   with text when readable, boxes only when small, and below a zoom threshold a few overview
   chunks drawing everything as paths; every item is top-level so Qt's index hands a frame
   only the items in view. The minimap shows where the view is.

:mod:`.panel` runs steps 2–5 for one side of the window and keeps which groups are open.
:mod:`.synthetic` makes large graphs with a module hierarchy for tests and benchmarks.
"""
