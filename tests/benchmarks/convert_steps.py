"""The steps of the conversion benchmark that run in a child interpreter of the benchmark
virtualenv (torch, torchvision, ncnn), one step per process so a crash (ncnn segfault on a
broken model, an exporter abort) is recorded and does not end the run.

    python tests/benchmarks/convert_steps.py STEP '{"json": "arguments"}'

Each step prints one ``@@RESULT@@{json}`` line. :func:`run_step` is the parent side.

Steps: ``export`` (the .pt2, the traced .pt for pnnx, the input and PyTorch's output),
``inprocess`` (``engine.convert`` timed in-process, diagnostics grouped by ATen overload),
``ncnn_check`` (load + relative error, ncnn default options and fp16 off), ``ncnn_time``
(inference time of several models, runs interleaved), ``divergence`` (first ncnn blob that
departs from PyTorch's intermediate value, through provenance) and ``profile`` (cProfile of
``engine.convert``).
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MARK = "@@RESULT@@"

#: relative-error limits: ncnn default options (fp16 storage/arithmetic) / fp16 off
TOL_DEFAULT, TOL_FP32 = 1e-2, 1e-3


# ----------------------------------------------------------------------------------- parent side

def child_env() -> dict[str, str]:
    """The environment of every child: the repo importable, and bytecode caching on (an
    installed pt2ncnn runs from compiled bytecode; without it every CLI run would pay for
    compiling the engine's sources, ~0.3 s)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _tail(text: str, n: int = 1500) -> str:
    return text[-n:] if text else ""


def describe_returncode(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def run_step(python: str, step: str, args: dict, *, timeout: float) -> dict:
    """Run ``step`` in a fresh ``python``; its result dict, or ``{"error": ...}`` when the child
    crashed, timed out or reported nothing. ``stderr`` (tail) is kept on failure."""
    cmd = [python, str(Path(__file__).resolve()), step, json.dumps(args)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env(), cwd=REPO)
    except subprocess.TimeoutExpired as e:
        return {"error": f"{step}: timed out after {timeout:.0f} s",
                "stderr": _tail(e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or ""))}
    wall = time.perf_counter() - t0
    line = next((x for x in reversed(p.stdout.splitlines()) if x.startswith(MARK)), None)
    if line is None:
        return {"error": f"{step}: child {describe_returncode(p.returncode)} without a result",
                "stderr": _tail(p.stderr), "wall": wall}
    out = json.loads(line[len(MARK):])
    out["wall"] = wall
    if out.get("error") or p.returncode:
        out.setdefault("stderr", _tail(p.stderr))
    return out


# ------------------------------------------------------------------------------------ child side

def _quiet_torch():
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


def step_export(a: dict) -> dict:
    """Build the model, export the .pt2 (torch.export) and the TorchScript .pt (torch.jit.trace),
    save input.npy and PyTorch eager's output.npy."""
    _quiet_torch()
    import numpy as np
    import torch

    sys.path.insert(0, str(HERE))
    from convert_zoo import build, example_input

    out = Path(a["dir"])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(int(a.get("torch_threads", 2)))
    t0 = time.perf_counter()
    model = build(a["model"], seed=a.get("seed", 0))
    x = example_input(a.get("seed", 0))
    res = {"build_seconds": time.perf_counter() - t0}
    with torch.no_grad():
        y = model(x)
    np.save(out / "input.npy", x.numpy())
    np.save(out / "output.npy", y.numpy())
    t0 = time.perf_counter()
    ep = torch.export.export(model, (x,))
    torch.export.save(ep, str(out / "model.pt2.tmp"))
    os.replace(out / "model.pt2.tmp", out / "model.pt2")
    res["export_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.no_grad():
        traced = torch.jit.trace(model, (x,), check_trace=False)
    traced.save(str(out / "model.pt.tmp"))
    os.replace(out / "model.pt.tmp", out / "model.pt")
    res["trace_seconds"] = time.perf_counter() - t0
    res["aten_nodes"] = sum(1 for n in ep.graph.nodes if n.op == "call_function")
    res["parameters"] = int(sum(p.numel() for p in model.parameters()))
    res["output_shape"] = list(y.shape)
    res["output_absmax"] = float(y.abs().max())
    res["output_std"] = float(y.std())
    res["torch"] = torch.__version__
    return res


def _group_diagnostics(diags) -> dict:
    """{op: {count, reasons: {reason: count}, nodes: [first 5]}} over error diagnostics."""
    groups: dict[str, dict] = {}
    for d in diags:
        g = groups.setdefault(d.op, {"count": 0, "reasons": {}, "nodes": [], "modules": []})
        g["count"] += 1
        g["reasons"][d.reason] = g["reasons"].get(d.reason, 0) + 1
        if len(g["nodes"]) < 5:
            g["nodes"].append(d.node)
            if d.module:
                g["modules"].append(d.module)
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["count"]))


