"""Conversion benchmark: pt2ncnn against the pnnx CLI on torchvision models, same run, reported
as ratios (issue 3 §10; issue 4's benchmark reuses it with ``--transformers``). Not part of the
test run (not named ``test_*``); needs the benchmark virtualenv (torch, torchvision, ncnn, pnnx):

    /work/benchvenv/bin/python tests/benchmarks/bench_convert.py [--models a,b] [--transformers|--all]
        [--repeat N] [--runs N] [--threads 1,2] [--pnnx-cached] [--rebuild] [--profile]

Per model, each step in its own child process with a timeout (``convert_steps.py``):

1. export (cached in ``--work``, redone with ``--rebuild``): ``torch.export`` → ``model.pt2``,
   ``torch.jit.trace`` → ``model.pt`` for pnnx, the input and PyTorch eager's output;
2. conversion wall time of the whole CLI process, ours (``python -m engine.cli.main convert
   model.pt2 -o DIR``) and pnnx's (``pnnx model.pt inputshape=[1,3,224,224]``), each in its own
   folder, repeats interleaved, median; our in-process ``engine.convert`` time and diagnostics;
3. ncnn layer count of both .param files;
4. ncnn inference time of both models (default options, ``--threads``), interleaved runs, median;
5. relative error against PyTorch with ncnn's default options, with fp16 storage/arithmetic off,
   and with fp16 off for a conversion with fp32 weights (``fp16=0``, both sides, untimed; this
   one isolates conversion errors from fp16 weight rounding); when ours mismatches, the first layer whose output diverges from PyTorch's
   intermediate value (found through provenance);
6. the markdown table (``tests/benchmarks/results/convert.md``) and raw records
   (``convert.json``). Re-running a subset replaces those models' rows and keeps the others
   (``--fresh`` starts over).
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import convert_report as report  # noqa: E402
from convert_steps import REPO, TOL_DEFAULT, TOL_FP32, child_env, describe_returncode, run_step  # noqa: E402
from convert_zoo import GROUPS, INPUT_SHAPE, ZOO  # noqa: E402

RESULTS = HERE / "results"
BENCHVENV = Path("/work/benchvenv/bin")
WORK = Path("/tmp/pt2ncnn-bench/convert")
SHAPE_ARG = "inputshape=[" + ",".join(map(str, INPUT_SHAPE)) + "]"


def _default_python() -> str:
    return str(BENCHVENV / "python") if (BENCHVENV / "python").exists() else sys.executable


def _default_pnnx() -> str:
    return str(BENCHVENV / "pnnx") if (BENCHVENV / "pnnx").exists() else (shutil.which("pnnx") or "pnnx")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help="comma-separated model names (default: the CNN list); known: " + ",".join(ZOO))
    p.add_argument("--transformers", action="store_true", help="the transformer list of issue 4 instead of the CNNs")
    p.add_argument("--all", action="store_true", help="CNNs and transformers")
    p.add_argument("--repeat", type=int, default=1, help="conversion repeats per side (median)")
    p.add_argument("--runs", type=int, default=20, help="timed ncnn inference runs per model and thread count")
    p.add_argument("--warmup", type=int, default=2, help="untimed ncnn runs first")
    p.add_argument("--threads", default="1", help="ncnn thread counts, e.g. 1,2")
    p.add_argument("--timeout", type=float, default=900, help="seconds allowed to each step")
    p.add_argument("--python", default=_default_python(), help="interpreter of the benchmark virtualenv")
    p.add_argument("--pnnx", default=_default_pnnx(), help="the pnnx executable")
    p.add_argument("--work", type=Path, default=WORK, help="work folder (exports are cached here)")
    p.add_argument("--rebuild", action="store_true", help="export the models again")
    p.add_argument("--pnnx-cached", action="store_true",
                   help="reuse pnnx's conversion (files and time) from an earlier run when the .pt is unchanged")
    p.add_argument("--converters", metavar="FILE.py", action="append", default=[], type=lambda f: str(Path(f).resolve()),
                   help="a converter plug-in file for our side (may be repeated), as `pt2ncnn convert --converters`")
    p.add_argument("--no-divergence", action="store_true", help="skip the first-diverging-layer search")
    p.add_argument("--profile", action="store_true", help="cProfile our conversion into WORK/<model>/profile.txt")
    p.add_argument("--out", default="convert", help="results file stem in tests/benchmarks/results/ (convert*)")
    p.add_argument("--fresh", action="store_true", help="do not keep rows of models not run now")
    p.add_argument("--render", action="store_true", help="only rewrite the .md from the .json (after a report change)")
    return p.parse_args(argv)


def selected_models(args) -> list[str]:
    if args.models:
        names = [m.strip() for m in args.models.split(",") if m.strip()]
        unknown = [m for m in names if m not in ZOO]
        if unknown:
            raise SystemExit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(ZOO)}")
        return names
    if args.all:
        return GROUPS["cnn"] + GROUPS["transformer"]
    return GROUPS["transformer"] if args.transformers else GROUPS["cnn"]


# ---------------------------------------------------------------------------------------- steps

def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_process(cmd: list[str], cwd: Path, timeout: float) -> dict:
    """Wall time and CPU time (user + system, the process and the children it waited for) of a
    whole process; its exit status and the tail of its output."""
    t0, c0 = time.perf_counter(), _children_cpu()
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        return {"rc": None, "seconds": None, "error": f"timed out after {timeout:.0f} s"}
    out = {"rc": p.returncode, "seconds": time.perf_counter() - t0, "cpu_seconds": _children_cpu() - c0}
    if p.returncode:
        out["error"] = describe_returncode(p.returncode)
        out["stderr"] = (p.stderr or p.stdout)[-3000:]
    return out


def _fresh_dir(d: Path, link_from: Path, link_name: str) -> Path:
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / link_name).symlink_to(link_from)
    return d


def _digest(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def ensure_export(name: str, args) -> dict:
    d = args.work / name / "export"
    meta_path = d / "export.json"
    key = {"model": name, "zoo": hashlib.sha1((HERE / "convert_zoo.py").read_bytes()).hexdigest()[:12],
           "python": args.python}
    if not args.rebuild and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("key") == key and all((d / f).exists() for f in ("model.pt2", "model.pt", "input.npy", "output.npy")):
            meta["cached"] = True
            return meta
    shutil.rmtree(d, ignore_errors=True)
    meta = run_step(args.python, "export", {"model": name, "dir": str(d)}, timeout=args.timeout)
    if not meta.get("error"):
        meta["key"] = key
        meta_path.write_text(json.dumps(meta, indent=1))
    meta["cached"] = False
    return meta


def convert_both(name: str, args, export_dir: Path) -> tuple[dict, dict]:
    """Conversion wall times, ours and pnnx's interleaved; the last run's files stay in
    WORK/<model>/ours and WORK/<model>/pnnx."""
    ours_dir, pnnx_dir = args.work / name / "ours", args.work / name / "pnnx"
    pt = export_dir / "model.pt"
    pnnx_cache = args.work / name / "pnnx.json"
    cached = None
    if args.pnnx_cached and pnnx_cache.exists():
        c = json.loads(pnnx_cache.read_text())
        if c.get("pt") == _digest(pt) and (pnnx_dir / "model.ncnn.param").exists():
            cached = c["cli"]
            cached["cached"] = True
    ours_runs, pnnx_runs = [], []
    ours_cmd = [args.python, "-m", "engine.cli.main", "convert", "model.pt2", "-o", "."]
    for f in args.converters:
        ours_cmd += ["--converters", f]
    pnnx_cmd = [args.pnnx, "model.pt", SHAPE_ARG]
    for _ in range(max(1, args.repeat)):
        _fresh_dir(ours_dir, export_dir / "model.pt2", "model.pt2")
        ours_runs.append(timed_process(ours_cmd, ours_dir, args.timeout))
        if cached is None:
            _fresh_dir(pnnx_dir, pt, "model.pt")
            pnnx_runs.append(timed_process(pnnx_cmd, pnnx_dir, args.timeout))
    ours = _summarise(ours_runs)
    pnnx = cached if cached is not None else _summarise(pnnx_runs)
    if cached is None:
        pnnx_cache.write_text(json.dumps({"pt": _digest(pt), "cli": pnnx}))
    return ours, pnnx


def pnnx_fp32_weights(name: str, args, export_dir: Path) -> Path | None:
    """pnnx's conversion with fp32 weights (``fp16=0``, untimed, cached by the .pt), so its
    conversion error can be told from fp16 weight rounding as ours is."""
    d = args.work / name / "pnnx_fp32"
    pt = export_dir / "model.pt"
    done = d / "done.json"
    if done.exists() and json.loads(done.read_text()).get("pt") == _digest(pt):
        return d if (d / "model.ncnn.param").exists() else None
    _fresh_dir(d, pt, "model.pt")
    r = timed_process([args.pnnx, "model.pt", SHAPE_ARG, "fp16=0"], d, args.timeout)
    done.write_text(json.dumps({"pt": _digest(pt), "rc": r.get("rc")}))
    return d if r.get("rc") == 0 and (d / "model.ncnn.param").exists() else None


def _summarise(runs: list[dict]) -> dict:
    good = [r["seconds"] for r in runs if r.get("rc") == 0]
    cpu = [r["cpu_seconds"] for r in runs if r.get("rc") == 0]
    last = runs[-1]
    out = {"rc": last.get("rc"), "seconds": statistics.median(good) if good else None, "samples": good,
           "cpu_seconds": statistics.median(cpu) if cpu else None}
    for k in ("error", "stderr"):
        if last.get(k):
            out[k] = last[k]
    return out


def bench_model(name: str, args, threads: list[int]) -> dict:
    spec = ZOO[name]
    rec: dict = {"model": name, "title": spec.title, "group": spec.group,
                 "measured_at": dt.datetime.now().isoformat(timespec="seconds"), "commit": git_state()}
    exp = ensure_export(name, args)
    rec["export"] = exp
    if exp.get("error"):
        rec["ours"], rec["pnnx"] = {"converted": False}, {"converted": False}
        return rec
    ed = args.work / name / "export"
    io_args = {"input": str(ed / "input.npy"), "expected": str(ed / "output.npy")}
    ours_cli, pnnx_cli = convert_both(name, args, ed)
    ours_dir, pnnx_dir = args.work / name / "ours", args.work / name / "pnnx"
    o = {"cli": ours_cli, "converted": ours_cli.get("rc") == 0}
    p = {"cli": pnnx_cli, "converted": pnnx_cli.get("rc") == 0 and (pnnx_dir / "model.ncnn.param").exists()}
    rec["ours"], rec["pnnx"] = o, p
    o["inprocess"] = run_step(args.python, "inprocess", {"pt2": str(ed / "model.pt2"), "dir": str(args.work / name / "inproc"),
                                                         "repeat": args.repeat, "converters": args.converters},
                              timeout=args.timeout)
    o_param, o_bin = ours_dir / "model.ncnn.param", ours_dir / "model.ncnn.bin"
    p_param, p_bin = pnnx_dir / "model.ncnn.param", pnnx_dir / "model.ncnn.bin"
    timed = []
    if o["converted"]:
        o["layers"] = report.param_layers(o_param)
        o["check"] = run_step(args.python, "ncnn_check", {"param": str(o_param), "bin": str(o_bin), **io_args},
                              timeout=args.timeout)
        fp32w = args.work / name / "inproc" / "model_fp32.ncnn"
        if Path(str(fp32w) + ".param").exists():
            o["check_fp32w"] = run_step(args.python, "ncnn_check", {"param": str(fp32w) + ".param",
                                                                   "bin": str(fp32w) + ".bin", **io_args},
                                        timeout=args.timeout)
        if not o["check"].get("error"):
            timed.append({"label": "ours", "param": str(o_param), "bin": str(o_bin)})
    if p["converted"]:
        p["layers"] = report.param_layers(p_param)
        p["foreign"] = report.foreign_layers(report.param_types(p_param))
        p["check"] = run_step(args.python, "ncnn_check", {"param": str(p_param), "bin": str(p_bin), **io_args},
                              timeout=args.timeout)
        fp32w = pnnx_fp32_weights(name, args, ed)
        if fp32w is not None:
            p["check_fp32w"] = run_step(args.python, "ncnn_check", {"param": str(fp32w / "model.ncnn.param"),
                                                                   "bin": str(fp32w / "model.ncnn.bin"), **io_args},
                                        timeout=args.timeout)
        if not p["check"].get("error"):
            timed.append({"label": "pnnx", "param": str(p_param), "bin": str(p_bin)})
    if timed:
        t_args = {"threads": threads, "runs": args.runs, "warmup": args.warmup, **io_args}
        times = run_step(args.python, "ncnn_time", {"models": timed, **t_args}, timeout=args.timeout)
        if times.get("error") and len(timed) > 1:  # one crashed: time each alone
            times = {}
            for m in timed:
                times.update(run_step(args.python, "ncnn_time", {"models": [m], **t_args}, timeout=args.timeout))
        for label, side in (("ours", o), ("pnnx", p)):
            if label in times:
                side["time"] = times[label]
            elif times.get("error"):
                side["time_error"] = times["error"]
    if o["converted"] and p["converted"]:
        rec["param_diff"] = report.compare_params(o_param, p_param)
    # the search looks for conversion errors: those show with fp32 weights and fp16 off
    fp32w = o.get("check_fp32w", {})
    mismatch = bool(o.get("check", {}).get("error") or fp32w.get("error") or fp32w.get("fp32", 0) > TOL_FP32
                    or (not fp32w and o.get("check", {}).get("default", 0) > TOL_DEFAULT))
    if o["converted"] and mismatch and not args.no_divergence:
        o["divergence"] = run_step(args.python, "divergence", {"pt2": str(ed / "model.pt2"), "dir": str(args.work / name / "div"),
                                                               "input": io_args["input"], "converters": args.converters},
                                   timeout=args.timeout)
    if args.profile:
        rec["profile"] = run_step(args.python, "profile", {"pt2": str(ed / "model.pt2"), "dir": str(args.work / name / "prof"),
                                                           "out": str(args.work / name / "profile.txt")}, timeout=args.timeout)
    return rec


# ---------------------------------------------------------------------------------- environment

def git_state() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "engine"], cwd=REPO, capture_output=True, text=True).stdout
        n = len([x for x in dirty.splitlines() if x.strip()])
        return head + (f" + {n} uncommitted engine file(s)" if n else "")
    except OSError:
        return "unknown"


def environment(args, threads: list[int]) -> dict:
    def version(code: str) -> str:
        p = subprocess.run([args.python, "-c", code], capture_output=True, text=True)
        return p.stdout.strip() or "?"

    cpu = "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    pnnx_version = version("import importlib.metadata as m; print(m.version('pnnx'))")
    return {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "cpu": f"{cpu}, {os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f} at start",
        "versions": version("import torch, torchvision, ncnn, numpy; print(f'torch {torch.__version__}, torchvision "
                            "{torchvision.__version__}, ncnn {ncnn.__version__}, numpy {numpy.__version__}')")
                    + f", pnnx {pnnx_version}, python {platform.python_version()}",
        "pt2ncnn": git_state(),
        "threads": threads,
        "settings": f"repeat {args.repeat}, runs {args.runs}, warmup {args.warmup}"
                    + (f", plug-ins {', '.join(args.converters)}" if args.converters else ""),
    }


# ----------------------------------------------------------------------------------------- main

def one_line(rec: dict) -> str:
    o, p = rec.get("ours", {}), rec.get("pnnx", {})
    if rec.get("export", {}).get("error"):
        return f"{rec['model']}: export failed: {rec['export']['error']}"
    return (f"{rec['model']}: ours {report.ours_status(rec)} {report._f(o.get('cli', {}).get('seconds'))} s "
            f"{o.get('layers')} layers | pnnx {report.pnnx_status(rec)} {report._f(p.get('cli', {}).get('seconds'))} s "
            f"{p.get('layers')} layers")


def write_results(records: list[dict], env: dict, stem: str, fresh: bool) -> tuple[Path, Path]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    jpath, mpath = RESULTS / f"{stem}.json", RESULTS / f"{stem}.md"
    keep = []
    if not fresh and jpath.exists():
        try:
            old = json.loads(jpath.read_text())
            run_now = {r["model"] for r in records}
            keep = [r for r in old.get("records", []) if r["model"] not in run_now]
        except (ValueError, KeyError):
            keep = []
    allrec = report.order(keep + records)
    for path, text in ((jpath, json.dumps({"env": env, "records": allrec}, indent=1) + "\n"),
                       (mpath, report.markdown(allrec, env))):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return jpath, mpath


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.render:
        data = json.loads((RESULTS / f"{args.out}.json").read_text())
        (RESULTS / f"{args.out}.md").write_text(report.markdown(data["records"], data["env"]))
        return 0
    threads = [int(t) for t in args.threads.split(",")]
    models = selected_models(args)
    args.work.mkdir(parents=True, exist_ok=True)
    # compile the engine's bytecode once, so no timed run pays for it
    subprocess.run([args.python, "-m", "compileall", "-q", str(REPO / "engine")], env=child_env(),
                   capture_output=True)
    env = environment(args, threads)
    records = []
    for name in models:
        t0 = time.perf_counter()
        try:
            rec = bench_model(name, args, threads)
        except Exception as e:  # the orchestrator itself: record and go on
            rec = {"model": name, "title": ZOO[name].title, "error": f"{type(e).__name__}: {e}",
                   "ours": {}, "pnnx": {}}
        rec["bench_seconds"] = time.perf_counter() - t0
        records.append(rec)
        print(f"[{len(records)}/{len(models)} {rec['bench_seconds']:.0f}s] {one_line(rec)}", flush=True)
        write_results(records, env, args.out, args.fresh)
    env["load average at end"] = f"{os.getloadavg()[0]:.2f}"
    _, mpath = write_results(records, env, args.out, args.fresh)
    print()
    print(mpath.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
