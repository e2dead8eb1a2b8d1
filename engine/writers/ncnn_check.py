"""Checks that an IR graph in the ncnn vocabulary can be written as an ncnn model.

Every problem names the layer (and blob / param / weight) and the reason; the writer refuses
to write while there is any. Checked: layer types known to the runtime (or a plug-in's declared
custom layer, ``meta["plugin_layer"]``; an unconverted op written with ``--partial``,
``meta["custom_layer"]``, is a bare layer line); layers in dependency
order; every blob produced once and consumed at most once (a blob used more than once needs a
``Split`` layer — the ``insert_split`` pass adds them); unique layer and blob names without
whitespace, at most 255 bytes; params known for the layer type and of the right kind; weights
matching what the layer will load (count and sizes); blobs of at most 4 dims (batch dropped).
"""
from __future__ import annotations

import math
import re
from typing import Iterable

from ..ir import Graph, Operator
from ..ncnn import layers as L

#: Graph-level markers that are not ncnn layers (skipped when writing).
MARKER_TYPES = ("Output", "pnnx.Output")
MAX_NAME_BYTES = 255
#: whitespace as ``str.isspace`` sees it (``re``'s ``\s`` is the same test on every code point)
WHITESPACE = re.compile(r"\s")
MAX_DIMS = 4


def ncnn_layers(graph: Graph) -> list[Operator]:
    """The operators to write, in order (output markers left out)."""
    return [op for op in graph.ops if op.type not in MARKER_TYPES]


def _name_problem(kind: str, name: str) -> str | None:
    if not name:
        return f"{kind} has an empty name"
    if WHITESPACE.search(name) or not name.isprintable():
        return f"{kind} name {name!r} contains whitespace or control characters"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"{kind} name {name[:40]!r}... is longer than {MAX_NAME_BYTES} bytes"
    return None


def _ncnn_rank(shape, meta) -> int:
    rank = len(shape)
    batch = meta.get("batch")
    bd = meta.get("batch_dim")  # the batch axis elsewhere than dim 0 (seq-first layouts...)
    if batch or (batch is None and rank > MAX_DIMS and shape[0] == 1) or (isinstance(bd, int) and 0 < bd < rank):
        rank -= 1
    return rank


def _names_fine(layers: list[Operator]) -> bool:
    """Whether no layer or blob name has a :func:`_name_problem`, tested on all of them at once."""
    names = [op.name for op in layers] + [o.name for op in layers for o in op.outputs]
    if not all(names):
        return False
    joined = "/".join(names)
    return (joined.isascii() and max(map(len, names)) <= MAX_NAME_BYTES and joined.isprintable()
            and not WHITESPACE.search(joined))


def check_structure(layers: list[Operator]) -> list[str]:
    problems: list[str] = []
    names_fine = _names_fine(layers)
    layer_ids: set[int] = set()  # made at the first input produced later or by no layer
    seen_layers: set[str] = set()
    produced: dict[str, str] = {}
    first_user: dict[str, str] = {}
    users: dict[str, list[str]] = {}  # of the blobs consumed more than once
    for op in layers:
        p = None if names_fine else _name_problem(f"layer {op.name!r}" if op.name else "a layer", op.name)
        if p:
            problems.append(p)
        if op.name in seen_layers:
            problems.append(f"layer name {op.name!r} is used twice")
        seen_layers.add(op.name)
        for i in op.inputs:
            if i.name not in produced:
                layer_ids = layer_ids or {id(x) for x in layers}
                src = f"later by {i.producer.name!r}" if id(i.producer) in layer_ids else "by no layer"
                problems.append(f"layer {op.name!r}: input blob {i.name!r} is produced {src}")
            if i.name in first_user:
                users.setdefault(i.name, [first_user[i.name]]).append(op.name)
            else:
                first_user[i.name] = op.name
        for o in op.outputs:
            p = None if names_fine else _name_problem(f"blob of layer {op.name!r}", o.name)
            if p:
                problems.append(p)
            if o.name in produced:
                problems.append(f"blob {o.name!r} is produced twice (by {produced[o.name]!r} and {op.name!r})")
            produced[o.name] = op.name
            # a blob of at most 4 dims has at most 4 without its batch axis
            if o.shape is not None and len(o.shape) > MAX_DIMS and _ncnn_rank(o.shape, o.meta) > MAX_DIMS:
                problems.append(f"layer {op.name!r}: blob {o.name!r} has shape {list(o.shape)}, more than "
                                f"{MAX_DIMS} dims without the batch axis (ncnn Mats have at most 4)")
    for blob in first_user if users else ():  # in the order of their first use
        if blob in users:
            problems.append(f"blob {blob!r} is consumed {len(users[blob])} times (by "
                            f"{', '.join(map(repr, users[blob]))}); "
                            "ncnn needs a Split layer with one output per consumer (run the insert_split pass)")
    return problems


