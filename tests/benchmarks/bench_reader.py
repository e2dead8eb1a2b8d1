"""Reader benchmark: pt2ncnn's torch-free reader against ``torch.export.load``, same files,
same run, reported as ratios. Not part of the default test run (not named ``test_*``).

    .venv/bin/python tests/benchmarks/bench_reader.py [--runs 5] [--rebuild]

Models (``bench_models.py``, exported into /tmp/pt2ncnn-bench, never committed): a ~4 MB
ResNet-style CNN, a ~350 MB ViT-B/16-sized transformer and a ~1,500-node DenseNet.

Measured, each side in its own fresh interpreter:

(a) open-to-graph time in-process, imports excluded on both sides, median of ``--runs``:
    ``engine.load(p)`` + the graph's nodes and the signature, vs ``torch.export.load(p)``;
(b) whole-process wall time: ``pt2ncnn inspect p`` vs
    ``python -c "import torch; torch.export.load(p)"``, median of ``--runs``;
(c) peak RSS above the interpreter baseline (same imports, nothing opened) for opening each
    model: ``ru_maxrss`` of the opening process minus that of the baseline process.

Targets (issue #2 §5): (a) ≥ 20x, (b) ≥ 10x, (c) < 100 MB for the 350 MB model.
The table is printed and written to ``tests/benchmarks/results/reader.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fixtures.runner import CLI_CODE, child_env, run_measured  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "reader.md"
BENCH_DIR = Path("/tmp/pt2ncnn-bench")
MODELS = ("cnn", "vit_b16", "densenet")
QUIET_TORCH = "import logging, warnings\nlogging.disable(logging.CRITICAL)\nwarnings.simplefilter('ignore')"

OURS_OPEN = """
with engine.load(PATH) as pkg:
    ep = pkg.model
    n = len(ep.graph.nodes)
    _ = ep.signature.inputs
"""
TORCH_OPEN = """
ep = torch.export.load(PATH)
n = len(ep.graph.nodes)
del ep
"""
TIMED = """
times = []
for _ in range({runs}):
    t0 = time.perf_counter()
{open_code}
    times.append(time.perf_counter() - t0)
print("@@TIMES@@" + json.dumps(times))
"""

TARGET_INPROCESS = 20.0
TARGET_PROCESS = 10.0
TARGET_RSS_MB = 100.0


@dataclass
class Row:
    model: str
    size_mb: float
    nodes: int
    ours_s: float
    torch_s: float
    ours_proc_s: float
    torch_proc_s: float
    ours_rss_mb: float  # ru_maxrss(open) - ru_maxrss(imports only)
    torch_rss_mb: float
    ours_open_peak_mb: float  # peak RSS during the open alone (high-water mark reset)
    torch_open_peak_mb: float
    ours_maxrss_mb: float  # absolute ru_maxrss of the opening process
    torch_maxrss_mb: float


def _indent(code: str, n: int) -> str:
    return "\n".join(" " * n + line for line in code.strip().splitlines())


def inprocess_times(imports: str, open_code: str, path: Path, runs: int) -> list[float]:
    """Open-to-graph times measured inside one fresh interpreter after its imports."""
    code = "\n".join([
        "import json, time", imports, f"PATH = {str(path)!r}",
        TIMED.format(runs=runs, open_code=_indent(open_code, 4)),
    ])
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=child_env(), cwd=REPO, timeout=3600)
    line = next((x for x in p.stdout.splitlines() if x.startswith("@@TIMES@@")), None)
    if line is None:
        raise RuntimeError(f"benchmark child failed:\n{p.stderr[-3000:]}")
    return json.loads(line[len("@@TIMES@@"):])


def process_time(argv: list[str], runs: int) -> float:
    """Median wall time of a whole process (interpreter start to exit)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, env=child_env(), cwd=REPO,
                           timeout=3600)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise RuntimeError(f"{argv} failed:\n{p.stderr[-3000:]}")
    return statistics.median(times)


