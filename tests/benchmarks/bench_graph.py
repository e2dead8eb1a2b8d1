"""Graph view benchmark (issue 7): how the Studio's graph view copes with 1k–20k-node graphs,
with Graphviz ``dot`` laying out the same graphs as the speed / quality anchor.

Run it (not collected by pytest; ``dot`` comes from Debian's ``graphviz`` package)::

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/benchmarks/bench_graph.py [--quick] [--no-dot]

Graphs: *synthetic* ATen-like graphs with a module hierarchy (:mod:`gui.graph.synthetic`) and
*real* ones — a stacked ``nn.TransformerEncoder`` exported with torch at 1k, 5k, 10k and 20k
graph nodes, and DenseNet-121 (≈1.2k nodes whose dense concatenations cross many module boxes),
cached under ``/tmp/pt2ncnn-bench-graph``. Each graph is measured in a fresh
process, in a real :class:`~gui.graph.panel.GraphPanel` (worker thread layout, offscreen
window of 1400×900):

* **first paint (collapsed)** — from handing the panel the display graph to the first frame
  drawn, with the default expansion (what a user sees when the file opens);
* **expand all** — from the Expand-all action to the next frame drawn;
* **frame time** — a sequence of viewport changes (pans at zooms from 2 % to 150 %) each
  rendered to a QImage with ``QGraphicsView.render``, in the collapsed and expanded states
  (median / 95th percentile / worst);
* **peak memory** — the process's peak RSS above what it had after its imports.

``dot`` gets the fully expanded graph with the same node sizes (``-Tplain``), once flat and once
with one cluster per module group, each with a time limit. For both layouts the same code
counts edge crossings (segments of the routes as polylines, tested pairwise on a grid) and sums
edge lengths, and the layout's area is reported. Results go to ``results/graph.md``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
MODELS = Path("/tmp/pt2ncnn-bench-graph")
SIZES = (1000, 5000, 10000, 20000)
#: encoder layers of the real transformer for each target size (≈47 graph nodes a layer)
LAYERS = {1000: 21, 5000: 106, 10000: 212, 20000: 425}
DOT_TIMEOUT = 240.0


# --------------------------------------------------------------------------- models
def real_model(target: int) -> Path:
    """The exported stacked transformer of about ``target`` graph nodes (made once)."""
    MODELS.mkdir(parents=True, exist_ok=True)
    path = MODELS / f"transformer_{target}.pt2"
    if path.exists():
        return path
    import torch
    from torch import nn

    class Stack(nn.Module):
        def __init__(self, n: int, d: int = 64) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.embed = nn.Linear(32, d)
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True, dropout=0.0)
            self.encoder = nn.TransformerEncoder(layer, n, enable_nested_tensor=False)
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            return self.head(self.encoder(self.embed(x)))

    with torch.no_grad():
        ep = torch.export.export(Stack(LAYERS[target]).eval(), (torch.randn(1, 16, 32),))
    torch.export.save(ep, str(path))
    return path


def densenet_model() -> Path:
    """DenseNet-121 as the GUI tests build it (dense concatenations: many edges across boxes)."""
    MODELS.mkdir(parents=True, exist_ok=True)
    path = MODELS / "densenet121.pt2"
    if not path.exists():
        import torch

        sys.path.insert(0, str(ROOT / "tests" / "gui"))
        import studio_models

        studio_models.export(studio_models.DenseNet121(), (torch.randn(1, 3, 224, 224),), path)
    return path


def display_for(kind: str, target: int):
    from gui.graph.model import display_graph

    if kind == "densenet":
        import engine
        from engine.build import build_graph

        pkg = engine.load(str(densenet_model()))
        return display_graph(build_graph(pkg.models[pkg.model_names[0]]), "aten")
    if kind == "synthetic":
        from gui.graph.synthetic import synthetic_graph

        return display_graph(synthetic_graph(target), "aten")
    import engine
    from engine.build import build_graph

    pkg = engine.load(str(real_model(target)))
    return display_graph(build_graph(pkg.models[pkg.model_names[0]]), "aten")


# --------------------------------------------------------------------------- quality
def polyline_metrics(routes: list[list[tuple[float, float]]]) -> tuple[int, float]:
    """(crossings, total length) of edge routes taken as polylines. Two segments cross when
    they properly intersect; segments sharing an end point (same node port) do not count."""
    import numpy as np

    segs = []
    owner = []
    length = 0.0
    for k, pts in enumerate(routes):
        for a, b in zip(pts, pts[1:]):
            if a == b:
                continue
            segs.append((a[0], a[1], b[0], b[1]))
            owner.append(k)
            length += math.hypot(b[0] - a[0], b[1] - a[1])
    if not segs:
        return 0, length
    s = np.asarray(segs)
    own = np.asarray(owner)
    cell = max(200.0, float(np.median(np.abs(s[:, 3] - s[:, 1]) + np.abs(s[:, 2] - s[:, 0]))) * 2)
    x0 = np.minimum(s[:, 0], s[:, 2]) // cell
    x1 = np.maximum(s[:, 0], s[:, 2]) // cell
    y0 = np.minimum(s[:, 1], s[:, 3]) // cell
    y1 = np.maximum(s[:, 1], s[:, 3]) // cell
    buckets: dict[tuple[int, int], list[int]] = {}
    for i in range(len(s)):
        if (x1[i] - x0[i] + 1) * (y1[i] - y0[i] + 1) > 400:  # a very long segment: coarse cells
            cx = range(int(x0[i]), int(x1[i]) + 1, max(1, int((x1[i] - x0[i]) // 20)))
            cy = range(int(y0[i]), int(y1[i]) + 1, max(1, int((y1[i] - y0[i]) // 20)))
        else:
            cx = range(int(x0[i]), int(x1[i]) + 1)
            cy = range(int(y0[i]), int(y1[i]) + 1)
        for gx in cx:
            for gy in cy:
                buckets.setdefault((gx, gy), []).append(i)
    pairs: set[tuple[int, int]] = set()
    for members in buckets.values():
        if len(members) < 2:
            continue
        m = np.asarray(members)
        a = s[m]
        ax, ay, bx, by = a[:, 0:1], a[:, 1:2], a[:, 2:3], a[:, 3:4]
        cx_, cy_, dx, dy = a[:, 0], a[:, 1], a[:, 2], a[:, 3]

        def orient(px, py, qx, qy, rx, ry):
            return (qx - px) * (ry - py) - (qy - py) * (rx - px)

        o1 = orient(ax, ay, bx, by, cx_, cy_)
        o2 = orient(ax, ay, bx, by, dx, dy)
        o3 = orient(cx_[:, None].T, cy_[:, None].T, dx[:, None].T, dy[:, None].T, ax, ay)
        o4 = orient(cx_[:, None].T, cy_[:, None].T, dx[:, None].T, dy[:, None].T, bx, by)
        hit = (o1 * o2 < -1e-9) & (o3 * o4 < -1e-9)
        ii, jj = np.nonzero(np.triu(hit, 1))
        for i, j in zip(m[ii].tolist(), m[jj].tolist()):
            if own[i] != own[j]:
                pairs.add((i, j))
    return len(pairs), length


# --------------------------------------------------------------------------- dot
def dot_layout(graph, sizes, tree, clusters: bool, timeout: float) -> dict:
    """Lay the fully expanded graph out with ``dot``; its time, crossings, edge length, area."""
    lines = ["digraph G {", "  graph [rankdir=TB, nodesep=0.3, ranksep=0.47];", "  node [shape=box, fixedsize=true];"]
    decl = [f'  n{i} [width={w / 72:.3f}, height={h / 72:.3f}, label=""];' for i, (w, h) in enumerate(sizes)]
    if clusters and tree is not None and len(tree.groups) > 1:
        def emit(gid: int, indent: str) -> None:
            g = tree.groups[gid]
            if gid:
                lines.append(f"{indent}subgraph cluster_{gid} {{")
            for i in g.members:
                lines.append(indent + decl[i].strip())
            for c in g.children:
                emit(c, indent + "  ")
            if gid:
                lines.append(f"{indent}}}")

        emit(0, "  ")
    else:
        lines.extend(decl)
    for e in graph.edges:
        if e.src != e.dst:
            lines.append(f"  n{e.src} -> n{e.dst};")
    lines.append("}")
    src = "\n".join(lines)
    t0 = time.perf_counter()
    try:
        r = subprocess.run(["dot", "-Tplain"], input=src, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "timeout": timeout}
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        return {"seconds": dt, "error": r.stderr.strip()[-200:]}
    routes: list[list[tuple[float, float]]] = []
    width = height = 0.0
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts[0] == "graph":
            width, height = float(parts[2]) * 72, float(parts[3]) * 72
        elif parts[0] == "edge":
            n = int(parts[3])
            pts = [(float(parts[4 + 2 * k]) * 72, -float(parts[5 + 2 * k]) * 72) for k in range(n)]
            routes.append(pts)
    crossings, length = polyline_metrics(routes)
    return {"seconds": dt, "crossings": crossings, "length": length, "area": width * height,
            "width": width, "height": height, "edges": len(routes)}


# --------------------------------------------------------------------------- one graph, one process
def measure_one(kind: str, target: int, with_dot: bool) -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(ROOT))
    import gui  # noqa: F401  (the binding work-around first)
    from PySide6.QtCore import QEventLoop, QRectF, QTimer
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtWidgets import QApplication

    from gui import theme
    from gui.graph.panel import GraphPanel
    from gui.workers import TaskRunner

    app = QApplication.instance() or QApplication([])
    graph = display_for(kind, target)
    base_rss = _rss_mb()
    runner = TaskRunner()
    panel = GraphPanel("bench", runner, theme.graph_theme(), key="bench")
    panel.resize(1400, 900)
    panel.show()
    app.processEvents()
    view = panel.view

    def wait_ready(start) -> tuple[float, float]:
        c0 = time.process_time()
        loop = QEventLoop()
        panel.layoutReady.connect(loop.quit)
        t = QTimer()
        t.setSingleShot(True)
        t.timeout.connect(loop.quit)
        t.start(600_000)
        start()
        loop.exec()
        panel.layoutReady.disconnect(loop.quit)
        view.viewport().repaint()  # the first frame
        app.processEvents()
        return time.perf_counter(), time.process_time() - c0

    t0 = time.perf_counter()
    t1, first_cpu = wait_ready(lambda: panel.show_graph(graph))
    first_paint = t1 - t0
    collapsed_visible = len(panel.scene.layout.nodes) + len(panel.scene.layout.boxes)
    frames_collapsed = frame_times(view, app, QImage, QPainter, QRectF)
    t0 = time.perf_counter()
    t1, expand_cpu = wait_ready(panel.expand_all)
    expand_all = t1 - t0
    p = panel.scene.layout
    frames_expanded = frame_times(view, app, QImage, QPainter, QRectF)
    ours_cross, ours_len = polyline_metrics([r for *_x, r in p.edges])
    out = {
        "kind": kind, "target": target, "nodes": len(graph.nodes), "edges": len(graph.edges),
        "groups": len(panel.tree.groups) - 1, "depth": panel.tree.max_depth,
        "collapsed_visible": collapsed_visible,
        "first_paint": first_paint, "first_paint_cpu": first_cpu, "expand_all_cpu": expand_cpu,
        "load": os.getloadavg()[0],
        "expand_all": expand_all, "layout_seconds": p.seconds,
        "frames_collapsed": frames_collapsed, "frames_expanded": frames_expanded,
        "peak_rss_mb": _peak_mb() - base_rss,
        "ours": {"crossings": ours_cross, "length": ours_len, "area": p.width * p.height, "width": p.width,
                 "height": p.height, "edges": len(p.edges)},
    }
    if with_dot:
        sizes = panel._sizes
        out["dot_flat"] = dot_layout(panel.graph, sizes, None, False, DOT_TIMEOUT)
        out["dot_clusters"] = dot_layout(panel.graph, sizes, panel.tree, True, DOT_TIMEOUT)
    runner.shutdown()
    return out


def frame_times(view, app, QImage, QPainter, QRectF) -> dict:
    """Render a sequence of viewport changes (a pan across the graph at each zoom) to a QImage;
    milliseconds per frame by zoom band."""
    scene = view.graph_scene
    rect = scene.sceneRect()
    vp = view.viewport().rect()
    img = QImage(vp.width(), vp.height(), QImage.Format.Format_ARGB32_Premultiplied)
    out: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for zoom in (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.5):
        view.set_zoom(zoom)
        app.processEvents()
        times = []
        for k in range(12):  # a diagonal pan through the graph, then back up
            f = (k if k < 6 else 11 - k) / 5
            view.centerOn(rect.left() + rect.width() * (0.3 + 0.4 * f), rect.top() + rect.height() * f)
            img.fill(0)
            t0, c0 = time.perf_counter(), time.thread_time()
            painter = QPainter(img)
            view.render(painter, QRectF(img.rect()), vp)
            painter.end()
            times.append((time.perf_counter() - t0) * 1000)
            cpu.setdefault(f"{zoom:g}", []).append((time.thread_time() - c0) * 1000)
        out[f"{zoom:g}"] = times
    out["cpu"] = cpu  # type: ignore[assignment]
    return out


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------- report
def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def frame_summary(frames: dict, cpu: bool = False) -> tuple[float, float, float, str]:
    frames = frames["cpu"] if cpu else {z: ts for z, ts in frames.items() if z != "cpu"}
    every = [t for ts in frames.values() for t in ts]
    worst_zoom = max(frames, key=lambda z: max(frames[z]))
    return _pct(every, 0.5), _pct(every, 0.95), max(every), worst_zoom


def _s(x) -> str:
    return "—" if x is None else f"{x:.2f} s"


def _name(r: dict) -> str:
    return "DenseNet-121" if r["kind"] == "densenet" else f"{r['kind']} {r['target'] // 1000}k"


def _dot_version() -> str:
    try:
        r = subprocess.run(["dot", "-V"], capture_output=True, text=True, timeout=10)
    except OSError:
        return "(not installed)"
    return (r.stderr or r.stdout).strip().replace("dot - graphviz version ", "")


def write_report(rows: list[dict], path: Path) -> None:
    load = os.getloadavg()[0]
    lines = [
        "# Graph view benchmark: module groups, hierarchical layout, level of detail",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} by `tests/benchmarks/bench_graph.py` on {platform.machine()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}, load average at the end {load:.1f}. "
        "Each graph in a fresh process; a real `GraphPanel` (layout in its worker thread) in an offscreen "
        "1400×900 window. *nodes* counts the drawn graph (operators, inputs, outputs, parameters).",
        "",
        "Targets (issue 7): 10k nodes — first paint ≤ 1.5 s collapsed, ≤ 5 s fully expanded; pan/zoom frame "
        "≤ 16 ms at any zoom; 20k nodes usable (first paint ≤ 3 s).",
        "",
        "## Against the targets",
        "",
    ]
    for r in rows:
        if r["target"] < 10000 or r["kind"] == "densenet":
            continue
        e, c = frame_summary(r["frames_expanded"]), frame_summary(r["frames_collapsed"])
        ecpu, ccpu = frame_summary(r["frames_expanded"], cpu=True), frame_summary(r["frames_collapsed"], cpu=True)
        fp_target = 1.5 if r["target"] == 10000 else 3.0
        lines.append(
            f"* {_name(r)} ({r['nodes']:,} nodes): first paint {r['first_paint']:.2f} s "
            f"(target ≤ {fp_target:g} s), expand all {r['expand_all']:.2f} s (target ≤ 5 s), frames: CPU at most "
            f"{max(ecpu[2], ccpu[2]):.1f} ms, wall p95 {max(e[1], c[1]):.1f} ms / worst {max(e[2], c[2]):.1f} ms "
            "(target ≤ 16 ms)")
    lines += [
        "",
        "Wall times are stretched by the machine's load (see *load*): a frame's CPU time is what it costs.",
        "",
        "## Time, frames, memory",
        "",
        "| graph | nodes | groups | shown at first | first paint (CPU) | expand all (CPU) |"
        " frame collapsed p50 / p95 / max | frame expanded p50 / p95 / max | expanded, CPU p95 / max | peak RSS "
        "| load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        c = frame_summary(r["frames_collapsed"])
        e = frame_summary(r["frames_expanded"])
        ec = frame_summary(r["frames_expanded"], cpu=True)
        lines.append(
            f"| {_name(r)} | {r['nodes']:,} | {r['groups']:,} | {r['collapsed_visible']:,} | "
            f"{r['first_paint']:.2f} s ({r['first_paint_cpu']:.2f} s) | {r['expand_all']:.2f} s "
            f"({r['expand_all_cpu']:.2f} s) | {c[0]:.1f} / {c[1]:.1f} / {c[2]:.1f} ms | "
            f"{e[0]:.1f} / {e[1]:.1f} / {e[2]:.1f} ms (worst at {e[3]}×) | {ec[1]:.1f} / {ec[2]:.1f} ms | "
            f"{r['peak_rss_mb']:.0f} MB | {r['load']:.1f} |")
    lines += [
        "",
        "*first paint*: display graph handed to the panel → measure, group, lay out (worker), build the scene, "
        "first frame. *expand all*: the Groups ▸ Expand all action → next frame (only groups not laid out yet "
        "are laid out; the rest comes from the cache). *frame*: 12 pan positions at each of 9 zooms "
        "(2 %–150 %), each rendered to a QImage; wall time, and the GUI thread's CPU time (what the frame costs "
        "whatever else runs on the machine). CPU in brackets: the process's CPU time (GUI and worker threads). "
        "*load*: the 1-minute load average when the graph was measured (2 CPUs; other sessions' jobs share "
        "them, which stretches wall times).",
        "",
        "## Layout against Graphviz dot (fully expanded graph, same node sizes)",
        "",
        f"dot {_dot_version()}, each run limited to {DOT_TIMEOUT:.0f} s; a run with `--dot-from` takes dot's columns "
        "from an earlier run on the same graphs (dot's results do not depend on this code).",
        "",
        "| graph | ours: layout | crossings | edge length | area | dot flat: time | crossings | edge length | area "
        "| dot with clusters: time | crossings | edge length |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def dot_cells(d: dict | None, area: bool) -> str:
        if d is None:
            return "not run |" + (" | | |" if area else " | |")
        if d.get("seconds") is None:
            return f"> {d['timeout']:.0f} s (stopped) | — | —" + (" | — |" if area else " |")
        if "error" in d:
            return f"failed ({d['error'][:40]}) | | |" + (" |" if area else "")
        cells = f"{d['seconds']:.2f} s | {d['crossings']:,} | {d['length'] / 1e6:.2f} M"
        return cells + (f" | {d['area'] / 1e6:.0f} M |" if area else " |")

    for r in rows:
        o = r["ours"]
        lines.append(f"| {_name(r)} | {r['layout_seconds']:.2f} s | {o['crossings']:,} | "
                     f"{o['length'] / 1e6:.2f} M | {o['area'] / 1e6:.0f} M | " + dot_cells(r.get("dot_flat"), True)
                     + " " + dot_cells(r.get("dot_clusters"), False))
    lines += [
        "",
        "Crossings and edge length are computed by the same code for both layouts: proper intersections of "
        "segments of different edges. Routes are compared as drawn-through points: dot's B-spline control points (the control polygon can "
        "cross where the curve does not, which counts against dot) and our route points (each pair joined by a "
        "vertical-tangent curve on screen). "
        "Length in million scene units (points), area in million square units (the bounding box). *ours: "
        "layout* is the worker's time for the expand-all placement (the few groups the first paint had laid "
        "out come from the cache; the expand-all time above also builds the items).",
        "",
    ]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1k and 5k only")
    ap.add_argument("--no-dot", action="store_true")
    ap.add_argument("--kinds", default="synthetic,real,densenet")
    ap.add_argument("--one", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(RESULTS / "graph.md"))
    ap.add_argument("--dot-from", help="take dot's results from this earlier graph.json (with --no-dot)")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(args.one[0], int(args.one[1]), not args.no_dot)))
        return 0
    sizes = SIZES[:2] if args.quick else SIZES
    rows = []
    for kind in args.kinds.split(","):
        for target in ((1000,) if kind == "densenet" else sizes):
            if kind == "real":
                real_model(target)  # exported outside the measured process
            elif kind == "densenet":
                densenet_model()
            cmd = [sys.executable, __file__, "--one", kind, str(target)] + (["--no-dot"] if args.no_dot else [])
            r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
            if r.returncode != 0:
                print(f"{kind} {target}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
                continue
            row = json.loads(r.stdout.strip().splitlines()[-1])
            if args.dot_from:
                for old in json.loads(Path(args.dot_from).read_text()):
                    if (old["kind"], old["target"]) == (kind, target) and old["nodes"] == row["nodes"]:
                        row.update({k: v for k, v in old.items() if k.startswith("dot_")})
            rows.append(row)
            e = frame_summary(row["frames_expanded"])
            print(f"{kind} {target}: {row['nodes']} nodes, first paint {row['first_paint']:.2f}s, expand all "
                  f"{row['expand_all']:.2f}s, frame p95 {e[1]:.1f} ms max {e[2]:.1f} ms, "
                  f"dot {row.get('dot_flat', {}).get('seconds')}", flush=True)
            (RESULTS / "graph.json").write_text(json.dumps(rows, indent=1))
    write_report(rows, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
