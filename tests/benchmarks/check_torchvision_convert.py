"""Breadth check: every torchvision classification (or video classification, optical flow or
semantic segmentation) model converts to ncnn and matches PyTorch.

Run with the benchmark virtualenv (torch 2.14.1 + torchvision 0.29.1), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py [--models a,b] [--dialect core]
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family video [--models r3d_18]
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family optical_flow
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family segmentation
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family timm

Each model runs in its own process (a crash or a memory peak stays there): built like the
conversion benchmark's models (``convert_zoo``: seeded random weights, non-trivial layer scales
and heads, calibrated BatchNorm), exported with ``torch.export.export`` on a seeded 1×3×224×224
input (299 for Inception-v3; video models: a 1×3×16×112×112 clip, 16×224×224 for MViT, S3D
and Swin3D, which need it; optical flow: RAFT's last flow after 12 refinements, of two
1×3×128×128 images; segmentation: the ``out`` map of a 1×3×224×224 image, no auxiliary head;
timm: ``convert_zoo.TIMM_MODELS``, the smallest model of nearly every timm architecture, at its
default input size),
optionally ``run_decompositions()``, converted in-process with fp32 weights, then run by the ncnn runtime
with exact options (fp32, no packing — segmentation and timm: ncnn's default packed layout,
without which its x86 kernel for dilated 3×3 convolutions crashes — one thread), fed and
read along the batch axes the conversion chose. Match = relative error (max |ncnn − PyTorch|
/ max |PyTorch|) ≤ 1e-3. Models whose export fails are listed as such (torch's problem, not
ours). Writes ``tests/benchmarks/results/torchvision_convert[_video|_optical_flow|_segmentation][_core].md`` and ``.json``;
a run with ``--models`` replaces those models' rows of the last run and keeps the others.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
TOL = 1e-3
#: per family: the torchvision module listing its models and the title of the results page
FAMILIES = {"classification": ("models", "classification model"), "video": ("models.video", "video classification model"),
            "optical_flow": ("models.optical_flow", "optical flow model"),
            "segmentation": ("models.segmentation", "semantic segmentation model"),
            "timm": ("", "timm image classifier"),
            "transformers": ("", "Hugging Face model")}  # verify only: check_transformers_convert converts them


def family_models(family: str, models: str = "") -> list[str]:
    """The models of a run: ``models`` (comma-separated) if given, else every model of the family."""
    if models:
        return models.split(",")
    if family == "timm":
        from tests.benchmarks.convert_zoo import TIMM_MODELS
        return list(TIMM_MODELS)
    if family == "transformers":  # each family, and with an attention mask where it takes one
        from tests.benchmarks.transformers_zoo import FAMILIES as HF
        return [n for f, (_, masked) in HF.items() for n in ([f, f"{f}+mask"] if masked else [f])]
    import importlib

    import torchvision

    return sorted(torchvision.models.list_models(module=importlib.import_module(f"torchvision.{FAMILIES[family][0]}")))


def family_versions(family: str) -> str:
    """The model library's version, for a results page."""
    if family in ("timm", "transformers"):
        lib = __import__(family)
        return f"{family} {lib.__version__}"
    import torchvision

    return f"torchvision {torchvision.__version__}"


def export_model(name: str, dialect: str, work: Path, family: str = "classification"):
    """Build torchvision model ``name`` (``convert_zoo.classifier``: seeded, calibrated), export it
    on its seeded input and save ``work/<name>.pt2``: (path, input, PyTorch's output). Raises what
    torch raises."""
    import torch

    from tests.benchmarks.convert_zoo import classifier

    if family == "transformers":
        return _export_transformers(name, dialect, work)
    model, x = classifier(name, family)
    inputs = x if isinstance(x, tuple) else (x,)
    with torch.no_grad():
        want = model(*inputs).numpy()
    ep = torch.export.export(model, inputs)
    if dialect == "core":
        ep = ep.run_decompositions()
    path = work / f"{name}.pt2"
    torch.export.save(ep, str(path))
    del model, ep
    return path, inputs, want


def _export_transformers(name: str, dialect: str, work: Path):
    """A ``transformers_zoo`` family (``<family>+mask``: with its attention mask), static, saved
    as ``work/<name>.pt2``: (path, inputs, None — the verify check needs no output here)."""
    import torch

    from tests.benchmarks.transformers_zoo import FAMILIES as HF

    family, _, mask = name.partition("+")
    case = HF[family][0](bool(mask))
    case.model.eval()
    ep = torch.export.export(case.model, (), dict(case.inputs), strict=False)
    if dialect == "core":
        ep = ep.run_decompositions()
    path = work / f"{name}.pt2"
    torch.export.save(ep, str(path))
    return path, tuple(case.inputs.values()), None


