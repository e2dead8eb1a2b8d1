"""Studio on big graphs after they are open (issue 13): what a user does next — select a node
deep in a collapsed graph, switch the right view, step through pass snapshots, search, read a
weight, expand everything — timed in a real main window. Not part of the test run::

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_studio_interactions.py [llama:10000 detection:10000]

Models come from :mod:`big_graphs` (cached in ``/tmp/pt2ncnn-bench-scale``). Each model runs in a
fresh child process (offscreen, 1600×1000, fresh settings, OpenBLAS single-threaded as
``pt2ncnn-studio`` runs). Each step is timed from the call that a click or key makes until
nothing runs anymore and both graphs are drawn again: *wall* and the process's *CPU* seconds,
and the *longest freeze* — the longest wait between two ticks of a 10 ms timer in the GUI thread
(the window answers input again after that long). The same run measures ``torch.export.load``
of the same package as the anchor.

Writes ``results/studio_interactions.md`` and ``.json``.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

MODELS = ("llama:10000", "detection:10000")


def child(path: str) -> list[dict]:
    """Open the model, then every step in turn (the steps build on each other, as a user's do)."""
    from studio_window import Ticker, studio_window, temp_settings_dir

    with temp_settings_dir() as d:
        _app, w = studio_window(d)
        from PySide6.QtCore import QCoreApplication

        from gui.sync import ATEN

        ticker = Ticker()
        panels = (w.aten_panel, w.right_panel)
        rows: list[dict] = []

        def settled() -> None:
            while True:
                w.wait_settled(600_000)
                QCoreApplication.processEvents()
                if not w.runner.busy and not any(p.busy for p in panels):
                    return
                time.sleep(0.005)

        def step(label: str, fn) -> None:
            t0 = ticker.start()
            c0 = time.process_time()
            fn()
            settled()
            for p in panels:
                p.view.viewport().repaint()
            t1 = time.perf_counter()
            rows.append({"step": label, "wall": t1 - t0, "cpu": time.process_time() - c0,
                         "freeze": max(ticker.gaps(t0, t1))})
            ticker.stop()

        step("open + convert, until everything is drawn", lambda: w.open_file(path))
        if w.doc is None or w.doc.conversion is None:
            raise SystemExit(f"{path}: did not open and convert")
        ops = [n.name for n in w.aten_panel.full_graph.nodes if n.kind == "op"]
        records = len(w.doc.conversion.result.records)
        step("select an ATen node halfway down (collapsed)", lambda: w.sync.select(ATEN, [ops[len(ops) // 2]]))
        step("select an ATen node near the end", lambda: w.sync.select(ATEN, [ops[-5]]))
        step("right view: ncnn graph", lambda: w.show_right("ncnn"))
        step("right view: pnnx graph", lambda: w.show_right("pnnx"))
        step("pass snapshot: the last pass", lambda: w.passes.select_pass(records - 1))
        step("pass snapshot: the middle pass", lambda: w.passes.select_pass(records // 2))
        step("pass snapshot: the first pass", lambda: w.passes.select_pass(0))
        step("right view: pnnx graph again", lambda: w.show_right("pnnx"))

        query = ops[len(ops) // 2].rstrip("0123456789_")  # the op of the node halfway down: many hits

        def search() -> None:
            w.find()
            w.search.edit.setText(query)
            w.search.run()
        step("search an op name in both graphs", search)
        step("search: next hit", w.search.next)
        w.tensors.ensure_listed()
        weight = next(r.name for r in w.tensors.model.rows if r.stored and r.kind in ("parameter", "buffer"))
        step("Tensors: select a weight (read and plotted)", lambda: w.tensors.select_name(weight))
        step("pnnx graph: expand all", w.right_panel.expand_all)
        step("pnnx graph: collapse all", w.right_panel.collapse_all)
        step("ATen graph: expand all", w.aten_panel.expand_all)
        step("select an ATen node halfway down (expanded)", lambda: w.sync.select(ATEN, [ops[len(ops) // 2]]))
        w.runner.shutdown()
        return rows


def measure(spec: str) -> dict:
    import big_graphs
    from bench_scale import _child, _env

    kind, _, target = spec.partition(":")
    path = big_graphs.export_model(kind, int(target))
    r = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True, text=True,
                       env=_env(), cwd=ROOT, timeout=3600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[")]
    out = {"model": f"{kind} {int(target) // 1000}k", "path": str(path)}
    if r.returncode != 0 or not lines:
        out["error"] = f"exit {r.returncode}: {r.stderr.strip()[-600:]}"
    else:
        out["steps"] = json.loads(lines[-1])
    out.update(_child("torch_load", {"path": str(path), "runs": 1}))
    return out


def write_report(models: list[dict]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "studio_interactions.json").write_text(json.dumps(models, indent=1) + "\n")
    ok = [m for m in models if "steps" in m]
    head = "| step | " + " | ".join(f"{m['model']}: wall (CPU) | longest freeze" for m in ok) + " |"
    lines = [
        "# Studio on big graphs: what a user does after opening", "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} by `tests/benchmarks/bench_studio_interactions.py` on "
        f"{platform.machine()} ({os.cpu_count()} CPUs), Python {platform.python_version()}, offscreen 1600×1000 "
        f"main window; load average at the end {os.getloadavg()[0]:.1f}. Seconds from the call a click or key "
        "makes until nothing runs and both graphs are drawn again; *longest freeze*: the longest the GUI "
        "thread did not answer (10 ms timer).", "",
        "Anchor, same run: `torch.export.load` of the same package (CPU) — "
        + ", ".join(f"{m['model']} {m['torch_load']:.2f} s" for m in ok if "torch_load" in m) + ".", "",
        head, "|---|" + "---:|---:|" * len(ok),
    ]
    for i, s in enumerate(ok[0]["steps"] if ok else []):
        cells = []
        for m in ok:
            r = m["steps"][i]
            cells.append(f"{r['wall']:.2f} s ({r['cpu']:.2f} s) | {r['freeze']:.2f} s")
        lines.append(f"| {s['step']} | " + " | ".join(cells) + " |")
    for m in models:
        if "error" in m:
            lines += ["", f"{m['model']}: {m['error']}"]
    (RESULTS / "studio_interactions.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1])), flush=True)
        os._exit(0)  # the window's heap is not torn down object by object
    models = []
    for spec in argv or MODELS:
        models.append(measure(spec))
        print(json.dumps(models[-1]), flush=True)
        write_report(models)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
