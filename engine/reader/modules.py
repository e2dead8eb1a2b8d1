"""The module hierarchy of a program, rebuilt from node metadata and the module call graph.

Each node's ``nn_module_stack`` lists the modules it was called through, outermost first; the
innermost one owns the node. ``module_call_graph`` adds modules that own no node (an
``Identity``, a module whose ops were all folded away). :func:`build_module_tree` returns the
root :class:`ModuleNode` (path ``""``).
"""
from __future__ import annotations


from engine.reader import schema as S

from ..records import field, record

#: Deepest module nesting kept (real models stay far below; the stacks come from the file).
MAX_DEPTH = 64


@record
class ModuleNode:
    """One module: its path (``layer1.0.conv1``; ``""`` for the root), class (``torch.nn.modules.
    conv.Conv2d``; ``""`` when unknown), submodules in first-use order, and the names of the
    graph nodes it owns directly."""

    path: str
    type: str = ""
    children: list["ModuleNode"] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The last path component (``conv1``), ``""`` for the root."""
        return self.path.rsplit(".", 1)[-1] if self.path else ""

    def walk(self):
        """This module and all below it, depth first."""
        stack = [self]
        while stack:
            m = stack.pop()
            yield m
            stack.extend(reversed(m.children))

    def total_nodes(self) -> int:
        return sum(len(m.nodes) for m in self.walk())

    def find(self, path: str) -> "ModuleNode | None":
        return next((m for m in self.walk() if m.path == path), None)


def build_module_tree(program: S.Program) -> ModuleNode:
    root = ModuleNode("")
    by_path: dict[str, ModuleNode] = {"": root}

    def get(path: str, type_: str, parent: ModuleNode) -> ModuleNode:
        m = by_path.get(path)
        if m is None:
            m = by_path[path] = ModuleNode(path, type_)
            parent.children.append(m)
        elif not m.type and type_:
            m.type = type_
        return m

    for node in program.graph.nodes:
        frames = node.metadata.module_stack
        cur = root
        if len(frames) > MAX_DEPTH:
            frames = frames[:MAX_DEPTH]  # absurd stacks are cut so consumers may recurse safely
        for i, f in enumerate(frames):
            if i == 0 and f.path == "":
                if not root.type:
                    root.type = f.type
                continue
            cur = get(f.path, f.type, cur)
        cur.nodes.append(node.name)

    for entry in program.module_call_graph:
        fqn = entry.fqn
        if not fqn or fqn in by_path:
            continue
        if fqn.count(".") >= MAX_DEPTH:
            continue
        parent_path = fqn
        parent = root
        while "." in parent_path:
            parent_path = parent_path.rsplit(".", 1)[0]
            if parent_path in by_path:
                parent = by_path[parent_path]
                break
        get(fqn, "", parent)
    return root