def step_inprocess(a: dict) -> dict:
    """``engine.convert`` of the .pt2 in-process (imports excluded), median of ``repeat``; the
    diagnostics grouped by ATen overload; pass times; when complete, the files written with fp16
    (default) and fp32 weights into ``dir`` (the write timed too)."""
    t0 = time.perf_counter()
    import engine.converters  # noqa: F401
    from engine.convert import ConvertOptions, convert

    res: dict = {"import_seconds": time.perf_counter() - t0}
    times, cpu, result = [], [], None
    for _ in range(max(1, int(a.get("repeat", 1)))):
        t0, c0 = time.perf_counter(), time.process_time()
        result = convert(a["pt2"], ConvertOptions(converters=a.get("converters", [])))
        cpu.append(time.process_time() - c0)
        times.append(time.perf_counter() - t0)
    res["convert_seconds"] = statistics.median(times)
    res["convert_cpu_seconds"] = statistics.median(cpu)
    res["convert_samples"] = times
    res["ok"] = result.ok
    res["layers"] = result.layer_count
    res["errors"] = _group_diagnostics(result.errors)
    res["warnings"] = sorted({f"{d.op}: {d.reason}" for d in result.diagnostics if d.severity != "error"})
    res["passes"] = sorted(({"name": r.name, "seconds": r.seconds} for r in result.records[1:]),
                           key=lambda r: -r["seconds"])[:6]
    types: dict[str, int] = {}
    for op in result.ncnn.ops:
        types[op.type] = types.get(op.type, 0) + 1
    res["layer_types"] = dict(sorted(types.items(), key=lambda kv: -kv[1]))
    d = Path(a["dir"])
    d.mkdir(parents=True, exist_ok=True)
    if result.ok:
        t0, c0 = time.perf_counter(), time.process_time()
        result.write_all(d, "model")
        res["write_seconds"] = time.perf_counter() - t0
        res["write_cpu_seconds"] = time.process_time() - c0
        result.write(d / "model_fp32.ncnn.param", d / "model_fp32.ncnn.bin", fp16=False)
    return res


def _ncnn_net(param: str, bin_: str, *, fp32: bool, threads: int = 1, lightmode: bool = True):
    import ncnn

    net = ncnn.Net()
    net.opt.num_threads = threads
    net.opt.lightmode = lightmode
    if fp32:
        net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = net.opt.use_fp16_packed = False
        net.opt.use_bf16_storage = False
    if net.load_param(param) != 0:
        raise RuntimeError(f"ncnn load_param refused {Path(param).name}")
    if net.load_model(bin_) != 0:
        raise RuntimeError(f"ncnn load_model refused {Path(bin_).name}")
    return net


def _infer(net, x, blob: str = "out0"):
    import ncnn
    import numpy as np

    ex = net.create_extractor()
    # clone: an in-place first layer must not write into (or free) numpy's memory
    ex.input("in0", ncnn.Mat(x).clone())
    ret, mat = ex.extract(blob)
    if ret != 0:
        raise RuntimeError(f"ncnn extract({blob}) failed with {ret}")
    return np.array(mat).copy()


