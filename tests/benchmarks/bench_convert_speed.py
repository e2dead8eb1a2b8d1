"""Conversion speed against an earlier commit, side by side in the same run (issue 13): the
whole ``pt2ncnn convert`` process on every torchvision classifier, CPU time of the process
(user + system) and its wall-clock time, the current tree against a checkout of the baseline commit. Not part of the
test run; needs the benchmark virtualenv (torch, torchvision)::

    git worktree add --detach /tmp/pt2ncnn-baseline ddd4dc1
    /work/benchvenv/bin/python tests/benchmarks/bench_convert_speed.py --baseline /tmp/pt2ncnn-baseline \\
        [--models resnet18,vgg11_bn] [--runs 3] [--instructions]

Each model is exported once (``convert_zoo``-style seeded weights and calibrated BatchNorm,
1×3×224×224, 299 for Inception-v3) into ``--work`` by a child process. Then the two
trees' CLIs convert the same ``.pt2`` (``-o`` a scratch folder, emptied before each run, ``-q``), runs interleaved
(baseline, current, baseline, current …) so both see the same machine load; the median CPU
time of each and their ratio are reported, and the ncnn files of both are compared byte for
byte (the speed-up must not change the output). Then as many interleaved runs of the conversion
alone, inside a child that has already started and imported the tree's engine (``main`` of its
CLI, the same arguments): the part of the command the engine's speed decides. Writes ``results/convert_speed.md`` and
``.json``; ``--export-only`` just fills the cache.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
WORK = Path("/tmp/pt2ncnn-bench-scale/torchvision")


def export_one(name: str, work: Path) -> dict:
    """Build and export one classifier (in a child process)."""
    import torch

    sys.path.insert(0, str(ROOT))
    from tests.benchmarks.convert_zoo import classifier

    model, x = classifier(name)
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
    path = work / f"{name}.pt2"
    tmp = work / f"{name}.partial.pt2"
    torch.export.save(ep, str(tmp))
    tmp.replace(path)
    return {"model": name, "nodes": sum(1 for n in ep.graph.nodes if n.op == "call_function")}


def ensure_exported(name: str, work: Path, python: str) -> Path | None:
    path = work / f"{name}.pt2"
    if path.exists():
        return path
    r = subprocess.run([python, __file__, "--export-one", name, "--work", str(work)], capture_output=True,
                       text=True, cwd=ROOT)
    if r.returncode != 0 or not path.exists():
        print(f"{name}: export failed: {(r.stderr.strip().splitlines() or [''])[-1][:200]}", file=sys.stderr)
        return None
    return path


def _tree_env(tree: Path) -> dict[str, str]:
    """The environment a child running ``tree``'s engine gets: its checkout on the path, bytecode
    cached as an installed package runs."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _empty(out: Path) -> None:
    """``out`` as an empty folder: the previous run's files are removed here, outside the
    measured process (freeing a few hundred MB of written files costs the process that frees
    them up to 1.5 s of system time here, alike for both trees: noise, not conversion)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)


def cli_cpu(python: str, tree: Path, model: Path, out: Path) -> tuple[float, float, float]:
    """CPU seconds ``(user, system)`` of one whole ``pt2ncnn convert`` process of ``tree``,
    writing into an empty folder, and its wall-clock seconds."""
    _empty(out)
    env = _tree_env(tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([python, "-m", "engine.cli.main", "convert", str(model), "-o", str(out), "-q"],
                       cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{tree}: convert {model.name} failed: {r.stderr.strip()[-400:]}")
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall


#: the in-process measurement: the engine's modules imported first (not timed), then the CLI's
#: ``main`` converts; prints ``[user, system]`` CPU seconds of the conversion alone
_INPROC = """
import json, resource, sys
import engine.cli.main as cli
import engine.build, engine.convert, engine.converters, engine.passes, engine.reader.package, engine.writers
before = resource.getrusage(resource.RUSAGE_SELF)
rc = cli.main(["convert", sys.argv[1], "-o", sys.argv[2], "-q"])
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps([after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, rc]))
"""


def inproc_cpu(python: str, tree: Path, model: Path, out: Path) -> tuple[float, float]:
    """CPU seconds ``(user, system)`` of converting ``model`` inside a process that has already
    started and imported ``tree``'s engine: the conversion's own cost, without the interpreter
    start and the imports every run of the command pays alike."""
    _empty(out)
    env = _tree_env(tree)
    r = subprocess.run([python, "-c", _INPROC, str(model), str(out)], cwd=tree, env=env, capture_output=True,
                       text=True)
    try:
        user, system, rc = json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        rc = None
    if r.returncode != 0 or rc != 0:
        raise RuntimeError(f"{tree}: in-process convert {model.name} failed: {r.stderr.strip()[-400:]}")
    return user, system


def cli_instructions(python: str, tree: Path, model: Path, out: Path) -> int | None:
    """Instructions one whole ``pt2ncnn convert`` process of ``tree`` executes, counted by
    valgrind's cachegrind (None without valgrind). Unlike CPU time it does not move with the
    machine's load or the VM's stretch: hash seed fixed, address randomisation off, identical
    runs agree within 0.3 %. It is not time — a cache miss or a page fault costs more than an
    instruction — so it stands beside the CPU time as the noise-free view of the same change."""
    valgrind = shutil.which("valgrind")
    setarch = shutil.which("setarch")
    if valgrind is None:
        return None
    _empty(out)
    env = dict(_tree_env(tree), PYTHONHASHSEED="0")
    prefix = [setarch, os.uname().machine, "-R"] if setarch else []
    r = subprocess.run([*prefix, valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                        python, "-m", "engine.cli.main", "convert", str(model), "-o", str(out), "-q"],
                       cwd=tree, env=env, capture_output=True, text=True)
    refs = [line for line in r.stderr.splitlines() if "I refs:" in line or "I   refs:" in line]
    if r.returncode != 0 or not refs:
        raise RuntimeError(f"{tree}: convert {model.name} under cachegrind failed: {r.stderr.strip()[-400:]}")
    return int(refs[-1].split(":")[-1].replace(",", "").strip())


def same_files(a: Path, b: Path, stem: str) -> bool:
    return all((a / f"{stem}{s}").read_bytes() == (b / f"{stem}{s}").read_bytes()
               for s in (".ncnn.param", ".ncnn.bin", ".pnnx.param", ".pnnx.bin"))


def measure(name: str, model: Path, baseline: Path, python: str, runs: int, scratch: Path,
            instructions: bool = False) -> dict:
    base_out, cur_out = scratch / "baseline", scratch / "current"
    for tree, out in ((baseline, base_out), (ROOT, cur_out)):  # warm: bytecode, page cache
        cli_cpu(python, tree, model, out)
    base, cur = [], []
    for _ in range(runs):
        base.append(cli_cpu(python, baseline, model, base_out))
        cur.append(cli_cpu(python, ROOT, model, cur_out))
    identical = same_files(base_out, cur_out, model.name[:-4])
    base_in, cur_in = [], []
    for _ in range(runs):
        base_in.append(inproc_cpu(python, baseline, model, base_out))
        cur_in.append(inproc_cpu(python, ROOT, model, cur_out))
    b, c = statistics.median(u + s for u, s, _ in base), statistics.median(u + s for u, s, _ in cur)
    bu, cu = statistics.median(u for u, _, _ in base), statistics.median(u for u, _, _ in cur)
    bw, cw = statistics.median(w for _, _, w in base), statistics.median(w for _, _, w in cur)
    bi, ci = statistics.median(u for u, _ in base_in), statistics.median(u for u, _ in cur_in)
    counts = {}
    if instructions:
        bn, cn = cli_instructions(python, baseline, model, base_out), cli_instructions(python, ROOT, model, cur_out)
        if bn and cn:
            counts = {"baseline_ginstr": round(bn / 1e9, 3), "current_ginstr": round(cn / 1e9, 3),
                      "instr_speedup": round(bn / cn, 2)}
    return {**counts, "model": name, "baseline_s": round(b, 3), "current_s": round(c, 3), "speedup": round(b / c, 2),
            "baseline_user_s": round(bu, 3), "current_user_s": round(cu, 3), "user_speedup": round(bu / cu, 2),
            "baseline_wall_s": round(bw, 3), "current_wall_s": round(cw, 3), "wall_speedup": round(bw / cw, 2),
            "baseline_inproc_s": round(bi, 3), "current_inproc_s": round(ci, 3), "inproc_speedup": round(bi / ci, 2),
            "identical": identical, "mb": round(model.stat().st_size / 2**20, 1)}


def write_report(rows: list[dict], baseline_rev: str, current_rev: str, runs: int) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "convert_speed.json").write_text(json.dumps(rows, indent=1) + "\n")
    ok = [r for r in rows if "speedup" in r]
    lines = [
        "# `pt2ncnn convert` speed, current tree against the baseline commit (same run)", "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} by `tests/benchmarks/bench_convert_speed.py`: CPU time "
        f"(user + system) of the whole CLI process, median of {runs} interleaved runs each; baseline "
        f"{baseline_rev}, current {current_rev}; load average at the end {os.getloadavg()[0]:.1f}. "
        "Every run writes into an empty folder (the previous run's files are removed by the harness: "
        "freeing them costs whoever frees them up to 1.5 s of system time here, alike for both trees). "
        "*identical*: the four output files are byte-identical. *user*: the same runs' user CPU time "
        "alone (the system time, page faults on the mapped weights and writing the outputs, varies by "
        "tenths of a second between identical runs here). *wall*: the same runs' wall-clock time, "
        "what a user waits (the current tree writes a model with heavy weights on two threads). *in process*: user CPU time of the "
        "conversion alone (reading, converting, writing the files) in a process that has already started "
        "and imported the engine, median of as many interleaved runs: what the interpreter's start and "
        "the imports, which both trees pay alike on every run, hide in the whole-process ratio. "
        "*instructions* (with `--instructions`): one run of each tree's whole process under valgrind's "
        "cachegrind, in billions; the count does not move with the machine's load (identical runs agree "
        "within 0.3 %), but it is not time: a page fault or a cache miss costs more than an instruction.", "",
    ]
    if ok:
        for key, what in (("speedup", "speed-up (user + system)"), ("user_speedup", "speed-up (user)"),
                          ("wall_speedup", "speed-up (wall clock)"),
                          ("inproc_speedup", "speed-up in process (user)"),
                          ("instr_speedup", "fewer instructions (cachegrind, whole process)")):
            sp = [r[key] for r in ok if key in r]
            if sp:
                lines += [f"**{len(sp)} models: {what} min {min(sp):.2f}×, median {statistics.median(sp):.2f}×, "
                          f"max {max(sp):.2f}×.**", ""]
        lines += [f"{sum(r['identical'] for r in ok)}/{len(ok)} byte-identical outputs.", ""]
    lines += ["| model | .pt2 | baseline | current | speed-up | user: baseline | user: current | user speed-up "
              "| wall: baseline | wall: current | wall speed-up "
              "| in process (user): baseline | in process: current | in-process speed-up "
              "| instructions: baseline | instructions: current | instruction ratio | identical |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        if "speedup" not in r:
            lines.append(f"| {r['model']} | | | | {r.get('error', '')[:80]} | | | | | | | | | | | | | |")
            continue
        cells = []
        for key in ("user", "wall", "inproc"):
            cells.append(f"{r[f'baseline_{key}_s']:.2f} s | {r[f'current_{key}_s']:.2f} s | {r[f'{key}_speedup']:.2f}×"
                         if f"{key}_speedup" in r else "— | — | —")
        instr = (f"{r['baseline_ginstr']:.2f} G | {r['current_ginstr']:.2f} G | {r['instr_speedup']:.2f}×"
                 if "instr_speedup" in r else "— | — | —")
        lines.append(f"| {r['model']} | {r['mb']:.0f} MB | {r['baseline_s']:.2f} s | {r['current_s']:.2f} s | "
                     f"{r['speedup']:.2f}× | {cells[0]} | {cells[1]} | {cells[2]} | {instr} | "
                     f"{'✅' if r['identical'] else '❌'} |")
    (RESULTS / "convert_speed.md").write_text("\n".join(lines) + "\n")


def _rev(tree: Path) -> str:
    r = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":!tests/benchmarks/results"],  # this run's own results are not a change
                           capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + ("+changes" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="a checkout of the baseline commit (git worktree)")
    ap.add_argument("--models", default="", help="comma-separated torchvision names (default: every classifier)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=str(WORK))
    ap.add_argument("--instructions", action="store_true",
                    help="also count each tree's instructions once under valgrind's cachegrind")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--export-one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.export_one:
        print(json.dumps(export_one(args.export_one, work)))
        return 0
    import torchvision

    names = args.models.split(",") if args.models else sorted(torchvision.models.list_models(module=torchvision.models))
    python = sys.executable
    rows = []
    for k, name in enumerate(names, 1):
        model = ensure_exported(name, work, python)
        if model is None or args.export_only:
            print(f"[{k}/{len(names)}] {name}: {'exported' if model else 'export failed'}", flush=True)
            continue
        try:
            row = measure(name, model, Path(args.baseline), python, args.runs, work / "out", args.instructions)
        except RuntimeError as e:
            row = {"model": name, "error": str(e)}
        rows.append(row)
        print(f"[{k}/{len(names)}] {json.dumps(row)}", flush=True)
        if not args.models:
            write_report(rows, _rev(Path(args.baseline)), _rev(ROOT), args.runs)
    if rows:
        write_report(rows, _rev(Path(args.baseline)), _rev(ROOT), args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
