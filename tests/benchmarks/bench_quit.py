"""How long quitting pt2ncnn Studio takes after Verify imported torch (issue 12, item 18).

Run it (not collected by pytest)::

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/benchmarks/bench_quit.py [MODEL.pt2] [--runs N]

Each run is a fresh process that opens the model, waits until it is converted, imports torch
(what Verify does), then quits; the time is from the Quit action to the process's end, measured
by this script. Two ways of quitting are timed in the same run:

* **studio** — ``pt2ncnn-studio``'s own entry point (:func:`gui.app.main`): the window saves its
  state, the process ends at once (:func:`gui.app.leave`);
* **anchor** — the same window closed the way it was before: ``main`` returns and Python tears
  the interpreter down (module teardown, the collection of the whole heap with torch in it).

Results go to ``results/quit.md``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results" / "quit.md"

CHILD = r'''
import sys, time
from PySide6.QtCore import QTimer
import gui.app as app
from gui import main_window

mode = sys.argv[3]
opened = main_window.MainWindow.open_file


def open_then_quit(self, *args, **kwargs):
    task = opened(self, *args, **kwargs)

    def quit():
        self.wait_settled()
        import torch  # noqa: F401  (what Verify imports)
        print("QUIT", time.time(), flush=True)
        self.actions.quit.trigger()

    QTimer.singleShot(50, quit)
    return task


main_window.MainWindow.open_file = open_then_quit
if mode == "anchor":
    app.leave = lambda code: None  # the teardown as it was: main returns, Python cleans up
sys.exit(app.main([sys.argv[1], "--settings", sys.argv[2]]))
'''


def one_quit(model: str, mode: str) -> float:
    settings = Path(tempfile.mkdtemp(prefix="bench-quit-")) / "studio.ini"
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-c", CHILD, model, str(settings), mode], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    quit_at = None
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith("QUIT"):
            quit_at = float(line.split()[1])
    p.wait()
    ended = time.time()
    if p.returncode != 0 or quit_at is None:
        raise SystemExit(f"{mode}: the studio did not quit cleanly (exit {p.returncode})")
    return ended - quit_at


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default=str(ROOT / "resources" / "samples" / "tiny_cnn.pt2"))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    times: dict[str, list[float]] = {"studio": [], "anchor": []}
    for _ in range(args.runs):
        for mode in times:  # interleaved: both see the same machine load
            times[mode].append(one_quit(args.model, mode))
    med = {m: statistics.median(t) for m, t in times.items()}
    lines = [
        "# Quitting pt2ncnn Studio after Verify imported torch",
        "",
        f"Model `{Path(args.model).name}`, {args.runs} runs each (median), Quit → process end, "
        f"{os.cpu_count()} CPUs. `tests/benchmarks/bench_quit.py`.",
        "",
        "| quitting | median | runs (s) |",
        "|---|---:|---|",
        f"| studio (state saved, process ends at once) | {med['studio']:.2f} s | "
        + ", ".join(f"{t:.2f}" for t in times["studio"]) + " |",
        f"| anchor: interpreter teardown (as before) | {med['anchor']:.2f} s | "
        + ", ".join(f"{t:.2f}" for t in times["anchor"]) + " |",
        "",
        f"studio / anchor = {med['studio'] / med['anchor']:.2f}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