def rel_error(got, want) -> float:
    import numpy as np

    want = want.astype(np.float64).reshape(-1)
    got = got.astype(np.float64).reshape(-1)
    if got.size != want.size:
        return float("inf")
    scale = max(float(np.abs(want).max()), 1e-12)
    err = float(np.abs(got - want).max()) / scale
    return err if np.isfinite(err) else float("inf")  # NaN/inf outputs: never "within tolerance"


def step_ncnn_check(a: dict) -> dict:
    """Load ``param``/``bin`` and run it on input.npy with ncnn's default options and with
    fp16 storage/arithmetic off; relative error of each against output.npy."""
    import numpy as np

    x = np.ascontiguousarray(np.load(a["input"])[0], dtype=np.float32)
    want = np.load(a["expected"])[0]
    res: dict = {}
    for mode, fp32 in (("default", False), ("fp32", True)):
        net = _ncnn_net(a["param"], a["bin"], fp32=fp32)
        got = _infer(net, x)
        res[mode] = rel_error(got, want)
        res["shape"] = list(got.shape)
    return res


def step_ncnn_time(a: dict) -> dict:
    """Inference time (ms) of each of ``models`` ([{label, param, bin}]) for each thread count,
    median and min of the wall time and of the CPU time (this thread's for one thread — immune
    to preemption on a busy machine — the process's for more).

    Placement and order matter by a few percent on this machine (the net loaded first ran ~5 %
    slower than an identical copy loaded later; the model run first in a round slightly
    slower), so every model is loaded twice in ABBA order (A, B, B, A) and the instances run
    in alternating order from round to round: ``warmup`` untimed runs, then ``runs`` rounds;
    the samples of both instances of a model are pooled."""
    import numpy as np

    x = np.ascontiguousarray(np.load(a["input"])[0], dtype=np.float32)
    models = a["models"]
    res: dict = {m["label"]: {} for m in models}
    for threads in a["threads"]:
        cpu_clock = time.thread_time if threads == 1 else time.process_time
        instances = [(m["label"], _ncnn_net(m["param"], m["bin"], fp32=False, threads=threads))
                     for m in models + models[::-1]]
        wall: dict[str, list[float]] = {m["label"]: [] for m in models}
        cpu: dict[str, list[float]] = {m["label"]: [] for m in models}
        for _, net in instances:
            for _ in range(int(a.get("warmup", 2))):
                _infer(net, x)
        for k in range(int(a.get("runs", 10))):
            for label, net in (instances if k % 2 == 0 else instances[::-1]):
                t0, c0 = time.perf_counter(), cpu_clock()
                _infer(net, x)
                cpu[label].append((cpu_clock() - c0) * 1000.0)
                wall[label].append((time.perf_counter() - t0) * 1000.0)
        for label in wall:
            res[label][str(threads)] = {"median_ms": statistics.median(wall[label]), "min_ms": min(wall[label]),
                                        "cpu_median_ms": statistics.median(cpu[label]),
                                        "cpu_min_ms": min(cpu[label]), "samples": wall[label], "cpu_samples": cpu[label]}
        del instances
    return res


def _torch_values(pt2: str, x) -> tuple[dict, list[str]]:
    """Every call_function node's value (cloned at the time it is computed, so later in-place
    ops cannot change it) when the exported program runs on ``x``; and the node order."""
    import torch
    from torch.export.graph_signature import InputKind

    ep = torch.export.load(pt2)
    consts = {**ep.state_dict, **ep.constants}
    args = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            args.append(x)
        else:
            args.append(consts[spec.target])
    values: dict = {}
    order: list[str] = []

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if n.op == "call_function" and isinstance(out, torch.Tensor):
                values[n.name] = out.detach().clone().float().numpy()
                order.append(n.name)
            return out

    with torch.no_grad():
        Recorder(ep.graph_module).run(*args)
    return values, order