def _status_kb(field: str) -> str:
    return f"int(open('/proc/self/status').read().split('{field}:')[1].split()[0])"


#: Prefix for the open code: reset the kernel's peak-RSS mark (Linux ≥ 4.0), note current RSS.
_HWM_BEFORE = f"""
open('/proc/self/clear_refs', 'w').write('5')
RSS_BEFORE = {_status_kb('VmRSS')}
"""
_HWM_AFTER = f"""
print("@@HWM@@", {_status_kb('VmHWM')} - RSS_BEFORE)
"""


def extra_rss_mb(imports: str, open_code: str, path: Path) -> tuple[float, float, float]:
    """Memory for opening ``path``, two ways: (ru_maxrss of the opening process minus
    ru_maxrss of a process with the same imports only, peak RSS during the open alone —
    kernel high-water mark reset after the imports — and the opening process's ru_maxrss)."""
    base = run_measured(imports, "pass")
    run = run_measured(imports + f"\nPATH = {str(path)!r}", open_code)
    hwm = run_measured(imports + f"\nPATH = {str(path)!r}", _HWM_BEFORE + open_code + _HWM_AFTER,
                       capture=True)
    for r in (base, run, hwm):
        if r["error"]:
            raise RuntimeError(r["error"])
    during = int(next(x for x in hwm["stdout"].splitlines() if x.startswith("@@HWM@@")).split()[1])
    return (run["maxrss_kb"] - base["maxrss_kb"]) / 1024, during / 1024, run["maxrss_kb"] / 1024


def cli_argv(path: Path) -> list[str]:
    script = shutil.which("pt2ncnn", path=str(Path(sys.executable).parent))
    return [script, "inspect", str(path)] if script else [sys.executable, "-c", CLI_CODE, "inspect", str(path)]


