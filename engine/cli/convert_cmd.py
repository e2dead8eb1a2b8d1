"""``pt2ncnn convert``: convert a ``.pt2`` package to ncnn (and pnnx) model files.

Also reached by the pnnx-style shorthand ``pt2ncnn MODEL.pt2 fp16=0 ncnnparam=P ...``, whose
``key=value`` words are accepted here as trailing arguments.

By default the Python scripts ``<stem>_pnnx.py`` (the pnnx graph as a PyTorch module) and
``<stem>_ncnn.py`` (the ncnn model run by the ncnn runtime) are written beside their models, as
pnnx does (``--pnnx-py``/``--ncnn-py`` or ``pnnxpy=``/``ncnnpy=`` to place them, ``--no-py`` for
neither).

Exit codes: 0 converted; 1 conversion incomplete (a diagnostics table is printed and no ncnn
files are written unless ``--partial``); 2 bad input or usage.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.collector import no_cyclic_gc

NAME = "convert"
HELP = ("convert a .pt2 package to ncnn (.ncnn.param/.ncnn.bin) and pnnx (.pnnx.param/.pnnx.bin), with "
        "the Python scripts <stem>_pnnx.py and <stem>_ncnn.py")

#: pnnx CLI keys we understand, and keys pnnx has that do not apply here (accepted, ignored)
_PNNX_KEYS = {"fp16", "ncnnparam", "ncnnbin", "pnnxparam", "pnnxbin", "pnnxpy", "ncnnpy", "inputshape", "inputshape2"}
_IGNORED_KEYS = {"pnnxonnx", "optlevel", "device", "moduleop"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .main import add_converters_option

    p.add_argument("model", help="the .pt2 package")
    p.add_argument("pnnx_style", nargs="*", metavar="key=value",
                   help="pnnx-style options: fp16=0|1 ncnnparam=P ncnnbin=B pnnxparam=P pnnxbin=B pnnxpy=P ncnnpy=P "
                        "inputshape=[1,3,224,224]")
    p.add_argument("-o", "--output-dir", metavar="DIR", help="where to write the files (default: the model's folder)")
    p.add_argument("--fp16", choices=("0", "1"), default=None, help="store weights as fp16 (1, default) or fp32 (0)")
    add_converters_option(p)
    p.add_argument("--dump-passes", metavar="DIR", help="write NN_<pass>.txt and NN_<pass>.diff for every pass")
    p.add_argument("--report", metavar="FILE.json", help="write a JSON report (layers, diagnostics, passes, seconds)")
    p.add_argument("--inputshape", metavar="SHAPES", help="concrete input shapes, e.g. [1,3,224,224],[1,10]")
    p.add_argument("--model-name", metavar="NAME", help="which model of a multi-model package (the files are then "
                                                       "named <stem>.NAME.ncnn.param ...)")
    p.add_argument("--partial", action="store_true", help="write the model even if some operators did not convert")
    p.add_argument("--no-pnnx", action="store_true",
                   help="do not write the .pnnx.param/.pnnx.bin files (nor the _pnnx.py)")
    p.add_argument("--pnnx-py", metavar="FILE.py",
                   help="where to write the pnnx model as a PyTorch module (default: <stem>_pnnx.py)")
    p.add_argument("--ncnn-py", metavar="FILE.py",
                   help="where to write the script running the ncnn model (default: <stem>_ncnn.py)")
    p.add_argument("--no-py", action="store_true", help="write neither Python script")
    p.add_argument("--fsync", action="store_true",
                   help="force the written files to the disk before they replace the old ones (survive a power cut)")
    p.add_argument("--quiet", "-q", action="store_true", help="print only problems")


def _pnnx_options(words: list[str]) -> dict[str, str]:
    from .main import UsageError

    out: dict[str, str] = {}
    for w in words:
        key, eq, value = w.partition("=")
        if not eq:
            raise UsageError(f"unexpected argument {w!r} (pnnx-style options look like key=value)")
        if key in _IGNORED_KEYS:
            print(f"warning: {key}= does not apply to .pt2 conversion; ignored", file=sys.stderr)
            continue
        if key not in _PNNX_KEYS:
            raise UsageError(f"unknown option {key}= (known: {', '.join(sorted(_PNNX_KEYS))})")
        out[key] = value
    return out


def _paths(args, kv: dict[str, str]) -> dict[str, Path | None]:
    model = Path(args.model)
    stem = model.name[:-4] if model.name.endswith(".pt2") else model.stem
    if args.model_name:  # one program of several: <stem>.<program>.ncnn.param ...
        stem = f"{stem}.{args.model_name}"
    folder = Path(args.output_dir) if args.output_dir else model.parent
    paths: dict[str, Path | None] = {
        "ncnn_param": Path(kv["ncnnparam"]) if "ncnnparam" in kv else folder / f"{stem}.ncnn.param",
        "ncnn_bin": Path(kv["ncnnbin"]) if "ncnnbin" in kv else folder / f"{stem}.ncnn.bin",
        "pnnx_param": Path(kv["pnnxparam"]) if "pnnxparam" in kv else folder / f"{stem}.pnnx.param",
        "pnnx_bin": Path(kv["pnnxbin"]) if "pnnxbin" in kv else folder / f"{stem}.pnnx.bin",
    }
    scripts = _script_paths(args, kv, paths)
    if args.no_pnnx:
        paths["pnnx_param"] = paths["pnnx_bin"] = None
    paths.update(scripts)
    return paths


def _script_paths(args, kv: dict[str, str], paths: dict[str, Path | None]) -> dict[str, Path | None]:
    """``<stem>_pnnx.py`` beside the ``.pnnx.param`` and ``<stem>_ncnn.py`` beside the
    ``.ncnn.param`` (pnnx writes both by default); ``--no-py``: none; with ``--no-pnnx`` no
    ``_pnnx.py`` (it loads the ``.pnnx.bin``)."""
    from engine.convert import script_path

    from .main import UsageError

    pnnx_py = args.pnnx_py or kv.get("pnnxpy")
    ncnn_py = args.ncnn_py or kv.get("ncnnpy")
    if args.no_py and (pnnx_py or ncnn_py):
        raise UsageError("--no-py contradicts --pnnx-py/--ncnn-py (pnnxpy=/ncnnpy=)")
    if args.no_pnnx and pnnx_py:
        raise UsageError("the _pnnx.py loads the .pnnx.bin, which --no-pnnx does not write")
    if args.no_py:
        return {"pnnx_py": None, "ncnn_py": None}
    return {"pnnx_py": None if args.no_pnnx else Path(pnnx_py) if pnnx_py else script_path(paths["pnnx_param"], "pnnx"),
            "ncnn_py": Path(ncnn_py) if ncnn_py else script_path(paths["ncnn_param"], "ncnn")}


def run(args) -> int:
    with no_cyclic_gc(restore=not getattr(args, "exiting", False)):
        return _run(args)


def _run(args) -> int:
    from engine.convert import ConvertOptions, convert
    from engine.convert.inputshape import parse_inputshape
    from engine.diagnostics import format_table
    from engine.passes import dump_records
    from engine.writers.atomic import durable_writes, write_text_atomic

    from .main import UsageError

    kv = _pnnx_options(args.pnnx_style)
    fp16_text = args.fp16 if args.fp16 is not None else kv.get("fp16", "1")
    if fp16_text not in ("0", "1"):
        raise UsageError(f"fp16 must be 0 or 1, not {fp16_text!r}")
    shape_text = args.inputshape or kv.get("inputshape")
    # pass snapshots and the ATen graph's copy only when something shows them
    options = ConvertOptions(fp16=fp16_text == "1", input_shapes=parse_inputshape(shape_text) if shape_text else None,
                             converters=list(args.converters), model=args.model_name,
                             snapshots=bool(args.dump_passes or args.report), keep_aten=bool(args.report))
    paths = _paths(args, kv)  # usage errors before the work
    result = convert(args.model, options)
    if args.dump_passes:
        dump_records(result.records, args.dump_passes)
    if args.output_dir:
        try:
            Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            from engine.errors import WriteError

            raise WriteError(args.output_dir, f"cannot create the output folder: {e.strerror or e}") from None
    written: list[Path] = []
    if result.ok or args.partial:
        with durable_writes(args.fsync):
            written = result.write(**paths, partial=args.partial)
    if args.report:
        report = result.report()
        report["files"] = [str(p) for p in written]
        write_text_atomic(args.report, json.dumps(report, indent=2) + "\n")
    if not result.ok:
        print(format_table(result.errors), file=sys.stderr)
        unsupported = len(result.errors)
        tail = "partial model written" if written else "no model files written (use --partial to write what converted)"
        print(f"error: {args.model}: conversion incomplete: {unsupported} operator(s) not converted; {tail}",
              file=sys.stderr)
        return 1
    if not args.quiet:
        for w in [d for d in result.diagnostics if d.severity == "warning"]:
            print(f"warning: {w}", file=sys.stderr)
        print(f"converted {args.model}: {result.layer_count} ncnn layers in {result.seconds:.2f} s")
        for p in written:
            print(f"  wrote {p}")
        for kind in ("inputs", "outputs"):
            for i in result.ncnn.meta.get(kind, []):
                print("  " + _describe_blob(kind[:-1], i))
    return 0


def _describe_blob(kind: str, spec: dict) -> str:
    """``input in0 (x): [1, 3, 224, 224] float32, batch axis 0 — ncnn.Mat(x, batch_index=0)``."""
    shape = spec.get("shape")
    dims = "[" + ", ".join(str(d) for d in shape) + "]" if shape is not None else "[?]"
    b = spec.get("batch_dim")
    dtype = spec.get("dtype", "float32")
    where = f"batch axis {b}" if b is not None else "no batch axis"
    how = (f"ncnn.Mat(a, batch_index={b})" if kind == "input" else f"mat.numpy(batch_index={b})") if b is not None \
        else ("ncnn.Mat(a)" if kind == "input" else "mat.numpy()")
    if dtype == "int32":
        how += ", a as int32: token ids for ncnn's Embed"
    return f"{kind} {spec['blob']} ({spec['name']}): {dims} {dtype}, {where} — {how}"
