"""Breadth check: pnnx's own ncnn test suite, run through ``torch.export`` → pt2ncnn → ncnn.

Run with the benchmark virtualenv (torch 2.14.1 + torchvision + pnnx), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_pnnx_suite.py NCNN_CHECKOUT \
        [--tests a,b] [--dialect training|core|both] [--no-pnnx] [-j 2]

``NCNN_CHECKOUT`` is a local clone of Tencent/ncnn (a work tree, or a bare git directory whose
``HEAD`` is read); nothing of it is vendored. Each ``tools/pnnx/tests/ncnn/test_*.py`` runs in
its own process, in a scratch folder, exactly as written except for two seams:

* ``torch.jit.trace(net, inputs)`` only records the module and its inputs, and
* ``os.system("../../src/pnnx NAME.pt inputshape=... [inputshape2=...]")`` exports the recorded
  module with ``torch.export.export`` (dims that differ between ``inputshape`` and
  ``inputshape2`` are dynamic), optionally ``run_decompositions()``, converts it in-process with
  pt2ncnn (fp16 weights, as pnnx), writes ``NAME.ncnn.param``/``.bin`` and a ``NAME_ncnn.py``
  whose ``test_inference()`` runs the model in the ncnn runtime on the recorded inputs, feeding
  each input and reading each output along the batch axis the converter chose
  (``ncnn.Mat(a, batch_index=b)``). A conversion that leaves operators unconverted makes the
  command fail, as pnnx's would.

The test then judges by its own comparison (``torch.allclose(a, b, 1e-4, 1e-4)`` and the like),
including the few tests that feed the ncnn runtime by hand. The pnnx column runs the same test
unchanged against the pnnx CLI (TorchScript input). Results go to
``tests/benchmarks/results/pnnx_suite.json`` and ``.md``: totals, and every test that does not
pass with the reason (conversion diagnostics, runtime error, or the largest output error).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
SUITE = "tools/pnnx/tests/ncnn"
#: where the child writes what it learned (beside the test's own verdict)
NOTES = "pt2ncnn_notes.json"


# ---------------------------------------------------------------------------- suite files
def list_tests(checkout: Path) -> dict[str, str]:
    """``{file name: source}`` of the suite, from a work tree or a bare git directory."""
    tree = checkout / SUITE
    if tree.is_dir():
        return {p.name: p.read_text() for p in sorted(tree.glob("test_*.py"))}
    names = subprocess.run(["git", "-C", str(checkout), "ls-tree", "--name-only", f"HEAD:{SUITE}"],
                           check=True, capture_output=True, text=True).stdout.split()
    out = {}
    for n in sorted(names):
        if n.startswith("test_") and n.endswith(".py"):
            out[n] = subprocess.run(["git", "-C", str(checkout), "show", f"HEAD:{SUITE}/{n}"], check=True,
                                    capture_output=True, text=True).stdout
    return out


# ---------------------------------------------------------------------------- child: pt2ncnn seam
def _parse_shapes(text: str) -> list[list[int]]:
    shapes, cur = [], None
    for part in text.replace("],[", "];[").split(";"):
        part = part.strip()
        inner = part.strip("[]")
        cur = [int(x) for x in inner.split(",") if x.strip()] if inner else []
        shapes.append(cur)
    return shapes


def _parse_pnnx_command(cmd: str) -> dict:
    words = cmd.split()
    i = next(k for k, w in enumerate(words) if w.endswith("pnnx"))
    args = {"pt": words[i + 1]}
    for w in words[i + 2:]:
        if "=" in w:
            k, v = w.split("=", 1)
            args[k] = v
    return args


_RUNNER = '''"""ncnn inference of {name} for pnnx's test (written by check_pnnx_suite.py)."""
import json
import numpy as np
import ncnn
import torch

LAYOUT = json.loads({layout!r})