def measure(name: str, path: Path, runs: int) -> Row:
    import engine

    with engine.load(path) as pkg:
        nodes = len(pkg.model.graph.nodes)
    torch_imports = "import torch\n" + QUIET_TORCH
    torch_runs = max(3, runs // 2) if path.stat().st_size > 100e6 else runs
    # ours is cheap: take 3x the runs for a stable median on a shared machine
    ours = inprocess_times("import engine", OURS_OPEN, path, 3 * runs + 1)[1:]  # drop the cold first
    theirs = inprocess_times(torch_imports, TORCH_OPEN, path, torch_runs + 1)[1:]
    torch_cmd = f"{QUIET_TORCH}\nimport torch\ntorch.export.load({str(path)!r})"
    return Row(
        model=name,
        size_mb=path.stat().st_size / 1e6,
        nodes=nodes,
        ours_s=statistics.median(ours),
        torch_s=statistics.median(theirs),
        ours_proc_s=process_time(cli_argv(path), runs),
        torch_proc_s=process_time([sys.executable, "-c", torch_cmd], torch_runs),
        **_rss_fields(path, torch_imports),
    )


def _rss_fields(path: Path, torch_imports: str) -> dict:
    ours = extra_rss_mb("import engine", OURS_OPEN, path)
    theirs = extra_rss_mb(torch_imports, TORCH_OPEN, path)
    return {"ours_rss_mb": ours[0], "ours_open_peak_mb": ours[1], "ours_maxrss_mb": ours[2],
            "torch_rss_mb": theirs[0], "torch_open_peak_mb": theirs[1], "torch_maxrss_mb": theirs[2]}


def _fmt_s(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def report(rows: list[Row], runs: int) -> str:
    import numpy
    import torch

    vit = next((r for r in rows if r.model == "vit_b16"), None)
    lines = [
        "# Reader benchmark: pt2ncnn vs torch.export.load",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} by `tests/benchmarks/bench_reader.py` on "
        f"{platform.machine()} ({os.cpu_count()} CPUs), Python {platform.python_version()}, "
        f"torch {torch.__version__}, numpy {numpy.__version__}; load average at the end "
        f"{os.getloadavg()[0]:.1f}. Medians: in-process pt2ncnn {3 * runs} runs, torch {runs} "
        f"({max(3, runs // 2)} on files over 100 MB), after one discarded cold run each; whole-process "
        f"{runs} runs each (torch {max(3, runs // 2)} on files over 100 MB). Each side runs in its "
        "own fresh interpreter.",
        "",
        "## (a) Open-to-graph time in-process (imports excluded on both sides)",
        "",
        "| model | file | graph nodes | pt2ncnn | torch.export.load | speed-up |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r.model} | {r.size_mb:.1f} MB | {r.nodes} | {_fmt_s(r.ours_s)} | "
                     f"{_fmt_s(r.torch_s)} | **{r.torch_s / r.ours_s:.0f}x** |")
    lines += [
        "",
        "## (b) Whole process (start-up, imports, open, exit)",
        "",
        "| model | `pt2ncnn inspect` | `python -c \"import torch; torch.export.load(...)\"` | speed-up |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r.model} | {_fmt_s(r.ours_proc_s)} | {_fmt_s(r.torch_proc_s)} | "
                     f"**{r.torch_proc_s / r.ours_proc_s:.1f}x** |")
    lines += [
        "",
        "## (c) Peak RSS above interpreter baseline while opening",
        "",
        "Two measures: *above baseline* = `ru_maxrss` of a process that imports and opens the",
        "file minus `ru_maxrss` of a process with the same imports only; *during open* = the",
        "kernel's peak-RSS mark reset after the imports (`/proc/self/clear_refs`), minus the RSS",
        "at that point (immune to a transient peak while importing). *peak* = absolute",
        "`ru_maxrss` of the opening process. Children are started from `/bin/sh`, not from the",
        "benchmark process, so Linux does not carry this process's own peak into their `ru_maxrss`.",
        "",
        "| model | pt2ncnn above baseline | during open | peak | torch above baseline | during open | peak |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r.model} | {r.ours_rss_mb:.1f} MB | {r.ours_open_peak_mb:.1f} MB | "
                     f"{r.ours_maxrss_mb:.0f} MB | {r.torch_rss_mb:.1f} MB | "
                     f"{r.torch_open_peak_mb:.1f} MB | {r.torch_maxrss_mb:.0f} MB |")
    lines += ["", "## Targets", ""]
    worst_a = min(r.torch_s / r.ours_s for r in rows)
    worst_b = min(r.torch_proc_s / r.ours_proc_s for r in rows)
    lines.append(f"- in-process ≥ {TARGET_INPROCESS:.0f}x: worst {worst_a:.0f}x — "
                 f"{'met' if worst_a >= TARGET_INPROCESS else 'NOT met'}")
    lines.append(f"- whole process ≥ {TARGET_PROCESS:.0f}x: worst {worst_b:.1f}x — "
                 f"{'met' if worst_b >= TARGET_PROCESS else 'NOT met'}")
    if vit:
        worst = max(vit.ours_rss_mb, vit.ours_open_peak_mb)
        lines.append(f"- RSS above baseline for the 350 MB model < {TARGET_RSS_MB:.0f} MB: "
                     f"{worst:.1f} MB (the larger of both measures) — "
                     f"{'met' if worst < TARGET_RSS_MB else 'NOT met'}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--rebuild", action="store_true", help="re-export the models")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from tests.benchmarks.bench_models import build

    rows = []
    for name in args.models:
        if args.rebuild:
            (BENCH_DIR / f"{name}.pt2").unlink(missing_ok=True)
        path = build(name, BENCH_DIR)
        print(f"measuring {name} ({path.stat().st_size / 1e6:.1f} MB) ...", flush=True)
        rows.append(measure(name, path, args.runs))
    text = report(rows, args.runs)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
