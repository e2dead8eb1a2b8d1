"""``pt2ncnn verify``: compare every ncnn layer with PyTorch and name the first layer that
diverges by itself, with its ATen nodes, module path and source line.

Converts the model (or takes ``--ncnn-param/--ncnn-bin``), runs it in PyTorch and in ncnn on the
package's sample inputs (or ``--input`` files, or seeded random inputs) and compares per layer
(see :mod:`engine.verify`). Needs torch and ncnn (the ``verify`` extra).

Exit codes: 0 every model output within tolerance and no layer wrong by itself; 1 not (the
report's headline says which: the first divergent layer, or outputs beyond tolerance with no
single layer to blame); 2 bad input or usage (including torch / ncnn not installed).
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from engine.collector import no_cyclic_gc

NAME = "verify"
HELP = "compare the converted model layer by layer with PyTorch and find the first layer that diverges"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .main import add_converters_option

    p.add_argument("model", help="the .pt2 package")
    p.add_argument("--ncnn-param", metavar="P", help="verify this .ncnn.param instead of converting")
    p.add_argument("--ncnn-bin", metavar="B", help="the weights of --ncnn-param")
    add_converters_option(p)
    p.add_argument("--fp16", choices=("0", "1"), default="1", help="convert with fp16 (1, default) or fp32 (0) weights")
    p.add_argument("--input", metavar="FILE.npy", nargs="+", action="extend", default=[], dest="inputs",
                   help="input values, one .npy per tensor input in call order (default: the package's "
                        "sample inputs, else seeded random values)")
    p.add_argument("--inputshape", metavar="SHAPES", help="shapes of random inputs, e.g. [1,3,224,224],[1,10]")
    p.add_argument("--seed", type=int, default=0, help="seed of random inputs (default 0)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default 1e-5 for fp32 weights, 1e-4 for fp16)")
    p.add_argument("--rtol", type=float,
                   help="tolerance relative to the largest PyTorch magnitude (default 1e-4 fp32, 1e-2 fp16)")
    p.add_argument("--model-name", metavar="NAME", help="which model of a multi-model package")
    p.add_argument("--no-isolate", action="store_true",
                   help="do not re-run layers in isolation (faster; blame by input errors only)")
    p.add_argument("--all", action="store_true", help="list every layer, not only those beyond tolerance")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "inf" if x > 0 else "nan"
    return f"{x:.3g}"


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [min(36, max(len(r[i]) for r in rows)) for i in range(len(rows[0]) - 1)]
    lines = []
    for k, r in enumerate(rows):
        cells = [r[i][: widths[i]].ljust(widths[i]) for i in range(len(widths))] + [r[-1]]
        lines.append("  " + "  ".join(cells).rstrip())
        if k == 0:
            lines.append("  " + "  ".join("-" * w for w in widths) + "  " + "-" * max(4, len(r[-1])))
    return "\n".join(lines)


def _layer_rows(layers) -> list[tuple[str, ...]]:
    rows = [("layer", "type", "status", "max_abs", "max_rel", "cosine", "alone max_rel", "aten nodes")]
    for r in layers:
        rows.append((r.layer, r.type, r.status, _fmt(r.max_abs), _fmt(r.max_rel), _fmt(r.cosine),
                     _fmt(r.own.max_rel if r.own else None), ",".join(r.aten_nodes)))
    return rows


def format_text(model: str, result, show_all: bool = False) -> str:
    """The human-readable report."""
    compared = sum(1 for r in result.layers if r.error is not None)
    weights = "fp16" if result.fp16 else "fp32"
    inputs = {"sample": "the package's sample inputs", "random": "seeded random inputs",
              "user": "the given input files"}.get(result.input_source, result.input_source)
    lines = [f"verify {model}: {len(result.layers)} ncnn layers, {compared} compared with PyTorch on {inputs}; "
             f"{weights} weights; tolerance atol={result.atol:g} rtol={result.rtol:g}"]
    lines += [f"note: {n}" for n in result.notes]
    rows = [("output", "blob", "max_abs", "max_rel", "cosine", "result")]
    for o in result.outputs:
        rows.append((o.name, o.blob, _fmt(o.error.max_abs if o.error else None),
                     _fmt(o.error.max_rel if o.error else None), _fmt(o.error.cosine if o.error else None),
                     ("ok" if o.ok else "BEYOND TOLERANCE") + (f" ({o.note})" if o.note else "")))
    lines += ["outputs:", _table(rows)]
    fd = result.first_divergent
    if fd is not None:
        lines.append(f"first divergent layer: {fd.layer} ({fd.type}), {fd.status}")
        lines.append(f"  ATen nodes: {', '.join(fd.aten_nodes) or '-'}")
        lines.append(f"  module: {fd.module or '(root)'}   source: {fd.source or '-'}")
        if fd.own is not None:
            lines.append(f"  alone, on PyTorch's inputs: max_abs {_fmt(fd.own.max_abs)}  max_rel "
                         f"{_fmt(fd.own.max_rel)}  cosine {_fmt(fd.own.cosine)}")
        lines.append(f"  in the whole model: max_abs {_fmt(fd.max_abs)}  max_rel {_fmt(fd.max_rel)}  "
                     f"cosine {_fmt(fd.cosine)}")
        if len(fd.isolated_with) > 1:
            lines.append(f"  run together with (no PyTorch counterpart): {', '.join(fd.isolated_with[1:])}")
        if fd.note:
            lines.append(f"  note: {fd.note}")
        if result.outputs_ok:
            lines.append("  the model's outputs are still within tolerance: its error is masked downstream "
                         "(on other inputs it may not be)")
    elif result.drift:
        fb = result.first_beyond_tolerance
        what = "fp16 rounding of the weights" if result.fp16 else "float rounding (summation order)"
        lines.append(f"no divergent layer: every layer is right by itself; the outputs drift beyond tolerance as the "
                     f"{what} adds up over the layers" + (f" (from layer {fb.layer})" if fb else "") +
                     (" — convert with --fp16 0 for fp32 weights" if result.fp16 else ""))
    elif result.first_beyond_tolerance is not None:
        fb = result.first_beyond_tolerance
        lines.append(f"no layer diverges by itself; errors accumulate beyond tolerance from layer {fb.layer} "
                     f"({fb.type}, ATen nodes {', '.join(fb.aten_nodes)})")
    else:
        lines.append("no divergent layer: every compared layer is within tolerance")
    shown = result.layers if show_all else [r for r in result.layers if r.within_tolerance is False or r.blamed]
    if shown:
        lines += ["layers:" if show_all else "layers beyond tolerance:", _table(_layer_rows(shown))]
    return "\n".join(lines)


def run(args) -> int:
    with no_cyclic_gc(restore=not getattr(args, "exiting", False)):
        return _run(args)


def _run(args) -> int:
    from engine.convert.inputshape import parse_inputshape
    from engine.verify import VerifyOptions, verify

    from .main import UsageError

    if (args.ncnn_param is None) != (args.ncnn_bin is None):
        raise UsageError("--ncnn-param and --ncnn-bin go together")
    for name in ("atol", "rtol"):
        v = getattr(args, name)
        if v is not None and not (v >= 0 and math.isfinite(v)):
            raise UsageError(f"--{name} must be a finite number >= 0")
    options = VerifyOptions(fp16=args.fp16 == "1", converters=list(args.converters),
                            input_shapes=parse_inputshape(args.inputshape) if args.inputshape else None,
                            model=args.model_name, ncnn_param=args.ncnn_param, ncnn_bin=args.ncnn_bin,
                            inputs=list(args.inputs), atol=args.atol, rtol=args.rtol, seed=args.seed,
                            isolate=not args.no_isolate)
    result = verify(args.model, options)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_text(args.model, result, args.all))
    if not result.ok:
        if not args.json:
            print(f"error: {args.model}: {verdict(result)}", file=sys.stderr)
        return 1
    return 0


def verdict(result) -> str:
    """One line: why a verification is not ok (agrees with the report's headline)."""
    fd = result.first_divergent
    if fd is not None and result.outputs_ok:
        return f"layer {fd.layer} ({fd.type}) is wrong by itself, though the outputs are within tolerance"
    if fd is not None:
        return f"ncnn output differs from PyTorch beyond tolerance; first divergent layer {fd.layer} ({fd.type})"
    return "ncnn output differs from PyTorch beyond tolerance (no single layer to blame)"
