"""Benchmark: ``pt2ncnn verify`` whole process, against plain PyTorch on the same model.

Run with the benchmark virtualenv (torchvision builds the models), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/bench_verify.py [--models resnet18,swin_t]
        [--repeat 3] [--baseline REV] [--python PY]

For each model (``convert_zoo``: seeded random weights, calibrated BatchNorm, 1×3×224×224),
exported once with ``torch.export``, every process is timed from start to exit (wall, and CPU
time of the process and its threads), the median of ``--repeat`` runs:

* **anchor** — plain PyTorch: a process that imports torch, ``torch.export.load`` s the package
  and runs the model once (what any check against PyTorch costs at least);
* **verify** — ``python -m engine.cli.main verify model.pt2 --json`` of this tree (default fp16
  weights, sample inputs, every layer also re-run alone);
* **baseline** (``--baseline REV``) — the same command of commit REV (``git archive``d), measured
  in the same run.

The ratio verify / anchor is what the machine's load does not change much. ``--python`` runs the
timed processes with another interpreter (default: this one). Writes
``tests/benchmarks/results/verify_speed.md`` and ``.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
DEFAULT_MODELS = ("resnet18", "swin_t")
ANCHOR = ("import sys, torch\n"
          "ep = torch.export.load(sys.argv[1])\n"
          "args, kwargs = ep.example_inputs\n"
          "with torch.no_grad():\n"
          "    ep.module()(*args, **kwargs)\n")


def export(name: str, path: Path) -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    from tests.benchmarks.convert_zoo import build, example_input

    torch.export.save(torch.export.export(build(name), (example_input(),)), str(path))


def timed(cmd: list[str], cwd: Path, env: dict) -> dict:
    """Run ``cmd`` to completion: wall seconds, CPU seconds (user + system), exit code, stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "rc": p.returncode, "out": p.stdout, "err": p.stderr[-400:]}


def median_of(runs: list[dict]) -> dict:
    return {"wall": statistics.median(r["wall"] for r in runs), "cpu": statistics.median(r["cpu"] for r in runs),
            "rc": runs[-1]["rc"]}


def measure(python: str, model: Path, tree: Path | None, repeat: int) -> dict:
    env = dict(os.environ)
    out: dict = {}
    cases = {"anchor": ([python, "-c", ANCHOR, str(model)], ROOT)}
    if tree is not None:
        cases["baseline"] = ([python, "-m", "engine.cli.main", "verify", str(model), "--json"], tree)
    cases["verify"] = ([python, "-m", "engine.cli.main", "verify", str(model), "--json"], ROOT)
    runs: dict[str, list[dict]] = {k: [] for k in cases}
    for _ in range(repeat):  # interleaved, so load changes hit every case alike
        for key, (cmd, cwd) in cases.items():
            e = dict(env, PYTHONPATH=str(cwd))
            r = timed(cmd, cwd, e)
            if r["rc"] not in (0, 1):
                raise SystemExit(f"{key} failed ({r['rc']}): {r['err']}")
            runs[key].append(r)
    for key, rs in runs.items():
        out[key] = median_of(rs)
    doc = json.loads(runs["verify"][-1]["out"])
    out["layers"] = len(doc["layers"])
    out["compared"] = sum(1 for x in doc["layers"] if x["max_rel"] is not None)
    out["alone"] = sum(1 for x in doc["layers"] if x["own_max_rel"] is not None)
    out["ok"] = doc["ok"]
    out["runner"] = doc.get("torch_runner", "")
    if "baseline" in runs:
        base = json.loads(runs["baseline"][-1]["out"])
        out["baseline_alone"] = sum(1 for x in base["layers"] if x["own_max_rel"] is not None)
        out["baseline_ok_headline"] = base["first_divergent"] is None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="a commit to measure side by side (git archive)")
    ap.add_argument("--python", default=sys.executable, help="interpreter of the timed processes")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_verify_") as work:
        work = Path(work)
        tree = None
        if args.baseline:
            tree = work / "baseline"
            tree.mkdir()
            archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        for name in args.models.split(","):
            path = work / f"{name}.pt2"
            export(name, path)
            r = measure(args.python, path, tree, args.repeat)
            r["model"] = name
            rows.append(r)
            base = f"  baseline {r['baseline']['wall']:.1f} s" if "baseline" in r else ""
            print(f"{name}: verify {r['verify']['wall']:.1f} s wall / {r['verify']['cpu']:.1f} s CPU, anchor "
                  f"{r['anchor']['wall']:.1f} s / {r['anchor']['cpu']:.1f} s{base}; {r['layers']} layers, "
                  f"{r['alone']} re-run alone, ok {r['ok']}", flush=True)
    store = RESULTS / "verify_speed.json"
    store.write_text(json.dumps(rows, indent=1) + "\n")
    version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    load = os.getloadavg()[0]
    text = ["# `pt2ncnn verify` whole process against plain PyTorch", "",
            f"Generated by `tests/benchmarks/bench_verify.py` on {time.strftime('%Y-%m-%d %H:%M')}; torch "
            f"{version}; median of {args.repeat} interleaved runs; load average {load:.1f} at the end "
            "(2-core machine shared with other jobs). Anchor: a process importing torch, loading the package "
            "with `torch.export.load` and running the model once. fp16 weights, sample inputs, every compared "
            "layer also re-run alone.", "",
            "| model | ncnn layers | compared / re-run alone | verify wall s | verify CPU s | anchor wall s | "
            "anchor CPU s | verify / anchor (wall) |" + (f" {args.baseline} wall s | {args.baseline} CPU s |"
                                                        if args.baseline else ""),
            "|---|---|---|---|---|---|---|---|" + ("---|---|" if args.baseline else "")]
    for r in rows:
        v, a = r["verify"], r["anchor"]
        line = (f"| {r['model']} | {r['layers']} | {r['compared']} / {r['alone']} | {v['wall']:.1f} | {v['cpu']:.1f} | "
                f"{a['wall']:.1f} | {a['cpu']:.1f} | {v['wall'] / a['wall']:.2f} |")
        if "baseline" in r:
            line += f" {r['baseline']['wall']:.1f} | {r['baseline']['cpu']:.1f} |"
        text.append(line)
    out = RESULTS / "verify_speed.md"
    out.write_text("\n".join(text) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
