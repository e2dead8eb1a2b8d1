"""A JSON-able summary of a package and one of its models (what ``pt2ncnn inspect`` prints).

:func:`summarize` returns plain dicts/lists/str/int only. Keys: ``file``, ``layout``,
``archive_version``, ``models``, ``model``, ``torch_version``, ``schema_version`` (``"8.20"``),
``dialect``, ``inputs`` / ``outputs`` (``{name, kind, dtype, shape}``; symbolic dims as strings),
``symbols`` (``{name: {min, max, hint}}``), ``num_nodes``, ``ops`` (target without
``torch.ops.`` → count, most frequent first), ``parameters`` / ``buffers`` / ``constants``
(``{count, bytes}``), ``custom_objs`` (count), ``unreadable`` (``[{fqn, reason}]``),
``modules`` (``{count, root}`` with ``root`` a tree of ``{path, type, nodes, total_nodes,
children}``), ``extra_files`` (names).
"""
from __future__ import annotations

from engine.reader import schema as S
from engine.reader.modules import ModuleNode
from engine.reader.symexpr import pretty


def dim_text(d) -> int | str:
    """A size as an int, or readable text for a symbolic one (``s17``, ``2*s17``)."""
    if isinstance(d, S.SymExpr):
        return d.symbol or pretty(d.expr)
    return d


def value_info(name: str, kind: str, meta: S.TensorMeta | None, arg: S.Argument | None = None,
               value=None) -> dict:
    """``{name, kind, dtype, shape}`` for one graph input or output."""
    if meta is not None:
        return {"name": name, "kind": kind, "dtype": meta.dtype.torch_name,
                "shape": [dim_text(d) for d in meta.sizes]}
    info = {"name": name, "kind": kind, "dtype": None, "shape": None}
    if arg is not None:
        tag = arg.tag
        if tag.startswith("as_sym_"):
            info["dtype"] = "sym" + tag[len("as_sym_"):]
        elif tag == "as_custom_obj":
            info["dtype"] = "object"
        elif tag not in ("as_tensor",):
            info["dtype"] = tag[len("as_"):]
            info["value"] = _jsonable(arg.value if value is None else value)
    return info


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if v == v and abs(v) != float("inf") else str(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return str(v)


def module_dict(root: ModuleNode) -> dict:
    """The module tree as nested dicts (built without recursion: trees come from the file)."""
    order = list(root.walk())
    totals: dict[int, int] = {}
    for m in reversed(order):
        totals[id(m)] = len(m.nodes) + sum(totals[id(c)] for c in m.children)
    made: dict[int, dict] = {}
    for m in reversed(order):
        made[id(m)] = {"path": m.path, "type": m.type, "nodes": len(m.nodes), "total_nodes": totals[id(m)],
                       "children": [made[id(c)] for c in m.children]}
    return made[id(root)]


def _group(entries, kind: str) -> dict:
    sel = [e for e in entries if e.kind == kind]
    return {"count": len(sel), "bytes": sum(e.nbytes for e in sel)}


def summarize(pkg, model: str | None = None) -> dict:
    """Summary of ``pkg`` (a :class:`~engine.reader.package.Package`) and one of its models
    (the main one by default)."""
    ep = pkg.models[model] if model is not None else pkg.model
    sig = ep.signature
    entries = ep.tensors.entries()
    tree = ep.module_tree()
    return {
        "file": pkg.path,
        "layout": pkg.layout,
        "archive_version": pkg.archive_version,
        "models": list(pkg.model_names),
        "model": ep.name,
        "torch_version": ep.torch_version,
        "schema_version": str(ep.schema_version),
        "dialect": ep.dialect,
        "inputs": [value_info(i.name, i.kind.value, i.meta if i.kind is not S.InputKind.CONSTANT_INPUT else None,
                              i.arg, i.value) for i in sig.user_inputs],
        "outputs": [value_info(o.name, o.kind.value, o.meta, o.arg) for o in sig.user_outputs],
        "symbols": {s.name: {"min": s.min, "max": s.max, "hint": s.hint} for s in sig.symbols.values()},
        "num_nodes": len(ep.nodes),
        "ops": ep.op_histogram(),
        "parameters": _group(entries, "parameter"),
        "buffers": _group(entries, "buffer"),
        "constants": _group(entries, "constant"),
        "custom_objs": len(sig.custom_objs),
        "unreadable": [{"fqn": e.fqn, "reason": e.reason} for e in ep.tensors.entries() + ep.tensors.objects()
                       if not e.readable],
        "modules": {"count": sum(1 for _ in tree.walk()) - 1, "root": module_dict(tree)},
        "extra_files": sorted(pkg.extra_files),
    }
