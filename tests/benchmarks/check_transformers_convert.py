"""Breadth check: Hugging Face text/speech/vision transformers and two timm models through pt2ncnn
and through the pnnx CLI, in the same run.

Run with the benchmark virtualenv (torch 2.14.1, transformers, timm, ncnn, pnnx), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_transformers_convert.py [--families BERT,GPT-2]

Every family of :mod:`tests.benchmarks.transformers_zoo` is built from a small config with seeded
random weights in ``eval()`` mode, with and without ``attention_mask`` when it takes one, and
each case runs in its own process:

* **pt2ncnn**, for both dialects (``torch.export.export(model, (), inputs, strict=False)`` and its
  ``run_decompositions()``): converted with fp32 weights and with fp16 weights (the default), run
  by the ncnn runtime with exact options (fp32 storage and arithmetic, one thread) and compared
  with PyTorch (relative error = max |ncnn − PyTorch| / max |PyTorch| over every output; match
  = ≤ 1e-4 with fp32 weights, ≤ 5e-3 with fp16 weights). Token ids are fed as int32 Mats (what
  ncnn's ``Embed`` reads), every other input as float32 (an ``attention_mask`` as 0.0 / 1.0).
  Text models are also exported with the sequence length dynamic (``torch.export.Dim``) and run
  at the exported length and two others;
* **pnnx**: ``torch.jit.trace`` of the same module → ``pnnx model.pt inputshape=...`` (with
  ``inputshape2`` at another length for text models) → the same ncnn runtime and comparison, at
  the same lengths; integer inputs are fed as int32.

Writes ``tests/benchmarks/results/transformers_convert.md`` and ``.json``; a run with
``--families`` replaces those families' rows of the last run and keeps the others.
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
TOL = {False: 1e-4, True: 5e-3}
PNNX = Path(sys.executable).parent / "pnnx"


# ----------------------------------------------------------------------------- helpers (child side)
def _flatten(out) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    if isinstance(out, dict) or hasattr(out, "values"):
        return [t for o in out.values() for t in _flatten(o)]
    return []


def _rel(got, want) -> float:
    import numpy as np

    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64)
    if got.size != want.size:
        return float("inf")
    scale = max(float(np.abs(want).max()) if want.size else 0.0, 1e-6)
    err = float(np.abs(got.reshape(want.shape) - want).max()) / scale if want.size else 0.0
    same_nan = np.array_equal(np.isnan(got.reshape(want.shape)), np.isnan(want))
    return err if same_nan and not np.isnan(err) else float("inf")


def _batchless(a):
    return a[0] if a.ndim >= 2 and a.shape[0] == 1 else a


def _reference(case, inputs) -> list:
    import torch

    with torch.no_grad():
        return [t.detach().numpy() for t in _flatten(case.model(**inputs))]


def _compare(got: list, want: list) -> float:
    import numpy as np

    if want and not any(np.any(np.asarray(w)) for w in want):  # nothing a wrong model could not also give
        raise AssertionError("PyTorch's outputs are all 0: the comparison proves nothing")
    if len(got) != len(want):
        return float("inf")
    return max((_rel(g, _batchless(w)) for g, w in zip(got, want)), default=0.0)


def _run_ours(result, param: Path, bin_: Path, inputs: dict) -> list:
    """Our model on PyTorch's inputs, each fed along the batch axis the converter chose (not
    always the first: PatchTST's channels are its batch), token ids as int32; outputs in
    PyTorch's shapes."""
    import numpy as np

    from tests.ncnn_runtime import run_layout

    kinds = [i.get("dtype", "float32") for i in result.ncnn.meta.get("inputs", [])]
    feeds = [t.detach().numpy().astype(np.int32 if k < len(kinds) and kinds[k] == "int32" else np.float32)
             for k, t in enumerate(inputs.values())]
    return run_layout(param, bin_, feeds, result.ncnn.meta)


def _reasons(result) -> str:
    counts: dict[str, int] = {}
    for d in result.errors:
        key = f"{d.op} ({d.module or '<root>'}): {d.reason}"[:220]
        counts[key] = counts.get(key, 0) + 1
    return "; ".join(f"{k} ×{v}" for k, v in counts.items())[:600]


