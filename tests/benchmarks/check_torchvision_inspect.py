"""Acceptance check: ``pt2ncnn inspect`` reports exact operator counts for torchvision
classification models exported with the benchmark torch (2.14.1).

Run with the benchmark virtualenv (torch 2.14.1 + torchvision 0.29.1), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_inspect.py [--models a,b] [--out DIR]

For every model: ``torch.export.export(model, (x,))`` + ``torch.export.save``, then
``pt2ncnn inspect --json`` in a fresh process; its ``num_nodes`` and ``ops`` must equal the
counts of ``call_function`` nodes of the exported graph (by target, without ``torch.ops.``).
Writes a markdown table to ``tests/benchmarks/results/torchvision_inspect.md``.
"""
from __future__ import annotations

import argparse
import collections
import json
import operator
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def expected_ops(ep) -> collections.Counter:
    c: collections.Counter = collections.Counter()
    for n in ep.graph.nodes:
        # getitem nodes only unpack multi-output results in the FX graph; the serialized graph
        # has none (a node lists all its outputs), and num_nodes counts serialized nodes
        if n.op == "call_function" and n.target is not operator.getitem:
            name = str(n.target)
            if hasattr(n.target, "_schema") or name.startswith("aten."):
                name = str(n.target)
            else:
                name = f"{n.target.__module__}.{n.target.__name__}"
            c[name[len("torch.ops."):] if name.startswith("torch.ops.") else name] += 1
    return c


def main() -> int:
    import torch
    import torchvision

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    names = args.models.split(",") if args.models else sorted(torchvision.models.list_models(module=torchvision.models))
    out_dir = Path(args.out or tempfile.mkdtemp(prefix="tv_inspect_"))
    rows, failures = [], 0
    for name in names:
        size = 299 if name.startswith("inception") else 224
        t0 = time.time()
        try:
            model = torchvision.models.get_model(name, weights=None).eval()
            ep = torch.export.export(model, (torch.randn(1, 3, size, size),))
            path = out_dir / f"{name}.pt2"
            torch.export.save(ep, str(path))
            want = expected_ops(ep)
            del model
        except Exception as e:  # export problems are torch's, not ours: record and go on
            rows.append((name, "export failed", f"{type(e).__name__}: {str(e)[:80]}"))
            continue
        r = subprocess.run([sys.executable, "-m", "engine.cli.main", "inspect", str(path), "--json"],
                           capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            rows.append((name, "FAIL", r.stderr.strip()[:200]))
            failures += 1
            continue
        got = json.loads(r.stdout)
        ok = got["num_nodes"] == sum(want.values()) and got["ops"] == dict(want)
        diff = "" if ok else f"nodes {got['num_nodes']} vs {sum(want.values())}; " + ", ".join(
            f"{k}: {got['ops'].get(k)} vs {want.get(k)}" for k in sorted(set(got["ops"]) | set(want))
            if got["ops"].get(k) != want.get(k))
        failures += not ok
        rows.append((name, "exact" if ok else "MISMATCH", f"{sum(want.values())} nodes, {len(want)} targets {diff}"))
        print(f"{name:28s} {rows[-1][1]:8s} {rows[-1][2]} ({time.time() - t0:.1f}s)", flush=True)
        path.unlink()
    res = ROOT / "tests" / "benchmarks" / "results" / "torchvision_inspect.md"
    lines = [f"# pt2ncnn inspect vs torch.export (torch {torch.__version__}, torchvision {torchvision.__version__})", "",
             "| model | result | detail |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
    exact = sum(1 for r in rows if r[1] == "exact")
    lines += ["", f"{exact} of {len(rows)} models exact; {failures} failures."]
    res.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-1:]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