def _check_custom(op: Operator) -> list[str]:
    """A plug-in's custom layer: params are ids 0..31 with int / float / string / array values;
    weights are numeric."""
    from .ncnn_param import MAX_PARAM_ID

    problems = []
    for k, v in op.params.items():
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= MAX_PARAM_ID:
            problems.append(f"custom layer {op.name!r} ({op.type}): param key {k!r} is not an id 0..{MAX_PARAM_ID}")
        elif not isinstance(v, (int, float, str, list, tuple)) or isinstance(v, (list, tuple)) and not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            problems.append(f"custom layer {op.name!r} ({op.type}): param {k}={v!r} is not an int, float, string "
                            "or list of numbers")
    for key, attr in op.attrs.items():
        if attr.dtype in ("bool", "c64", "c128", "c32"):
            problems.append(f"custom layer {op.name!r}: weight {key!r} has dtype {attr.dtype}, not storable")
    return problems


def check_layer(op: Operator, loads: dict[int, list[L.LoadedWeight]] | None = None) -> list[str]:
    """Params and weights of one layer. ``loads`` (``id(op)`` → the weights the runtime will
    load) is filled for a layer that passes, so the writer does not work them out again."""
    if op.meta.get("custom_layer"):  # a placeholder for an unconverted op (partial output)
        return []
    if op.meta.get("plugin_layer"):
        return _check_custom(op)
    try:
        L.get_spec(op.type)
    except L.LayerSpecError as e:
        hint = " (the conversion left it unconverted)" if "." in op.type else ""
        return [f"layer {op.name!r}: {e}{hint}"]
    try:
        problems, want = L.layer_loads(op.type, op.params)
    except L.LayerSpecError as e:
        return [f"layer {op.name!r}: {e}"]
    if problems:
        return [f"layer {op.name!r} ({op.type}): {p}" for p in problems]
    have = list(op.attrs.items())
    if len(have) != len(want):
        return [f"layer {op.name!r} ({op.type}): has {len(have)} weights "
                f"({', '.join(k for k, _ in have) or 'none'}) but with these params the runtime loads "
                f"{len(want)} ({', '.join(w.name for w in want) or 'none'})"]
    names = L.weight_names(op.type)
    for (key, attr), w in zip(have, want):
        if key in names and key != w.name:
            problems.append(f"layer {op.name!r}: weight {key!r} is in the place of {w.name!r} "
                            "(weights must be in load order)")
        n = math.prod(attr.shape)
        if n != w.size:
            problems.append(f"layer {op.name!r}: weight {key!r} has {n} values {tuple(attr.shape)}, "
                            f"the params make the runtime load {w.size} for {w.name} ({w.spec.size})")
        if attr.dtype in ("bool", "c64", "c128", "c32"):
            problems.append(f"layer {op.name!r}: weight {key!r} has dtype {attr.dtype}, not storable")
        elif attr.dtype == "i8" and not w.tagged:
            problems.append(f"layer {op.name!r}: int8 weight {key!r} must be a tagged weight")
    if loads is not None and not problems:
        loads[id(op)] = want
    return problems


def check_graph(graph: Graph, loads: dict[int, list[L.LoadedWeight]] | None = None) -> list[str]:
    """Every problem that prevents writing ``graph`` as an ncnn model (empty when none);
    ``loads`` as for :func:`check_layer`."""
    layers = ncnn_layers(graph)
    if not layers:
        return ["the graph has no layers"]
    problems = check_structure(layers)
    for op in layers:
        problems += check_layer(op, loads)
    return problems


def summarize(problems: Iterable[str], limit: int = 20) -> str:
    problems = list(problems)
    text = "\n  ".join(problems[:limit])
    more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
    return f"cannot write the ncnn model ({len(problems)} problem{'s' if len(problems) != 1 else ''}):\n  {text}{more}"
