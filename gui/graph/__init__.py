"""Graph views.

The pipeline from an IR graph to pixels, and where each step runs:

1. :mod:`.model` (GUI thread or worker, pure Python) — ``display_graph(ir_graph)`` makes a
   :class:`~.model.DisplayGraph`: one node per operator with its kind, label, output shape,
   colour category, module path, provenance and problem, one edge per operand use.
2. :mod:`.items` ``measure()`` (GUI thread: font metrics) — the size of every node.
3. :mod:`.layout` (worker, pure Python) — ``layered_layout(sizes, edges)`` → a
   :class:`~.layout.LayoutResult` of positions and edge routes.
4. :mod:`.scene` (GUI thread) — the scene creates items from the layout result only.
5. :mod:`.items` / :mod:`.view` — painting with level of detail: full boxes with text when
   readable, boxes only when small, and below a zoom threshold one overview item drawing the
   whole graph as a few paths.

:mod:`.panel` runs steps 2–4 for one side of the window.

Module grouping (collapsible boxes per ``nn.Module``) fits into the same pipeline: a collapsed
group becomes one node of step 1 (its size from its label), an expanded one a node whose size is
its own inner layout, laid out recursively by step 3 per group, so that expanding a group lays
out only that group; nodes already carry their module path (``DisplayNode.module``).
"""
