"""``pt2ncnn inspect MODEL.pt2 [--json] [--model NAME] [--depth N]``: what a package holds.

Prints the layout, torch / schema versions, dialect, user inputs and outputs (dtype, shape with
symbols), symbol ranges, counts and bytes of parameters / buffers / constants, the operator
histogram and a summary of the module hierarchy. ``--json`` prints the
:func:`engine.reader.summary.summarize` object instead. Never reads a weight.
"""
from __future__ import annotations

import json
import sys

import engine
from engine.reader.summary import summarize

NAME = "inspect"
HELP = "show what a .pt2 package holds (graph, signature, tensors, operators, modules)"


def add_arguments(parser) -> None:
    parser.add_argument("model", metavar="MODEL.pt2", help="the ExportedProgram package")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--model", dest="model_name", metavar="NAME",
                        help="which model of a multi-model package (default: the main one)")
    parser.add_argument("--depth", type=int, default=2, metavar="N",
                        help="module hierarchy levels to print (default 2; 0 hides it)")


def run(args) -> int:
    with engine.load(args.model) as pkg:
        if args.model_name is not None and args.model_name not in pkg.models:
            raise engine.PT2FormatError(args.model, f"no model named {args.model_name!r} "
                                                    f"(models: {', '.join(pkg.model_names)})")
        info = summarize(pkg, args.model_name)
    out = sys.stdout
    if args.json:
        json.dump(info, out, indent=2)
        out.write("\n")
    else:
        out.write(render_text(info, depth=args.depth))
    out.flush()
    return 0


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _shape(v: dict) -> str:
    if v["shape"] is None:
        return "" if "value" not in v else f"= {v['value']!r}"
    return "[" + ", ".join(str(d) for d in v["shape"]) + "]"


def _values(rows: list[dict]) -> list[str]:
    if not rows:
        return ["  (none)"]
    w = max(len(r["name"]) for r in rows)
    return [f"  {r['name']:<{w}}  {r['dtype'] or '-':<9} {_shape(r)}".rstrip() for r in rows]


def _modules(node: dict, depth: int, max_depth: int, lines: list[str]) -> None:
    for child in node["children"]:
        label = child["path"].rsplit(".", 1)[-1] if depth else child["path"]
        kind = child["type"].rsplit(".", 1)[-1] if child["type"] else "?"
        n = child["total_nodes"]
        lines.append(f"  {'  ' * depth}{label}  {kind}  ({n} node{'' if n == 1 else 's'})")
        if depth + 1 < max_depth:
            _modules(child, depth + 1, max_depth, lines)


def render_text(info: dict, *, depth: int = 2) -> str:
    L: list[str] = []
    L.append(f"{info['file']}")
    layout = info["layout"] + (f" (archive version {info['archive_version']})" if info["archive_version"] else "")
    L.append(f"  layout          {layout}")
    if len(info["models"]) > 1:
        L.append(f"  models          {', '.join(info['models'])} (showing {info['model']})")
    L.append(f"  torch version   {info['torch_version'] or 'not recorded (torch <= 2.4)'}")
    L.append(f"  schema version  {info['schema_version']}")
    L.append(f"  dialect         {info['dialect']}")
    L.append("inputs")
    L.extend(_values(info["inputs"]))
    L.append("outputs")
    L.extend(_values(info["outputs"]))
    if info["symbols"]:
        L.append("symbols")
        for name, s in info["symbols"].items():
            lo = "-inf" if s["min"] is None else s["min"]
            hi = "inf" if s["max"] is None else s["max"]
            hint = "" if s["hint"] is None else f"  (example {s['hint']})"
            L.append(f"  {name} in [{lo}, {hi}]{hint}")
    L.append("tensors")
    for key in ("parameters", "buffers", "constants"):
        g = info[key]
        L.append(f"  {key:<11} {g['count']:>5}  {human_bytes(g['bytes']):>10}  ({g['bytes']:,} bytes)")
    if info["custom_objs"]:
        L.append(f"  custom objects {info['custom_objs']}")
    for u in info["unreadable"]:
        L.append(f"  unreadable: {u['fqn']}: {u['reason']}")
    L.append(f"operators  {info['num_nodes']} nodes, {len(info['ops'])} distinct")
    if info["ops"]:
        w = max(len(op) for op in info["ops"])
        for op, n in info["ops"].items():
            L.append(f"  {op:<{w}}  {n:>5}")
    mods = info["modules"]
    root = mods["root"]
    root_type = root["type"] or "?"
    L.append(f"modules  {mods['count']} below the root ({root_type})")
    if depth > 0:
        _modules(root, 0, depth, L)
    if info["extra_files"]:
        L.append(f"extra files  {', '.join(info['extra_files'])}")
    return "\n".join(L) + "\n"