def one(name: str, dialect: str, work: Path, family: str = "classification") -> dict:
    """Build, export, convert and compare one model (runs in a child process)."""
    import numpy as np

    from engine.convert import ConvertOptions, convert
    from tests.ncnn_runtime import run_layout

    rec: dict = {"model": name}
    t0 = time.perf_counter()
    try:
        path, inputs, want = export_model(name, dialect, work, family)
    except Exception as e:  # torch's export, not our conversion
        return rec | {"status": "export failed", "detail": f"{type(e).__name__}: {str(e)[:160]}"}
    rec["export_s"] = round(time.perf_counter() - t0, 1)
    t1 = time.process_time()
    result = convert(str(path), ConvertOptions(fp16=False))
    rec["convert_cpu_s"] = round(time.process_time() - t1, 2)
    rec["layers"] = result.layer_count
    if not result.ok:
        reasons: dict[str, int] = {}
        for d in result.errors:
            key = f"{d.op}: {d.reason}"[:200]
            reasons[key] = reasons.get(key, 0) + 1
        return rec | {"status": "unconverted", "detail": "; ".join(f"{k} ×{v}" for k, v in reasons.items())[:400]}
    param, bin_ = work / f"{name}.ncnn.param", work / f"{name}.ncnn.bin"
    result.write(param, bin_)
    # along the batch axes chosen; DeepLabV3's dilated 3x3 convolutions need ncnn's packed layout
    (got,) = run_layout(param, bin_, [x.numpy() for x in inputs], result.ncnn.meta,
                        packed=family in ("segmentation", "timm"))
    err = float(np.abs(np.asarray(got, np.float64).reshape(want.shape) - want).max() / max(np.abs(want).max(), 1e-6))
    rec["rel_err"] = err
    rec["status"] = "match" if err <= TOL else "mismatch"
    if err > TOL:  # how ill-conditioned the model is: PyTorch's own float32 against float64
        rec["detail"] = f"PyTorch's float32 output is {_fp64_error(name, family, want):.1e} from float64"
    return rec


def _fp64_error(name: str, family: str, want) -> float:
    """Relative error of PyTorch's float32 output ``want`` against the same model in float64."""
    import numpy as np
    import torch

    from tests.benchmarks.convert_zoo import classifier

    model, x = classifier(name, family)
    inputs = x if isinstance(x, tuple) else (x,)
    with torch.no_grad():
        ref = model.double()(*(t.double() for t in inputs)).numpy()
    return float(np.abs(want - ref).max() / max(np.abs(ref).max(), 1e-12))


def run_children(script: Path, names: list[str], extra: list[str], timeout: int, row) -> list[dict]:
    """Run ``script --one NAME ... --work DIR`` for each model in its own process (a crash or a
    memory peak stays there); its last JSON line is the model's record. Prints ``row(record)``
    as each finishes."""
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"{script.stem}_") as work:
        for k, name in enumerate(names, 1):
            t0 = time.time()
            cmd = [sys.executable, str(script), "--one", name, *extra, "--work", work]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                rec = json.loads(lines[-1]) if r.returncode == 0 and lines else {
                    "model": name, "status": "crashed",
                    "detail": f"exit {r.returncode}: " + (r.stderr.strip().splitlines() or [""])[-1][:200]}
            except subprocess.TimeoutExpired:
                rec = {"model": name, "status": "crashed", "detail": f"over {timeout} s"}
            for f in Path(work).iterdir():
                shutil.rmtree(f) if f.is_dir() else f.unlink()
            rows.append(rec)
            print(f"[{k}/{len(names)} {time.time() - t0:.0f}s] {row(rec)}", flush=True)
    return rows


def store_rows(store: Path, rows: list[dict], *, subset: bool) -> list[dict]:
    """Save the records as JSON; a subset re-run replaces its models' rows of the last full run."""
    if subset and store.exists():
        fresh = {r["model"]: r for r in rows}
        rows = [fresh.pop(r["model"], r) for r in json.loads(store.read_text())] + list(fresh.values())
    store.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def _row(r: dict) -> str:
    err = f"{r['rel_err']:.1e}" if "rel_err" in r else "—"
    mark = {"match": "✅", "mismatch": "❌ mismatch", "unconverted": "❌ not converted",
            "export failed": "— export failed", "crashed": "❌ crashed"}.get(r["status"], r["status"])
    return (f"| {r['model']} | {mark} | {r.get('layers', '—')} | {err} | {r.get('convert_cpu_s', '—')} | "
            f"{r.get('detail', '')} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: all models of the family)")
    ap.add_argument("--family", choices=tuple(f for f in FAMILIES if f != "transformers"), default="classification")
    ap.add_argument("--dialect", choices=("training", "core"), default="training")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per model")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.dialect, Path(args.work), args.family)))
        return 0
    title = FAMILIES[args.family][1]
    names = family_models(args.family, args.models)
    fresh = run_children(Path(__file__), names, ["--dialect", args.dialect, "--family", args.family], args.timeout,
                         _row)
    suffix = ("" if args.family == "classification" else f"_{args.family}") + (
        "" if args.dialect == "training" else "_core")
    out = RESULTS / f"torchvision_convert{suffix}.md"
    rows = store_rows(out.with_suffix(".json"), fresh, subset=bool(args.models))
    exported = [r for r in rows if r["status"] != "export failed"]
    matched = [r for r in exported if r["status"] == "match"]
    import torch

    heading = (f"The smallest {title} of each timm architecture" if args.family == "timm" else
               f"Every torchvision {title}")
    text = [f"# {heading} through pt2ncnn ({args.dialect} dialect)", "",
            f"Generated by `tests/benchmarks/check_torchvision_convert.py` on {time.strftime('%Y-%m-%d %H:%M')}; "
            f"torch {torch.__version__}, {family_versions(args.family)}. Seeded random weights (BatchNorm "
            f"calibrated), fp32 weights, ncnn with exact options; match = relative error ≤ {TOL:g}.", "",
            f"**{len(matched)}/{len(exported)} exported models convert and match PyTorch** "
            f"({len(rows) - len(exported)} did not export with torch).", "",
            "| model | result | ncnn layers | rel. error | convert CPU s | detail |", "|---|---|---|---|---|---|"]
    text += [_row(r) for r in rows]
    out.write_text("\n".join(text) + "\n")
    print(f"{len(matched)}/{len(exported)} match; wrote {out}")
    # the exit code speaks for the models of this run (a --models run keeps other rows of the last)
    failed = [r["model"] for r in fresh if r["status"] not in ("match", "export failed")]
    if failed:
        print(f"not matching in this run: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