def _export(case, dialect: str, dynamic: bool):
    import torch

    shapes = None
    if dynamic:
        lo, hi = case.seq_range
        n = torch.export.Dim("seq", min=lo, max=hi)
        shapes = {k: ({case.seq_dims[k]: n} if k in case.seq_dims else None) for k in case.inputs}
    ep = torch.export.export(case.model, (), dict(case.inputs), dynamic_shapes=shapes, strict=False)
    return ep.run_decompositions() if dialect == "core" else ep


def one_ours(family: str, mask: bool, dialect: str, work: Path) -> dict:
    """pt2ncnn on one case (runs in a child process)."""
    import torch

    from engine.convert import ConvertOptions, convert
    from tests.benchmarks.transformers_zoo import FAMILIES, LENGTH, OTHER_LENGTHS

    rec: dict = {}
    case = FAMILIES[family][0](mask)
    case.model.eval()
    want = _reference(case, case.inputs)
    modes = [("static", False)] + ([("dynamic", True)] if case.make is not None else [])
    for mode, dynamic in modes:
        t0 = time.perf_counter()
        try:
            ep = _export(case, dialect, dynamic)
            pt2 = work / f"{mode}.pt2"
            torch.export.save(ep, str(pt2))
        except Exception as e:  # torch's export, not our conversion
            rec[mode] = {"status": "export failed", "detail": f"{type(e).__name__}: {str(e)[:200]}"}
            continue
        r: dict = {"export_s": round(time.perf_counter() - t0, 1)}
        for fp16 in ((False, True) if mode == "static" else (False,)):
            t1 = time.process_time()
            result = convert(str(pt2), ConvertOptions(fp16=fp16))
            key = "fp16" if fp16 else "fp32"
            r[f"{key}_convert_s"] = round(time.process_time() - t1, 2)
            if not result.ok:
                r[key] = {"status": "unconverted", "detail": _reasons(result)}
                continue
            param, bin_ = work / f"{mode}_{key}.ncnn.param", work / f"{mode}_{key}.ncnn.bin"
            result.write(param, bin_)
            r["layers"] = result.layer_count
            lengths = [LENGTH] + (list(OTHER_LENGTHS) if dynamic else [])
            errs = {}
            for n in lengths:
                inputs = case.inputs if n == LENGTH else case.make(n)
                expected = want if n == LENGTH else _reference(case, inputs)
                try:
                    got = _run_ours(result, param, bin_, inputs)
                    errs[n] = _compare(got, expected)
                except AssertionError as e:
                    errs[n] = str(e)[:200]
            bad = [v for v in errs.values() if isinstance(v, str) or v > TOL[fp16]]
            r[key] = {"status": "match" if not bad else "mismatch", "errors": errs}
        rec[mode] = r
    return rec