def test_inference():
    inputs = torch.load({inputs_path!r})
    out = []
    with ncnn.Net() as net:
        net.load_param({param!r})
        net.load_model({bin!r})
        with net.create_extractor() as ex:
            for spec, x in zip(LAYOUT["inputs"], inputs):
                b = spec["batch_dim"]
                # token ids stay int32 (ncnn's Embed reads them so), anything else is float32
                dtype = np.int32 if spec.get("dtype") == "int32" else np.float32
                a = np.ascontiguousarray(x.detach().numpy().astype(dtype))
                if a.ndim == 0:
                    a = a.reshape(1)
                ex.input(spec["blob"], ncnn.Mat(a, batch_index=233 if b is None else b).clone())
            for spec in LAYOUT["outputs"]:
                b = spec["batch_dim"]
                ret, m = ex.extract(spec["blob"])
                if ret != 0:
                    raise RuntimeError("ncnn failed to compute " + spec["blob"] + " (error %d)" % ret)
                a = m.numpy(batch_index=233 if b is None else b) if b is not None else np.array(m)
                shape = spec["shape"]
                if all(isinstance(d, int) for d in shape) and int(np.prod(shape)) == a.size:
                    a = a.reshape(shape)
                out.append(torch.from_numpy(np.array(a)))
    return out[0] if len(out) == 1 else tuple(out)