def step_divergence(a: dict) -> dict:
    """Convert with fp32 weights, run ncnn with fp16 off and every blob extracted, and compare
    each ncnn layer's output with the PyTorch value of the last ATen node of its provenance (a
    fused conv+bn+relu layer holds the relu's value; of several layers lowered from one node
    only the last is compared). Reports the first layer whose relative error exceeds
    ``threshold`` and the worst ones."""
    _quiet_torch()
    import numpy as np
    import torch

    from engine.convert import ConvertOptions, convert

    result = convert(a["pt2"], ConvertOptions(fp16=False, converters=a.get("converters", [])))
    d = Path(a["dir"])
    d.mkdir(parents=True, exist_ok=True)
    param, bin_ = d / "div.ncnn.param", d / "div.ncnn.bin"
    result.write(param, bin_, fp16=False, partial=True)
    x = np.load(a["input"])
    values, order = _torch_values(a["pt2"], torch.from_numpy(x))
    rank = {n: i for i, n in enumerate(order)}
    net = _ncnn_net(str(param), str(bin_), fp32=True, lightmode=False)
    ex = net.create_extractor()
    import ncnn

    ex.input("in0", ncnn.Mat(np.ascontiguousarray(x[0], dtype=np.float32)).clone())
    threshold = float(a.get("threshold", TOL_FP32))
    # an ATen node lowered to several layers (a 5-D permute as reshape/permute/reshape) has its
    # value only at the last of them: compare that one, skip the intermediates
    def key_node(op):
        nodes = [n for n in op.provenance.nodes if n in values]
        return max(nodes, key=rank.__getitem__) if nodes else None

    last_of = {}
    for op in result.ncnn.ops:
        if op.type not in ("Input", "Split") and key_node(op) is not None:
            last_of[key_node(op)] = op
    rows, first = [], None
    for op in result.ncnn.ops:
        node = key_node(op)
        if op.type in ("Input", "Split") or node is None or last_of[node] is not op:
            continue
        for opd in op.outputs:
            ret, mat = ex.extract(opd.name)
            if ret != 0:
                rows.append({"layer": op.name, "type": op.type, "blob": opd.name, "error": f"extract failed {ret}"})
                continue
            got = np.array(mat)
            if values[node].size != got.size:
                continue
            err = rel_error(got, values[node])
            row = {"layer": op.name, "type": op.type, "blob": opd.name, "torch_node": node, "rel_error": err,
                   "provenance": list(op.provenance.nodes)[:8], "modules": list(op.provenance.modules)[:3]}
            rows.append(row)
            if first is None and err > threshold:
                first = row
    compared = [r for r in rows if "rel_error" in r]
    worst = sorted(compared, key=lambda r: -r["rel_error"])[:5]
    return {"compared": len(compared), "first": first, "worst": worst,
            "extract_failures": [r for r in rows if "error" in r][:5]}


def step_profile(a: dict) -> dict:
    """cProfile of ``engine.convert`` and writing the files (after one warm-up conversion), with
    the CLI's options (no snapshots); the stats as text in ``out`` sorted by cumulative and by
    internal time."""
    import cProfile
    import io
    import pstats

    import engine.converters  # noqa: F401
    from engine.convert import ConvertOptions, convert

    convert(a["pt2"], ConvertOptions())
    Path(a["dir"]).mkdir(parents=True, exist_ok=True)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result = convert(a["pt2"], ConvertOptions(snapshots=False))
    result.write_all(Path(a["dir"]), "model", partial=True)
    prof.disable()
    total = time.perf_counter() - t0
    buf = io.StringIO()
    for key in ("cumulative", "tottime"):
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(int(a.get("top", 40)))
    Path(a["out"]).write_text(buf.getvalue())
    return {"seconds": total, "out": a["out"]}


STEPS = {"export": step_export, "inprocess": step_inprocess, "ncnn_check": step_ncnn_check,
         "ncnn_time": step_ncnn_time, "divergence": step_divergence, "profile": step_profile}


def main(argv: list[str]) -> int:
    step, args = argv[0], json.loads(argv[1])
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    try:
        result = STEPS[step](args)
    except Exception as e:  # reported to the parent as data, never a traceback on the table
        import traceback

        traceback.print_exc()
        result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:400] if str(e) else ''}"}
    sys.stdout.flush()
    print(MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