def one_pnnx(family: str, mask: bool, work: Path) -> dict:
    """The pnnx CLI on one case: TorchScript trace → pnnx → ncnn, compared the same way."""
    import numpy as np
    import torch

    from tests.benchmarks.transformers_zoo import FAMILIES, LENGTH, OTHER_LENGTHS

    case = FAMILIES[family][0](mask)
    model = case.model.eval()
    names = list(case.inputs)

    class Positional(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, *xs):
            return tuple(_flatten(self.m(**dict(zip(names, xs)))))

    args = tuple(case.inputs.values())
    try:
        with torch.no_grad():
            traced = torch.jit.trace(Positional().eval(), args, check_trace=False, strict=False)
        traced.save(str(work / "model.pt"))
    except Exception as e:
        return {"status": "trace failed", "detail": f"{type(e).__name__}: {str(e)[:200]}"}

    def shape_arg(inputs) -> str:
        return ",".join("[" + ",".join(str(d) for d in t.shape) + "]" + ("i64" if not t.is_floating_point() else "f32")
                        for t in inputs.values())

    cmd = [str(PNNX), "model.pt", "inputshape=" + shape_arg(case.inputs), "fp16=0"]
    if case.make is not None:
        cmd.append("inputshape2=" + shape_arg(case.make(OTHER_LENGTHS[1])))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return {"status": "crashed", "detail": "pnnx ran over 900 s"}
    rec: dict = {"convert_s": round(time.time() - t0, 1)}
    param, bin_ = work / "model.ncnn.param", work / "model.ncnn.bin"
    if p.returncode != 0 or not param.exists():
        lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
        return rec | {"status": "unconverted", "detail": f"exit {p.returncode}: " + " | ".join(lines[-3:])[:300]}
    text = param.read_text()
    leftovers = sorted({ln.split()[0] for ln in text.splitlines()[2:] if ln.split() and "." in ln.split()[0]})
    rec["layers"] = len(text.splitlines()) - 2
    if leftovers:
        rec["left"] = leftovers
    lengths = [LENGTH] + (list(OTHER_LENGTHS) if case.make is not None else [])
    errs = {}
    for n in lengths:
        inputs = case.inputs if n == LENGTH else case.make(n)
        expected = _reference(case, inputs)
        feeds = [_batchless(t.numpy().astype(np.float32 if t.is_floating_point() else np.int32))
                 for t in inputs.values()]
        code = ("import sys, json, numpy as np\nsys.path.insert(0, %r)\nfrom tests.ncnn_runtime import run\n"
                "feeds = [np.load(f) for f in sys.argv[1:]]\n"
                "out = run(%r, %r, {f'in{k}': a for k, a in enumerate(feeds)}, [f'out{k}' for k in range(%d)])\n"
                "np.savez('got.npz', *out)\n") % (str(ROOT), str(param), str(bin_), len(expected))
        files = []
        for k, f in enumerate(feeds):
            np.save(work / f"in{k}.npy", f)
            files.append(str(work / f"in{k}.npy"))
        # ncnn may crash on a model it cannot run: run it in its own process
        q = subprocess.run([sys.executable, "-c", code, *files], cwd=work, capture_output=True, text=True, timeout=600)
        if q.returncode != 0:
            errs[n] = ("ncnn crashed" if q.returncode < 0 else
                       ((q.stderr.strip().splitlines() or ["ncnn failed"])[-1])[:160])
            continue
        got = np.load(work / "got.npz")
        try:
            errs[n] = _compare([got[f"arr_{k}"] for k in range(len(expected))], expected)
        except AssertionError as e:
            errs[n] = str(e)[:200]
    bad = [v for v in errs.values() if isinstance(v, str) or v > TOL[False]]
    return rec | {"status": "match" if not bad else "mismatch", "errors": errs}