'''


class _Seam:
    """The two seams of a test run under pt2ncnn (see the module docstring)."""

    def __init__(self, dialect: str, notes: dict):
        self.dialect = dialect
        self.notes = notes
        self.recorded: dict[str, tuple] = {}
        #: ``(stem, net, inputs)`` of every model converted and written
        self.converted: list[tuple] = []
        #: the ``.ncnn.param`` files the test itself opened after they were written
        self.params_read: set[str] = set()
        self.pending: tuple | None = None
        #: called when the export or conversion fails: the test's own code may then crash the
        #: process on the missing files, so the result is reported before it goes on
        self.on_failure = lambda: None

    def trace(self, net, example_inputs, *args, **kw):
        import torch

        inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
        seam = self

        class Recorded:
            def save(self, path):
                seam.recorded[str(path)] = (net, inputs)
                Path(path).write_bytes(b"recorded by check_pnnx_suite")

            def __call__(self, *a):
                return net(*a)

        assert isinstance(inputs, tuple) and all(isinstance(t, torch.Tensor) for t in inputs)
        return Recorded()

    def system(self, cmd: str) -> int:
        if "pnnx" not in cmd:
            return os.system(cmd)
        try:
            rc = self._convert(cmd)
        except Exception as e:  # noqa: BLE001 - any failure is the command failing
            self.notes.setdefault("failures", []).append(f"{type(e).__name__}: {str(e)[:300]}")
            rc = 1
        if rc:
            self.on_failure()
        return rc

    def _export(self, net, inputs, shapes2):
        import torch

        dynamic = None
        if shapes2 is not None:
            dynamic = []
            for t, s2 in zip(inputs, shapes2):
                spec = {d: torch.export.Dim.AUTO for d in range(t.dim()) if d < len(s2) and s2[d] != t.shape[d]}
                dynamic.append(spec or None)
            dynamic = tuple(dynamic)
        ep = torch.export.export(net.eval(), inputs, dynamic_shapes=dynamic, strict=False)
        if shapes2 is not None:  # the program must hold at the second shapes too (torch may specialize)
            others = tuple(torch.rand(*s2).to(t.dtype) if t.is_floating_point() else torch.zeros(*s2, dtype=t.dtype)
                           for t, s2 in zip(inputs, shapes2))
            try:
                ep.module()(*others)
            except Exception as e:  # noqa: BLE001
                raise RuntimeError(f"the exported program does not run at inputshape2: {str(e)[:200]}") from None
        if self.dialect == "core":
            ep = ep.run_decompositions()
        return ep

    def _convert(self, cmd: str) -> int:
        import torch

        from engine.convert import ConvertOptions, convert
        from engine.diagnostics import format_table

        args = _parse_pnnx_command(cmd)
        pt = args["pt"]
        net, inputs = self.recorded[pt]
        stem = pt[:-3] if pt.endswith(".pt") else pt
        shapes2 = _parse_shapes(args["inputshape2"]) if "inputshape2" in args else None
        t0 = time.perf_counter()
        try:
            ep = self._export(net, inputs, shapes2)
        except Exception as e:  # noqa: BLE001
            self.notes.setdefault("export_failed", []).append(f"{stem}: {type(e).__name__}: {str(e)[:300]}")
            return 1
        torch.export.save(ep, f"{stem}.pt2")
        fp16 = args.get("fp16", "1") != "0"
        result = convert(f"{stem}.pt2", ConvertOptions(fp16=fp16))
        self.notes.setdefault("convert_s", []).append(round(time.perf_counter() - t0, 3))
        for d in result.diagnostics:
            if d.severity == "warning":
                self.notes.setdefault("warnings", []).append(f"{stem}: {d.op}: {d.reason}"[:300])
        if not result.ok:
            self.notes.setdefault("unconverted", []).extend(
                f"{stem}: {d.op}: {d.reason}"[:300] for d in result.errors)
            self.notes.setdefault("tables", []).append(format_table(result.errors))
            return 1
        result.write(f"{stem}.ncnn.param", f"{stem}.ncnn.bin")
        layout = {"inputs": result.ncnn.meta.get("inputs", []), "outputs": result.ncnn.meta.get("outputs", [])}
        torch.save(list(inputs), f"{stem}_inputs.pt")
        Path(f"{stem}_ncnn.py").write_text(_RUNNER.format(
            name=stem, layout=json.dumps(layout, default=str), inputs_path=os.path.abspath(f"{stem}_inputs.pt"),
            param=os.path.abspath(f"{stem}.ncnn.param"), bin=os.path.abspath(f"{stem}.ncnn.bin")))
        self.notes.setdefault("layers", []).append(result.layer_count)
        self.converted.append((stem, net, inputs))
        return 0

    def spy_param_reads(self) -> None:
        """Remember which written ``.ncnn.param`` files the test opens to read (a test that
        does inspects pnnx's own layer structure, beyond comparing outputs)."""
        import builtins

        original, seam = builtins.open, self

        def spied(file, mode="r", *args, **kw):
            if isinstance(file, (str, os.PathLike)) and str(file).endswith(".ncnn.param") and "r" in mode:
                seam.params_read.add(Path(file).name)
            return original(file, mode, *args, **kw)

        builtins.open = spied

    def own_check(self) -> str | None:
        """For a test that failed without comparing any output: whether every converted model's
        ncnn outputs match PyTorch's (the runner's ``test_inference`` against the module on the
        recorded inputs), and what else the test looked at."""
        import importlib

        import torch

        if not self.converted:
            return None
        worst = 0.0
        for stem, net, inputs in self.converted:
            with torch.no_grad():
                want = net(*inputs)
            got = importlib.import_module(f"{stem}_ncnn").test_inference()
            want = list(want) if isinstance(want, (tuple, list)) else [want]
            got = list(got) if isinstance(got, (tuple, list)) else [got]
            if len(got) != len(want) or any(a.shape != b.shape for a, b in zip(want, got)):
                return None
            worst = max([worst] + [float((a.double() - b.double()).abs().max()) for a, b in zip(want, got)])
        what = (f"it reads {', '.join(sorted(self.params_read))} (pnnx's own layer structure)" if self.params_read
                else "not an output comparison")
        return (f"the test's own check fails: {what}; the outputs match PyTorch "
                f"(max abs error {worst:.2g} over {len(self.converted)} model(s))")


def _compare_spy(notes: dict):
    """Wrap torch.allclose to remember the largest error the test saw (for the report)."""
    import torch

    original = torch.allclose

    def allclose(a, b, *args, **kw):
        try:
            if a.shape != b.shape:
                notes.setdefault("mismatch", []).append(f"shape {list(a.shape)} vs ncnn {list(b.shape)}")
            else:
                err = float((a.double() - b.double()).abs().max())
                notes["max_abs_err"] = max(notes.get("max_abs_err", 0.0), err)
        except Exception:  # noqa: BLE001
            pass
        return original(a, b, *args, **kw)

    torch.allclose = allclose


def child(test: str, mode: str, dialect: str, work: Path, pnnx: str | None) -> dict:
    """Run one test module's ``test()`` in ``work`` (called in a fresh process)."""
    import importlib.util

    import torch

    os.chdir(work)
    sys.path.insert(0, str(work))
    notes: dict = {}
    if mode == "pt2ncnn":
        seam = _Seam(dialect, notes)
        seam.on_failure = lambda: print(json.dumps({"test": test, "mode": mode, "dialect": dialect,
                                                    "status": _failed_status(notes), **notes}), flush=True)
        torch.jit.trace = seam.trace
        os.system = seam.system
        seam.spy_param_reads()
    else:
        real = os.system

        def system(cmd):
            return real(cmd.replace("../../src/pnnx", pnnx)) if "pnnx" in cmd else real(cmd)

        os.system = system
    _compare_spy(notes)
    spec = importlib.util.spec_from_file_location(test[:-3], work / test)
    module = importlib.util.module_from_spec(spec)
    t0 = time.perf_counter()
    try:
        spec.loader.exec_module(module)
        ok = bool(module.test())
        status = "pass" if ok else "fail"
    except Exception as e:  # noqa: BLE001
        status, notes["exception"] = "error", f"{type(e).__name__}: {str(e)[:300]}"
    notes["seconds"] = round(time.perf_counter() - t0, 2)
    if status != "pass" and notes.get("export_failed"):
        status = _failed_status(notes)
    if mode == "pt2ncnn" and status == "fail" and "max_abs_err" not in notes and not notes.get("mismatch"):
        try:
            check = seam.own_check()
        except Exception as e:  # noqa: BLE001 — the report says what the check ran into
            check = None
            notes["own_check_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        if check:
            notes["own_check"] = check
    return {"test": test, "mode": mode, "dialect": dialect, "status": status, **notes}


def _failed_status(notes: dict) -> str:
    """A test whose export failed is torch.export's limit, not a conversion error."""
    return "export failed" if notes.get("export_failed") else "error"


# ---------------------------------------------------------------------------- parent
def _run_one(checkout_files: dict, test: str, mode: str, dialect: str, pnnx: str | None, timeout: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="pnnxsuite_") as tmp:
        work = Path(tmp) / "tests" / "ncnn"
        work.mkdir(parents=True)
        (work / test).write_text(checkout_files[test])
        cmd = [sys.executable, __file__, "--child", test, "--mode", mode, "--dialect", dialect, "--work", str(work)]
        if pnnx:
            cmd += ["--pnnx", pnnx]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1")
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=work)
        except subprocess.TimeoutExpired:
            return {"test": test, "mode": mode, "dialect": dialect, "status": "timeout"}
        for line in reversed(p.stdout.splitlines()):
            if line.startswith("{") and '"status"' in line:
                return json.loads(line)
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {"test": test, "mode": mode, "dialect": dialect, "status": "crash",
                "exception": f"exit {p.returncode}: " + " | ".join(tail)[:400]}


def _reason(r: dict) -> str:
    for key in ("export_failed", "unconverted", "failures", "mismatch"):
        if r.get(key):
            items = list(dict.fromkeys(r[key]))
            return f"{key}: " + "; ".join(items[:3]) + (f" (+{len(items) - 3} more)" if len(items) > 3 else "")
    if r.get("exception"):
        return r["exception"]
    if "max_abs_err" in r:
        return f"outputs differ (max abs error {r['max_abs_err']:.3g})"
    if r.get("own_check"):
        return f"{r['status']}: {r['own_check']}"
    return r["status"]


def _run_line(run: dict | None) -> list[str]:
    """Where the numbers come from: date, commit, versions, jobs, wall time."""
    if not run:
        return []
    return [f"Run {run['date']} at {run['commit']} ({run['jobs']} jobs, {run['wall_s'] / 60:.0f} min wall; "
            f"{run['versions']}){'; rows not re-run (other tests or dialects) kept from the previous run' if run['merged'] else ''}.", ""]


def _versions() -> str:
    import importlib.metadata as md

    out = []
    for pkg in ("torch", "ncnn", "pnnx"):
        try:
            out.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            pass
    return ", ".join(out)


def _commit() -> str:
    p = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() or "unknown commit"


def write_report(rows: list[dict], dialects: list[str], with_pnnx: bool, run: dict | None = None) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pnnx_suite.json").write_text(json.dumps(rows, indent=1) + "\n")
    by = {(r["test"], r["mode"], r["dialect"]): r for r in rows}
    tests = sorted({r["test"] for r in rows})
    lines = ["# pnnx's ncnn test suite through torch.export → pt2ncnn → ncnn", ""] + _run_line(run)
    for dialect in dialects:
        ours = [by.get((t, "pt2ncnn", dialect)) for t in tests]
        pn = [by.get((t, "pnnx", "training")) for t in tests]
        n_ours = sum(1 for r in ours if r and r["status"] == "pass")
        line = f"* {dialect} dialect: pt2ncnn passes **{n_ours} of {len(tests)}**"
        if with_pnnx:
            n_pnnx = sum(1 for r in pn if r and r["status"] == "pass")
            both = sum(1 for a, b in zip(ours, pn) if b and b["status"] == "pass" and a and a["status"] == "pass")
            line += f"; pnnx passes {n_pnnx}; of pnnx's passes, pt2ncnn passes {both}"
        lines.append(line)
    lines += ["", "| test | " + " | ".join(f"pt2ncnn ({d})" for d in dialects) + (" | pnnx |" if with_pnnx else " |"),
              "|---|" + "---|" * (len(dialects) + (1 if with_pnnx else 0))]
    for t in tests:
        cells = []
        for dialect in dialects:
            r = by.get((t, "pt2ncnn", dialect))
            cells.append("pass" if r and r["status"] == "pass" else (_reason(r) if r else "—").replace("|", "/"))
        if with_pnnx:
            r = by.get((t, "pnnx", "training"))
            cells.append(r["status"] if r else "—")
        lines.append(f"| {t[5:-3]} | " + " | ".join(cells) + " |")
    (RESULTS / "pnnx_suite.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", nargs="?", help="a local clone of Tencent/ncnn (work tree or bare git dir)")
    ap.add_argument("--tests", help="comma-separated test names (test_F_relu or F_relu)")
    ap.add_argument("--dialect", default="both", choices=["training", "core", "both"])
    ap.add_argument("--no-pnnx", action="store_true", help="skip the pnnx column")
    ap.add_argument("--pnnx-bin", help="the pnnx executable (default: the pnnx package's)")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--merge", action="store_true", help="keep the last run's rows for tests not re-run")
    ap.add_argument("--child")
    ap.add_argument("--mode")
    ap.add_argument("--work")
    ap.add_argument("--pnnx")
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.mode, a.dialect, Path(a.work), a.pnnx)), flush=True)
        return 0
    files = list_tests(Path(a.checkout))
    names = sorted(files)
    if a.tests:
        wanted = {t if t.startswith("test_") else f"test_{t}" for t in a.tests.split(",")}
        names = [n for n in names if n[:-3] in wanted]
    dialects = ["training", "core"] if a.dialect == "both" else [a.dialect]
    pnnx = None
    if not a.no_pnnx:
        if a.pnnx_bin:
            pnnx = a.pnnx_bin
        else:
            import pnnx as _p

            pnnx = str(Path(_p.__file__).parent / "pnnx")
    jobs = [(t, "pt2ncnn", d) for t in names for d in dialects] + ([(t, "pnnx", "training") for t in names] if pnnx else [])
    from concurrent.futures import ThreadPoolExecutor

    rows = []
    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.j) as pool:
        for r in pool.map(lambda j: _run_one(files, *j, pnnx, a.timeout), jobs):
            rows.append(r)
            print(f"[{len(rows)}/{len(jobs)} {time.perf_counter() - t0:.0f}s] {r['test']} {r['mode']} {r['dialect']}: "
                  f"{r['status']}" + ("" if r["status"] == "pass" else f" — {_reason(r)[:200]}"), flush=True)
    if a.merge and (RESULTS / "pnnx_suite.json").exists():
        done = {(r["test"], r["mode"], r["dialect"]) for r in rows}
        rows += [r for r in json.loads((RESULTS / "pnnx_suite.json").read_text())
                 if (r["test"], r["mode"], r["dialect"]) not in done]
    run = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": _commit(), "jobs": a.j,
           "wall_s": time.perf_counter() - t0, "versions": _versions(), "merged": bool(a.merge)}
    rows.sort(key=lambda r: (r["test"], r["mode"], r["dialect"]))
    # every dialect with rows, kept ones too: a merged run of one dialect keeps the other's column
    shown = [d for d in ("training", "core") if any(r["mode"] == "pt2ncnn" and r["dialect"] == d for r in rows)]
    write_report(rows, shown, pnnx is not None or any(r["mode"] == "pnnx" for r in rows), run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
