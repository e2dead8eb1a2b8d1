"""Breadth check: every torchvision classification model converts to ncnn and matches PyTorch.

Run with the benchmark virtualenv (torch 2.14.1 + torchvision 0.29.1), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py [--models a,b] [--dialect core]

Each model runs in its own process (a crash or a memory peak stays there): built like the
conversion benchmark's models (``convert_zoo``: seeded random weights, non-trivial layer scales
and heads, calibrated BatchNorm), exported with ``torch.export.export`` on a seeded 1×3×224×224
input (299 for Inception-v3), optionally ``run_decompositions()``, converted in-process with
fp32 weights, then run by the ncnn runtime with exact options (fp32, no packing, one thread).
Match = relative error (max |ncnn − PyTorch| / max |PyTorch|) ≤ 1e-3. Models whose export fails
are listed as such (torch's problem, not ours). Writes
``tests/benchmarks/results/torchvision_convert[_core].md`` and ``.json``; a run with ``--models``
replaces those models' rows of the last run and keeps the others.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
TOL = 1e-3


def one(name: str, dialect: str, work: Path) -> dict:
    """Build, export, convert and compare one model (runs in a child process)."""
    import numpy as np
    import torch

    from engine.convert import ConvertOptions, convert
    from tests.benchmarks.convert_zoo import classifier
    from tests.ncnn_runtime import run

    rec: dict = {"model": name}
    t0 = time.perf_counter()
    try:
        model, x = classifier(name)
        with torch.no_grad():
            want = model(x).numpy()
        ep = torch.export.export(model, (x,))
        if dialect == "core":
            ep = ep.run_decompositions()
        path = work / f"{name}.pt2"
        torch.export.save(ep, str(path))
        del model, ep
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
    (got,) = run(param, bin_, {"in0": x.numpy()[0]}, ["out0"])
    err = float(np.abs(np.asarray(got, np.float64).reshape(want.shape) - want).max() / max(np.abs(want).max(), 1e-6))
    rec["rel_err"] = err
    rec["status"] = "match" if err <= TOL else "mismatch"
    return rec


def _row(r: dict) -> str:
    err = f"{r['rel_err']:.1e}" if "rel_err" in r else "—"
    mark = {"match": "✅", "mismatch": "❌ mismatch", "unconverted": "❌ not converted",
            "export failed": "— export failed", "crashed": "❌ crashed"}.get(r["status"], r["status"])
    return (f"| {r['model']} | {mark} | {r.get('layers', '—')} | {err} | {r.get('convert_cpu_s', '—')} | "
            f"{r.get('detail', '')} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: all classification models)")
    ap.add_argument("--dialect", choices=("training", "core"), default="training")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per model")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.dialect, Path(args.work))))
        return 0
    import torchvision

    names = args.models.split(",") if args.models else sorted(torchvision.models.list_models(module=torchvision.models))
    rows = []
    with tempfile.TemporaryDirectory(prefix="tv_convert_") as work:
        for k, name in enumerate(names, 1):
            t0 = time.time()
            cmd = [sys.executable, __file__, "--one", name, "--dialect", args.dialect, "--work", work]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=args.timeout)
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                rec = json.loads(lines[-1]) if r.returncode == 0 and lines else {
                    "model": name, "status": "crashed",
                    "detail": f"exit {r.returncode}: " + (r.stderr.strip().splitlines() or [""])[-1][:200]}
            except subprocess.TimeoutExpired:
                rec = {"model": name, "status": "crashed", "detail": f"over {args.timeout} s"}
            for f in Path(work).iterdir():
                f.unlink()
            rows.append(rec)
            print(f"[{k}/{len(names)} {time.time() - t0:.0f}s] {_row(rec)}", flush=True)
    suffix = "" if args.dialect == "training" else "_core"
    out = RESULTS / f"torchvision_convert{suffix}.md"
    store = out.with_suffix(".json")
    if args.models and store.exists():  # a subset re-run updates its rows of the last full run
        fresh = {r["model"]: r for r in rows}
        rows = [fresh.pop(r["model"], r) for r in json.loads(store.read_text())] + list(fresh.values())
    store.write_text(json.dumps(rows, indent=1) + "\n")
    exported = [r for r in rows if r["status"] != "export failed"]
    matched = [r for r in exported if r["status"] == "match"]
    import torch

    text = [f"# Every torchvision classification model through pt2ncnn ({args.dialect} dialect)", "",
            f"Generated by `tests/benchmarks/check_torchvision_convert.py` on {time.strftime('%Y-%m-%d %H:%M')}; "
            f"torch {torch.__version__}, torchvision {torchvision.__version__}. Seeded random weights (BatchNorm "
            f"calibrated), fp32 weights, ncnn with exact options; match = relative error ≤ {TOL:g}.", "",
            f"**{len(matched)}/{len(exported)} exported models convert and match PyTorch** "
            f"({len(rows) - len(exported)} did not export with torch).", "",
            "| model | result | ncnn layers | rel. error | convert CPU s | detail |", "|---|---|---|---|---|---|"]
    text += [_row(r) for r in rows]
    out.write_text("\n".join(text) + "\n")
    print(f"{len(matched)}/{len(exported)} match; wrote {out}")
    return 0 if len(matched) == len(exported) else 1


if __name__ == "__main__":
    sys.exit(main())