# ----------------------------------------------------------------------------- driver
def _child(kind: str, family: str, mask: bool, dialect: str, timeout: int) -> dict:
    cmd = [sys.executable, __file__, "--one", kind, "--families", family, "--mask", str(int(mask)),
           "--dialect", dialect]
    with tempfile.TemporaryDirectory(prefix="hf_convert_") as work:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        try:
            r = subprocess.run(cmd + ["--work", work], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                               env=env)
        except subprocess.TimeoutExpired:
            return {"status": "crashed", "detail": f"over {timeout} s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"status": "crashed", "detail": f"exit {r.returncode}: " + (r.stderr.strip().splitlines() or [""])[-1][:300]}


def _fmt_err(res: dict | None) -> str:
    if not res:
        return "—"
    if res.get("status") in ("unconverted", "export failed", "crashed", "trace failed"):
        return {"unconverted": "❌ not converted", "export failed": "— export failed", "crashed": "❌ crashed",
                "trace failed": "— trace failed"}[res["status"]]
    errs = res.get("errors", {})
    vals = [v for v in errs.values()]
    if any(isinstance(v, str) for v in vals):
        return "❌ " + next(v for v in vals if isinstance(v, str))[:60]
    worst = max(vals) if vals else float("nan")
    mark = "✅" if res["status"] == "match" else "❌"
    return f"{mark} {worst:.1e}" + (f" ({len(vals)} lengths)" if len(vals) > 1 else "")


def _row(r: dict) -> str:
    s, d = r.get("static", {}), r.get("dynamic", {})
    detail = "; ".join(x.get("detail", "") for x in (s.get("fp32", {}), s.get("fp16", {}), d.get("fp32", {}),
                                                      s, d) if isinstance(x, dict) and x.get("detail"))
    pn = r.get("pnnx", {})
    pdetail = pn.get("detail", "") or (("left in the model: " + ", ".join(pn["left"])) if pn.get("left") else "")
    return (f"| {r['family']} | {r['inputs']} | {r['dialect']} | {_fmt_err(s.get('fp32'))} | {_fmt_err(s.get('fp16'))} | "
            f"{_fmt_err(d.get('fp32')) if d else '(static model)'} | {s.get('layers', '—')} | "
            f"{_fmt_err(pn) if r['dialect'] == 'export()' else ''} | {(detail + ' ' + pdetail).strip()[:400]} |")


def _ok(r: dict) -> bool:
    s, d = r.get("static", {}), r.get("dynamic")
    good = all(s.get(k, {}).get("status") == "match" for k in ("fp32", "fp16"))
    return good and (d is None or d.get("fp32", {}).get("status") == "match")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default="", help="comma-separated families (default: all)")
    ap.add_argument("--no-pnnx", action="store_true", help="skip the pnnx column")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per case")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--mask", default="0", help=argparse.SUPPRESS)
    ap.add_argument("--dialect", default="training", help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--report", action="store_true", help="rewrite the Markdown table from the last JSON only")
    args = ap.parse_args()
    if args.report:
        return write_report(json.loads((RESULTS / "transformers_convert.json").read_text()))
    if args.one:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        work, mask = Path(args.work), args.mask == "1"
        rec = one_pnnx(args.families, mask, work) if args.one == "pnnx" else one_ours(args.families, mask,
                                                                                        args.dialect, work)
        print(json.dumps(rec))
        return 0
    from tests.benchmarks.transformers_zoo import FAMILIES

    names = args.families.split(",") if args.families else list(FAMILIES)
    rows = []
    for family in names:
        _, takes_mask = FAMILIES[family]
        for mask in ((False, True) if takes_mask else (False,)):
            pn = None if args.no_pnnx else _child("pnnx", family, mask, "training", args.timeout)
            for dialect in ("training", "core"):
                t0 = time.time()
                rec = {"family": family, "inputs": "ids + mask" if mask else ("ids" if takes_mask else "—"),
                       "dialect": "export()" if dialect == "training" else "core ATen"}
                rec.update(_child("ours", family, mask, dialect, args.timeout))
                if pn is not None and dialect == "training":
                    rec["pnnx"] = pn
                rows.append(rec)
                print(f"[{time.time() - t0:.0f}s] {_row(rec)}", flush=True)
    store = RESULTS / "transformers_convert.json"
    if args.families and store.exists():  # a subset re-run updates its rows of the last full run
        fresh = {(r["family"], r["inputs"], r["dialect"]): r for r in rows}
        old = json.loads(store.read_text())
        rows = [fresh.pop((r["family"], r["inputs"], r["dialect"]), r) for r in old] + list(fresh.values())
    store.write_text(json.dumps(rows, indent=1) + "\n")
    return write_report(rows)


def write_report(rows: list) -> int:
    """Write the Markdown table of ``rows`` (the JSON records)."""
    import ncnn
    import timm
    import torch
    import transformers

    ok = [r for r in rows if _ok(r)]
    pn_rows = [r for r in rows if r["dialect"] == "export()" and "pnnx" in r]
    pn_ok = [r for r in pn_rows if r["pnnx"].get("status") == "match"]
    text = ["# Transformer families through pt2ncnn and pnnx", "",
            f"Generated by `tests/benchmarks/check_transformers_convert.py` on {time.strftime('%Y-%m-%d %H:%M')}; "
            f"torch {torch.__version__}, transformers {transformers.__version__}, timm {timm.__version__}, "
            f"ncnn {ncnn.__version__}. Small configs, seeded random weights, `eval()`; ncnn with exact options "
            "(fp32, one thread). Relative error = max |ncnn − PyTorch| / max |PyTorch| over all outputs; match = "
            "≤ 1e-4 with fp32 weights, ≤ 5e-3 with fp16 weights. *dynamic*: exported with the sequence length as "
            "`torch.export.Dim`, run at the exported length (12) and at 5 and 19 (worst error shown). pnnx: "
            "`torch.jit.trace` → `pnnx model.pt inputshape=… inputshape2=…` (fp32 weights) → the same runtime, "
            "at the same lengths.", "",
            f"**pt2ncnn: {len(ok)}/{len(rows)} rows convert and match** (both weight precisions, and at 3 lengths "
            f"where the length is dynamic). **pnnx: {len(pn_ok)}/{len(pn_rows)}.**", "",
            "| family | inputs | dialect | fp32 weights | fp16 weights | dynamic length (fp32) | ncnn layers | pnnx | "
            "detail |", "|---|---|---|---|---|---|---|---|---|"]
    text += [_row(r) for r in rows]
    out = RESULTS / "transformers_convert.md"
    out.write_text("\n".join(text) + "\n")
    print(f"{len(ok)}/{len(rows)} match (pnnx {len(pn_ok)}/{len(pn_rows)}); wrote {out}")
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
