"""``pt2ncnn scaffold``: write a converter plug-in file for one ATen overload.

``pt2ncnn scaffold aten.logit.default MODEL.pt2 -o logit.py`` writes a plug-in prefilled with the
overload's schema and, from the model's first node of that overload (or ``--node NAME``), its
argument values, tensor shapes and source line (:mod:`engine.convert.scaffold`). Templates:
``pnnx`` (lower to pnnx ops: a body to write), ``ncnn_custom`` (a custom ncnn layer of your own),
``decompose`` (PyTorch's decomposition into other ATen ops, traced now — needs PyTorch; the
plug-in itself does not). Then: ``pt2ncnn convert MODEL.pt2 --converters logit.py``.

The file is written atomically; an existing one is replaced only with ``--force``.
Exit codes: 0 written; 2 bad input or usage (an unknown overload, no such node in the model,
no decomposition, the file exists).
"""
from __future__ import annotations

import argparse

NAME = "scaffold"
HELP = "write a converter plug-in file for an ATen overload (e.g. aten.erfinv.default), prefilled from a model's node"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from engine.convert.scaffold import TEMPLATES

    p.add_argument("op", metavar="aten.OP.overload", help="the ATen overload to convert, e.g. aten.logit.default")
    p.add_argument("model", nargs="?", metavar="MODEL.pt2",
                   help="a model holding such a node: its arguments, shapes and source prefill the file")
    p.add_argument("--node", metavar="NAME", help="which node of the model (default: its first of that overload)")
    p.add_argument("--template", choices=TEMPLATES, default="pnnx",
                   help="pnnx: lower to pnnx ops (default); ncnn_custom: an ncnn layer of your own; "
                        "decompose: PyTorch's decomposition into other ATen ops (needs a model)")
    p.add_argument("--model-name", metavar="NAME", help="which model of a multi-model package")
    p.add_argument("-o", "--output", metavar="FILE.py", help="where to write it (default: <op>_<overload>.py)")
    p.add_argument("--force", action="store_true", help="replace an existing file")


def run(args) -> int:
    from engine.convert.scaffold import find_node, rule_filename, scaffold, write_plugin

    from .main import UsageError

    if args.node and not args.model:
        raise UsageError("--node needs MODEL.pt2")
    node = None
    if args.model:
        from engine.build import build_graph
        from engine.reader.package import load

        pkg = load(args.model)
        program = pkg.models[args.model_name] if args.model_name else pkg.model
        node = find_node(build_graph(program), args.op, args.node)
    text = scaffold(args.op, node=node, template=args.template, model=args.model)
    path = write_plugin(args.output or rule_filename(args.op), text, force=args.force)
    where = f" from node {node.name}" if node is not None else ""
    print(f"wrote {path} ({args.template} template for {args.op.removeprefix('torch.ops.')}{where})")
    print(f"  next: pt2ncnn convert {args.model or 'MODEL.pt2'} --converters {path}")
    return 0
