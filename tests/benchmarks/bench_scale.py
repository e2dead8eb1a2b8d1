"""Scale benchmark (issue 13): big graphs from 1k to 50k ATen nodes through every stage, with
``torch.export.load`` and the pnnx CLI on the same models measured in the same run as anchors.
Not part of the test run::

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_scale.py [--sizes 1000,10000] [--kinds llama]
        [--max-nodes 20000] [--no-studio] [--no-pnnx] [--no-verify] [--runs 3]

Models come from :mod:`big_graphs` (exported once with ``torch.export`` in the running
interpreter, traced with ``torch.jit.trace`` for pnnx, cached in ``/tmp/pt2ncnn-bench-scale``).
Every measurement runs in a fresh child process; times are CPU seconds (user + system) unless
marked wall:

* **open** — ``engine.load`` of the package; **build** — ``build_graph`` (median of ``--runs``);
* **convert** — the whole ``pt2ncnn convert m.pt2 -o DIR`` process (the console script's code
  path, bytecode cached, ``DIR`` emptied before each run), median of ``--runs``; per node: that divided by the ATen node count;
* **passes** — ``engine.convert`` in process without snapshots (build + passes); **write** —
  ``ConversionResult.write_all`` (ncnn and pnnx files);
* **Studio** (wall, offscreen 1600×1000 main window): *first paint* — ``open_file`` until the ATen
  graph is laid out and drawn; *pnnx painted* — until the converted pnnx graph is drawn on the
  right (open + convert + both graphs); *convert→paint* — from the conversion task's start to
  that; *expand all* — the ATen graph's Groups ▸ Expand all until the next frame;
* anchors: ``torch.export.load`` of the same ``.pt2`` (CPU, in process), and the pnnx CLI on
  the TorchScript trace (``pnnx m.pt inputshape=[...]``, whole process CPU, stopped after
  ``--pnnx-cpu`` CPU seconds; not run above ``--pnnx-max-nodes``: its time grows faster than
  the graph);
* **verify** — the whole ``pt2ncnn verify m.pt2 --json`` process (wall, CPU and peak memory of
  that process, how many layers were compared and re-run alone, the verdict), up to
  ``--verify-max-nodes``.

Writes ``results/scale.md`` and ``scale.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

import big_graphs  # noqa: E402

SIZES = (1000, 2000, 5000, 10000, 20000, 50000)
KIND_SIZES = {"llama": SIZES, "detection": (1000, 5000, 10000)}
PNNX = Path("/work/benchvenv/bin/pnnx")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package runs from cached bytecode
    env["QT_QPA_PLATFORM"] = "offscreen"
    return env


def _child(step: str, args: dict, timeout: float = 1800) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", step, json.dumps(args)], capture_output=True,
                       text=True, env=_env(), cwd=ROOT, timeout=timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"error": f"{step}: exit {r.returncode}: {r.stderr.strip()[-600:]}"}
    return json.loads(lines[-1])


def _process_cpu(cmd: list[str], timeout: float, *, cpu_limit: float | None = None, **kw) -> float | None:
    """CPU seconds (user + system) of a whole child process, None on timeout, failure or
    reaching ``cpu_limit`` CPU seconds (a limit in CPU time holds whatever the machine's load)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_limit), int(cpu_limit) + 5))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=limit if cpu_limit else None, **kw)
    except subprocess.TimeoutExpired:
        return None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        print(f"  {' '.join(map(str, cmd[:3]))}…: exit {r.returncode}: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# ------------------------------------------------------------------------------- children
def child_engine(a: dict) -> dict:
    """open, build, in-process convert and write (median CPU of ``runs``)."""
    import gc
    import logging

    logging.disable(logging.WARNING)
    import engine
    from engine.build import build_graph
    from engine.convert import ConvertOptions, convert

    path, runs = a["path"], a["runs"]
    gc.disable()  # as the CLI runs (collected between runs)
    out: dict = {}
    opened, built, converted, written = [], [], [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(runs):
            gc.collect()
            t = time.process_time()
            pkg = engine.load(path)
            opened.append(time.process_time() - t)
            t = time.process_time()
            build_graph(pkg.model)
            built.append(time.process_time() - t)
            t = time.process_time()
            result = convert(pkg.model, ConvertOptions(snapshots=False, keep_aten=False))
            converted.append(time.process_time() - t)
            t = time.process_time()
            result.write_all(d, "m")
            written.append(time.process_time() - t)
            out["nodes"] = sum(1 for n in pkg.model.nodes)
            out["layers"] = result.layer_count
            out["ok"] = result.ok
            del result, pkg
    out.update(open=statistics.median(opened), build=statistics.median(built),
               passes=statistics.median(converted), write=statistics.median(written))
    return out


#: ``pt2ncnn verify PATH --json`` as the console script runs it, then the process's own peak
#: resident set (``VmHWM``: the rusage of a child started from this big process would count this
#: process's memory at the fork)
_VERIFY = """
import os, sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from engine.cli.main import main
rc = main(["verify", sys.argv[1], "--json"], exiting=True)
sys.stdout.flush()
with open("/proc/self/status") as f:
    print("VmHWM", next(ln.split()[1] for ln in f if ln.startswith("VmHWM:")), file=sys.stderr, flush=True)
os._exit(rc)
"""


def verify_cli(path: Path, timeout: float) -> dict:
    """The whole ``pt2ncnn verify m.pt2 --json`` process (fp16 weights, the package's sample
    inputs, every layer compared and re-run alone): wall and CPU seconds of that process alone
    (``os.wait4``), its peak memory, how many layers were compared and the verdict."""
    import threading

    cmd = [sys.executable, "-c", _VERIFY, str(path)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=_env(), cwd=ROOT)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode(errors="replace")
    try:
        report = json.loads(stdout)
    except ValueError:
        return {"verify_error": f"exit {proc.returncode}: {stderr.strip()[-300:]}"}
    layers = report.get("layers", [])
    hwm = [int(ln.split()[1]) for ln in stderr.splitlines() if ln.startswith("VmHWM ")]
    return {"verify_wall": wall, "verify_cpu": usage.ru_utime + usage.ru_stime,
            "verify_rss_mb": hwm[-1] / 1024 if hwm else None,
            "verify_layers": len(layers),
            "verify_compared": sum(1 for x in layers if x.get("max_abs") is not None),
            "verify_alone": sum(1 for x in layers if x.get("own_max_abs") is not None),
            "verify_ok": bool(report.get("ok")), "verify_exit": proc.returncode}


def child_torch_load(a: dict) -> dict:
    import torch

    torch.export.load(a["path"])  # warm: torch's lazy imports
    times = []
    for _ in range(a["runs"]):
        t = time.process_time()
        torch.export.load(a["path"])
        times.append(time.process_time() - t)
    return {"torch_load": statistics.median(times)}


#: a wait between two ticks of the Studio step's 10 ms timer longer than this counts as a stall (seconds)
STALL = 0.05


def child_studio(a: dict) -> dict:
    """Open + convert in a real main window; first paints and expand all (wall)."""
    from PySide6.QtCore import QEventLoop, QTimer

    from studio_window import Ticker, studio_window, temp_settings_dir

    with temp_settings_dir() as d:
        _app, w = studio_window(d)
        marks: dict[str, float] = {}
        loop = QEventLoop()

        def painted(key: str, panel) -> None:
            if key in marks or panel.graph is None:
                return
            panel.view.viewport().repaint()
            marks[key] = time.perf_counter()
            marks[key + "_cpu"] = time.process_time() - c0
            if {"aten", "pnnx"} <= set(marks):
                loop.quit()

        tasks: list[list] = []

        def started(task) -> None:
            if task.name == "Conversion" and "convert_start" not in marks:
                marks["convert_start"] = time.perf_counter()

        w.runner.taskStarted.connect(started)
        w.runner.taskFinished.connect(lambda t: tasks.append([t.name, round(t.ended_at - t.started_at, 3),
                                                              round(t.started_at - t0, 3)]))
        w.aten_panel.layoutReady.connect(lambda: painted("aten", w.aten_panel))
        w.right_panel.layoutReady.connect(
            lambda: painted("pnnx", w.right_panel) if w.right_panel.graph.vocabulary == "pnnx" else None)
        timer = QTimer()
        timer.setSingleShot(True)
        timer.timeout.connect(loop.quit)
        timer.start(int(a.get("timeout", 900) * 1000))
        ticker = Ticker()  # how still the window stands meanwhile, until everything settled
        t0 = ticker.start()
        c0 = time.process_time()
        w.open_file(a["path"])
        loop.exec()
        cpu = time.process_time() - c0
        if not {"aten", "pnnx"} <= set(marks):
            return {"error": f"studio: not painted in time ({sorted(marks)})"}
        w.wait_settled(600_000)
        gaps = ticker.gaps(t0)
        ticker.stop()
        out = {"stall_max": max(gaps), "stall_total": sum(g for g in gaps if g > STALL),
               "first_paint": marks["aten"] - t0, "pnnx_painted": marks["pnnx"] - t0,
               "convert_to_paint": marks["pnnx"] - marks.get("convert_start", t0), "studio_cpu": cpu,
               "first_paint_cpu": marks["aten_cpu"], "pnnx_painted_cpu": marks["pnnx_cpu"], "tasks": tasks}
        # expand all on the ATen graph
        loop2 = QEventLoop()
        w.aten_panel.layoutReady.connect(loop2.quit)
        t1, c1 = time.perf_counter(), time.process_time()
        w.aten_panel.expand_all()
        loop2.exec()
        w.aten_panel.view.viewport().repaint()
        out["expand_all"] = time.perf_counter() - t1
        out["expand_all_cpu"] = time.process_time() - c1
        out["expanded_nodes"] = len(w.aten_panel.scene.layout.nodes)
        w.runner.shutdown()
    return out


# ------------------------------------------------------------------------------- parent
def measure(kind: str, size: int, args) -> dict:
    path = big_graphs.export_model(kind, size, trace=not args.no_pnnx and size <= args.pnnx_max_nodes)
    row: dict = {"kind": kind, "target": size, "mb": round(path.stat().st_size / 2**20, 1)}
    row.update(_child("engine", {"path": str(path), "runs": args.runs}))
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out"
        cli = [sys.executable, "-m", "engine.cli.main", "convert", str(path), "-o", str(out), "-q"]
        times = []
        for k in range(args.runs + 1):  # the first run warms (bytecode, page cache)
            # into an empty folder: freeing the last run's files costs the process that frees
            # them system time (up to seconds for hundreds of MB), here the harness
            shutil.rmtree(out, ignore_errors=True)
            t = _process_cpu(cli, 1800, env=_env(), cwd=ROOT)
            if k:
                times.append(t)
    if all(t is not None for t in times):
        row["convert_cli"] = statistics.median(times)
        row["us_per_node"] = row["convert_cli"] / row["nodes"] * 1e6 if row.get("nodes") else None
    row.update(_child("torch_load", {"path": str(path), "runs": max(1, args.runs // 2 + 1)}))
    if not args.no_pnnx and PNNX.exists() and row.get("nodes", 0) <= args.pnnx_max_nodes:
        shape = ",".join(map(str, big_graphs.INPUTS[kind]))
        with tempfile.TemporaryDirectory() as d:
            pt = Path(d) / "m.pt"
            pt.symlink_to(path.with_suffix(".pt"))
            t = _process_cpu([str(PNNX), str(pt), f"inputshape=[{shape}]"], args.pnnx_cpu * 50,
                             cpu_limit=args.pnnx_cpu, cwd=d)
        row["pnnx_cli"] = t if t is not None else f"> {args.pnnx_cpu:.0f} s"
    if not args.no_studio:
        row.update(_child("studio", {"path": str(path), "timeout": 900}))
    if not args.no_verify and row.get("nodes", 0) <= args.verify_max_nodes:
        row.update(verify_cli(path, 3600))
    row["load"] = os.getloadavg()[0]
    return row


def _f(v, unit: str = " s", digits: int = 2) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    return f"{v:.{digits}f}{unit}"


def write_report(rows: list[dict]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(rows, indent=1) + "\n")
    ok = [r for r in rows if "nodes" in r]
    loads = [r.get("load", 0) for r in rows]
    lines = [
        "# Scale: 1k–50k-node graphs through every stage", "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} by `tests/benchmarks/bench_scale.py` on {platform.machine()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}; models from `big_graphs.py` exported with "
        "torch in the same interpreter (llama: decoder-only LLM layers; detection: a YOLO-style DAG). "
        f"Load average during the run {min(loads, default=0):.1f}–{max(loads, default=0):.1f} (other jobs share "
        "the 2 CPUs: CPU times hold, wall times stretch).", "",
        "## Engine (CPU seconds, user + system)", "",
        "| model | ATen nodes | .pt2 | open | build | **convert: whole `pt2ncnn convert` process** | per node | "
        "in-process passes | write (ncnn + pnnx) | `torch.export.load` | pnnx CLI (TorchScript) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r not in ok:
            lines.append(f"| {r['kind']} {r['target']:,} | {r.get('error', '')[:100]} |")
            continue
        lines.append(
            f"| {r['kind']} {r['target'] // 1000}k | {r['nodes']:,} | {r['mb']:.0f} MB | {_f(r.get('open'))} | "
            f"{_f(r.get('build'))} | **{_f(r.get('convert_cli'))}** | {_f(r.get('us_per_node'), ' µs', 0)} | "
            f"{_f(r.get('passes'))} | {_f(r.get('write'))} | {_f(r.get('torch_load'))} | "
            f"{_f(r.get('pnnx_cli')) if 'pnnx_cli' in r else 'not run'} |")
    lines += [
        "", "*open*: `engine.load`; *build*: `build_graph`; *convert*: the console script's whole process "
        "(interpreter start, imports, read, build, all passes, write both models into an empty folder), median of "
        "the runs; *per node*: "
        "that over the ATen node count; *in-process passes*: `engine.convert` without snapshots (build + passes); "
        "*write*: both models' files. pnnx converts `torch.jit.trace` of the same module; above the node limit it "
        "is not run (its time grows faster than the graph).", "",
        "## Studio (offscreen 1600×1000 main window; wall seconds, process CPU in brackets)", "",
        "| model | ATen nodes | first paint (ATen graph) | pnnx graph painted (open + convert) | convert → paint | "
        "expand all (ATen graph) | GUI stalls: longest / total | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ok:
        if "first_paint" not in r:
            continue
        lines.append(
            f"| {r['kind']} {r['target'] // 1000}k | {r['nodes']:,} | {_f(r['first_paint'])} ({_f(r.get('first_paint_cpu'))}) | "
            f"{_f(r['pnnx_painted'])} ({_f(r.get('pnnx_painted_cpu'))}) | {_f(r['convert_to_paint'])} | "
            f"{_f(r['expand_all'])} ({_f(r.get('expand_all_cpu'))}) | "
            f"{_f(r.get('stall_max'))} / {_f(r.get('stall_total'))} | {r.get('load', 0):.1f} |")
    lines += [
        "", "*first paint*: `open_file` until the ATen graph is laid out and drawn; *pnnx graph painted*: until the "
        "converted pnnx graph is drawn on the right (it is streamed from the conversion as soon as it exists, "
        "before the lowering to ncnn); *convert → paint*: from the conversion task's start; *expand all*: Groups ▸ "
        "Expand all on the ATen graph until the next frame; *GUI stalls*: from `open_file` until the window settled "
        "(conversion to ncnn and final layouts done), the longest wait between two ticks of a 10 ms timer, and the "
        f"total of the waits over {STALL * 1000:.0f} ms. The process's CPU time is the work done (one core's "
        "worth: the GUI thread and the workers share the interpreter lock); at a load above the 2 CPUs the wall "
        "time is stretched by the other jobs.", "",
    ]
    verified = [r for r in ok if "verify_wall" in r or "verify_error" in r]
    if verified:
        lines += [
            "## Verify (`pt2ncnn verify m.pt2 --json`, whole process)", "",
            "| model | ncnn layers | compared | re-run alone | verdict | wall | CPU | peak memory | "
            "`torch.export.load` | verify / anchor (CPU) |",
            "|---|---:|---:|---:|:---:|---:|---:|---:|---:|---:|",
        ]
        for r in verified:
            if "verify_error" in r:
                lines.append(f"| {r['kind']} {r['target'] // 1000}k | {r['verify_error'][:100]} |")
                continue
            ratio = r["verify_cpu"] / r["torch_load"] if r.get("torch_load") else None
            verdict = "✅ no divergent layer" if r["verify_ok"] else f"exit {r['verify_exit']}"
            lines.append(
                f"| {r['kind']} {r['target'] // 1000}k | {r['verify_layers']:,} | {r['verify_compared']:,} | "
                f"{r['verify_alone']:,} | {verdict} | {_f(r['verify_wall'])} | {_f(r['verify_cpu'])} | "
                f"{_f(r.get('verify_rss_mb'), ' MB', 0)} | {_f(r.get('torch_load'))} | {_f(ratio, '', 2)} |")
        lines += [
            "", "*compared*: layers whose output was compared with PyTorch's intermediate value; *re-run alone*: "
            "of those, layers also run by themselves on PyTorch's inputs (the per-layer \"alone\" error that tells "
            "a wrong layer from drift); fp16 weights, the package's sample inputs. *peak memory*: the verify "
            "process's largest resident set (PyTorch's program and ncnn's model side by side). The anchor is `torch.export.load` of the same package, from the table above.", "",
        ]
    (RESULTS / "scale.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="llama,detection")
    ap.add_argument("--sizes", default="", help="comma-separated node targets (default: per kind)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-studio", action="store_true")
    ap.add_argument("--no-pnnx", action="store_true")
    ap.add_argument("--pnnx-cpu", type=float, default=300, help="CPU seconds the pnnx CLI may take per model")
    ap.add_argument("--pnnx-max-nodes", type=int, default=12000, help="run the pnnx CLI up to this many nodes")
    ap.add_argument("--max-nodes", type=int, help="only the sizes up to this many nodes")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--verify-max-nodes", type=int, default=25000, help="run pt2ncnn verify up to this many nodes")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        step, a = args.child[0], json.loads(args.child[1])
        print(json.dumps({"engine": child_engine, "torch_load": child_torch_load, "studio": child_studio}[step](a)))
        return 0
    rows = []
    for kind in args.kinds.split(","):
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else KIND_SIZES[kind]
        sizes = [n for n in sizes if args.max_nodes is None or n <= args.max_nodes]
        for size in sizes:
            row = measure(kind, size, args)
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
