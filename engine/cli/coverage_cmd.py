"""``pt2ncnn coverage``: which operators have converters; for a model, which of its
operators convert and which do not (with the reasons)."""
from __future__ import annotations

import argparse
import json

from engine.collector import no_cyclic_gc

NAME = "coverage"
HELP = "list registered converters, or a model's supported/unsupported operators"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .main import add_converters_option

    p.add_argument("model", nargs="?", help="a .pt2 package (omit to list every registered target)")
    add_converters_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args) -> int:
    with no_cyclic_gc(restore=not getattr(args, "exiting", False)):
        return _run(args)


def _run(args) -> int:
    from engine.convert import ConvertOptions, convert
    from engine.convert.coverage import registered_targets
    from engine.convert.plugins import plugin_scope

    if args.model is None:
        with plugin_scope(args.converters):
            targets = registered_targets()
        if args.json:
            print(json.dumps(targets, indent=2))
        else:
            for vocab, rows in targets.items():
                print(f"{vocab} rules ({len(rows)} targets):")
                for r in rows:
                    print(f"  {r['target']:48s} {r['rules'][0]}")
        return 0
    result = convert(args.model, ConvertOptions(converters=list(args.converters), snapshots=False))
    cov = result.coverage()
    print(json.dumps(cov.to_dict(), indent=2) if args.json else cov.to_text())
    return 0 if result.ok else 1
