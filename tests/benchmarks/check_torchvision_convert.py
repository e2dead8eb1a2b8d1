"""Breadth check: every torchvision classification (or video classification, optical flow or
semantic segmentation) model converts to ncnn and matches PyTorch.

Run with the benchmark virtualenv (torch 2.14.1 + torchvision 0.29.1), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py [--models a,b] [--dialect core]
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family video [--models r3d_18]
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family optical_flow
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family segmentation
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family timm
    PYTHONPATH=. /work/extvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family ultralytics
    PYTHONPATH=. /work/extvenv/bin/python tests/benchmarks/check_torchvision_convert.py --family diffusers

(``/work/extvenv``: the benchmark virtualenv plus ``ultralytics==8.4.190 diffusers==0.42.1``, README.)

Each model runs in its own process (a crash or a memory peak stays there): built like the
conversion benchmark's models (``convert_zoo``: seeded random weights, non-trivial layer scales
and heads, calibrated BatchNorm), exported with ``torch.export.export`` on a seeded 1×3×224×224
input (299 for Inception-v3; video models: a 1×3×16×112×112 clip, 16×224×224 for MViT, S3D
and Swin3D, which need it; optical flow: RAFT's last flow after 12 refinements, of two
1×3×128×128 images; segmentation: the ``out`` map of a 1×3×224×224 image, no auxiliary head;
timm: ``convert_zoo.TIMM_MODELS``, the smallest model of nearly every timm architecture, at its
default input size; ultralytics: ``convert_zoo.ULTRALYTICS_MODELS``, every YOLO generation and
task at scale n and RT-DETR, built from their configs, on a 1×3×320×320 image, every output of
the inference head compared; diffusers: ``convert_zoo.DIFFUSERS_MODELS``, a denoising UNet, a
text-conditioned UNet and a VAE's encoder and decoder in small),
optionally ``run_decompositions()``, converted in-process with fp32 weights, then run by the ncnn runtime
with exact options (fp32, no packing — segmentation, timm, ultralytics and diffusers: ncnn's default packed layout,
without which its x86 kernel for dilated 3×3 convolutions crashes — one thread), fed and
read along the batch axes the conversion chose. Match = relative error (max |ncnn − PyTorch|
/ max |PyTorch|, the worst output) ≤ 1e-3. Models whose export fails are listed as such (torch's problem, not
ours). Writes ``tests/benchmarks/results/torchvision_convert[_video|_optical_flow|_segmentation|_timm|_ultralytics][_core].md`` and ``.json``;
a run with ``--models`` replaces those models' rows of the last run and keeps the others.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
TOL = 1e-3
#: per family: the torchvision module listing its models and the title of the results page
FAMILIES = {"classification": ("models", "classification model"), "video": ("models.video", "video classification model"),
            "optical_flow": ("models.optical_flow", "optical flow model"),
            "segmentation": ("models.segmentation", "semantic segmentation model"),
            "timm": ("", "timm image classifier"), "ultralytics": ("", "Ultralytics YOLO / RT-DETR model"),
            "diffusers": ("", "diffusers UNet / VAE"),
            "transformers": ("", "Hugging Face model")}  # verify only: check_transformers_convert converts them


def family_models(family: str, models: str = "") -> list[str]:
    """The models of a run: ``models`` (comma-separated) if given, else every model of the family."""
    if models:
        return models.split(",")
    if family == "timm":
        from tests.benchmarks.convert_zoo import TIMM_MODELS
        return list(TIMM_MODELS)
    if family == "ultralytics":
        from tests.benchmarks.convert_zoo import ULTRALYTICS_MODELS
        return list(ULTRALYTICS_MODELS)
    if family == "diffusers":
        from tests.benchmarks.convert_zoo import DIFFUSERS_MODELS
        return list(DIFFUSERS_MODELS)
    if family == "transformers":  # each family, and with an attention mask where it takes one
        from tests.benchmarks.transformers_zoo import FAMILIES as HF
        return [n for f, (_, masked) in HF.items() for n in ([f, f"{f}+mask"] if masked else [f])]
    import importlib

    import torchvision

    return sorted(torchvision.models.list_models(module=importlib.import_module(f"torchvision.{FAMILIES[family][0]}")))


def family_versions(family: str) -> str:
    """The model library's version, for a results page."""
    if family in ("timm", "transformers", "ultralytics", "diffusers"):
        lib = __import__(family)
        return f"{family} {lib.__version__}"
    import torchvision

    return f"torchvision {torchvision.__version__}"


#: ``--dynamic``: the image's height and width exported as multiples of 32 (64 for models with
#: a stride-64 level, ``*-p6``), up to 1280, and the size the converted model is then run at
#: instead of the traced one
DYNAMIC_MAX, DYNAMIC_RUN = 1280, (256, 448)


def export_model(name: str, dialect: str, work: Path, family: str = "classification", dynamic: bool = False):
    """Build torchvision model ``name`` (``convert_zoo.classifier``: seeded, calibrated), export it
    on its seeded input and save ``work/<name>.pt2``: (path, input, PyTorch's output tensors, in
    the order the program returns them). ``dynamic``: the first input's height and width are
    exported as ``torch.export.Dim`` multiples of 32, and the input and outputs returned are at
    :data:`DYNAMIC_RUN` instead. Raises what torch raises."""
    import torch

    from tests.benchmarks.convert_zoo import classifier

    if family == "transformers":
        return _export_transformers(name, dialect, work)
    model, x = classifier(name, family)
    inputs = x if isinstance(x, tuple) else (x,)
    shapes = None
    if dynamic:
        step = 64 if name.endswith("-p6") else 32
        h, w = (torch.export.Dim(n, min=2, max=DYNAMIC_MAX // step) for n in "hw")
        shapes = ({2: step * h, 3: step * w},) + (None,) * (len(inputs) - 1)
    with torch.no_grad():
        run = inputs if not dynamic else (torch.rand(*inputs[0].shape[:2], *DYNAMIC_RUN,
                                                     generator=torch.Generator().manual_seed(2)),) + inputs[1:]
        want = _tensors(model(*run))
    ep = torch.export.export(model, inputs, dynamic_shapes=shapes)
    if dialect == "core":
        ep = ep.run_decompositions()
    path = work / f"{name}.pt2"
    torch.export.save(ep, str(path))
    del model, ep
    return path, run, want


def _tensors(out) -> list:
    """The tensors of a model's output (a tensor, or tuples / lists / dicts of them), in order."""
    import torch

    return [t.numpy() for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _export_transformers(name: str, dialect: str, work: Path):
    """A ``transformers_zoo`` family (``<family>+mask``: with its attention mask), static, saved
    as ``work/<name>.pt2``: (path, inputs, None — the verify check needs no output here)."""
    import torch

    from tests.benchmarks.transformers_zoo import FAMILIES as HF

    family, _, mask = name.partition("+")
    case = HF[family][0](bool(mask))
    case.model.eval()
    ep = torch.export.export(case.model, (), dict(case.inputs), strict=False)
    if dialect == "core":
        ep = ep.run_decompositions()
    path = work / f"{name}.pt2"
    torch.export.save(ep, str(path))
    return path, tuple(case.inputs.values()), None


def one(name: str, dialect: str, work: Path, family: str = "classification", dynamic: bool = False) -> dict:
    """Build, export, convert and compare one model (runs in a child process)."""
    from engine.convert import ConvertOptions, convert
    from tests.ncnn_runtime import run_layout

    rec: dict = {"model": name}
    t0 = time.perf_counter()
    try:
        path, inputs, want = export_model(name, dialect, work, family, dynamic)
    except Exception as e:  # torch's export, not our conversion
        return rec | {"status": "export failed", "detail": f"{type(e).__name__}: {str(e)[:160]}"}
    rec["export_s"] = round(time.perf_counter() - t0, 1)
    t1 = time.process_time()
    result = convert(str(path), ConvertOptions(fp16=False))
    rec["convert_cpu_s"] = round(time.process_time() - t1, 2)
    rec["layers"] = result.layer_count
    if not result.ok:
        reasons: dict[str, int] = {}
        for d in result.errors:
            key = f"{d.op}: {d.reason}"[:200]
            reasons[key] = reasons.get(key, 0) + 1
        return rec | {"status": "unconverted", "detail": "; ".join(f"{k} ×{v}" for k, v in reasons.items())[:400]}
    param, bin_ = work / f"{name}.ncnn.param", work / f"{name}.ncnn.bin"
    result.write(param, bin_)
    # along the batch axes chosen; DeepLabV3's dilated 3x3 convolutions need ncnn's packed layout
    got = run_layout(param, bin_, [x.numpy() for x in inputs], result.ncnn.meta,
                     packed=family in ("segmentation", "timm", "ultralytics", "diffusers"))
    if len(got) != len(want):
        return rec | {"status": "mismatch", "detail": f"{len(got)} ncnn outputs for PyTorch's {len(want)}"}
    err = max(_rel_err(g, w) for g, w in zip(got, want))
    rec["rel_err"] = err
    rec["status"] = "match" if err <= TOL else "mismatch"
    if err > TOL:  # how ill-conditioned the model is: PyTorch's own float32 against float64
        rec["detail"] = f"PyTorch's float32 output is {_fp64_error(name, family, want):.1e} from float64"
    return rec


def _rel_err(got, want) -> float:
    """max |got − want| / max |want| (``got`` in ``want``'s shape)."""
    import numpy as np

    got = np.asarray(got, np.float64).reshape(want.shape)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-6)) if want.size else 0.0


def _fp64_error(name: str, family: str, want) -> float:
    """Relative error of PyTorch's float32 outputs ``want`` against the same model in float64."""
    import torch

    from tests.benchmarks.convert_zoo import classifier

    model, x = classifier(name, family)
    inputs = x if isinstance(x, tuple) else (x,)
    with torch.no_grad():
        ref = _tensors(model.double()(*(t.double() for t in inputs)))
    return max(_rel_err(w, r) for w, r in zip(want, ref))


def run_children(script: Path, names: list[str], extra: list[str], timeout: int, row) -> list[dict]:
    """Run ``script --one NAME ... --work DIR`` for each model in its own process (a crash or a
    memory peak stays there); its last JSON line is the model's record. Prints ``row(record)``
    as each finishes."""
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"{script.stem}_") as work:
        for k, name in enumerate(names, 1):
            t0 = time.time()
            cmd = [sys.executable, str(script), "--one", name, *extra, "--work", work]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                rec = json.loads(lines[-1]) if r.returncode == 0 and lines else {
                    "model": name, "status": "crashed",
                    "detail": f"exit {r.returncode}: " + (r.stderr.strip().splitlines() or [""])[-1][:200]}
            except subprocess.TimeoutExpired:
                rec = {"model": name, "status": "crashed", "detail": f"over {timeout} s"}
            for f in Path(work).iterdir():
                shutil.rmtree(f) if f.is_dir() else f.unlink()
            rows.append(rec)
            print(f"[{k}/{len(names)} {time.time() - t0:.0f}s] {row(rec)}", flush=True)
    return rows


def store_rows(store: Path, rows: list[dict], *, subset: bool) -> list[dict]:
    """Save the records as JSON; a subset re-run replaces its models' rows of the last full run."""
    if subset and store.exists():
        fresh = {r["model"]: r for r in rows}
        rows = [fresh.pop(r["model"], r) for r in json.loads(store.read_text())] + list(fresh.values())
    store.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def _row(r: dict) -> str:
    err = f"{r['rel_err']:.1e}" if "rel_err" in r else "—"
    mark = {"match": "✅", "mismatch": "❌ mismatch", "unconverted": "❌ not converted",
            "export failed": "— export failed", "crashed": "❌ crashed"}.get(r["status"], r["status"])
    return (f"| {r['model']} | {mark} | {r.get('layers', '—')} | {err} | {r.get('convert_cpu_s', '—')} | "
            f"{r.get('detail', '')} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: all models of the family)")
    ap.add_argument("--family", choices=tuple(f for f in FAMILIES if f != "transformers"), default="classification")
    ap.add_argument("--dialect", choices=("training", "core"), default="training")
    ap.add_argument("--dynamic", action="store_true",
                    help=f"export the image's height and width as multiples of 32 and run at {DYNAMIC_RUN}")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per model")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.dialect, Path(args.work), args.family, args.dynamic)))
        return 0
    title = FAMILIES[args.family][1]
    names = family_models(args.family, args.models)
    fresh = run_children(Path(__file__), names, ["--dialect", args.dialect, "--family", args.family]
                         + ["--dynamic"] * args.dynamic, args.timeout, _row)
    suffix = ("" if args.family == "classification" else f"_{args.family}") + (
        "" if args.dialect == "training" else "_core") + ("_dynamic" if args.dynamic else "")
    out = RESULTS / f"torchvision_convert{suffix}.md"
    rows = store_rows(out.with_suffix(".json"), fresh, subset=bool(args.models))
    exported = [r for r in rows if r["status"] != "export failed"]
    matched = [r for r in exported if r["status"] == "match"]
    import torch

    heading = {"timm": f"The smallest {title} of each timm architecture",
               "ultralytics": "Every YOLO generation and task (scale n) and RT-DETR",
               "diffusers": "diffusers' UNets and VAE in small"}.get(args.family, f"Every torchvision {title}")
    dynamic = (f" Exported with a dynamic height and width (`torch.export.Dim` multiples of 32 — 64 for the P6 "
               f"models — up to {DYNAMIC_MAX}), converted once, and run by ncnn and PyTorch at {DYNAMIC_RUN[0]}×{DYNAMIC_RUN[1]}, "
               "not the traced size." if args.dynamic else "")
    text = [f"# {heading} through pt2ncnn ({args.dialect} dialect{', dynamic size' if args.dynamic else ''})", "",
            f"Generated by `tests/benchmarks/check_torchvision_convert.py` on {time.strftime('%Y-%m-%d %H:%M')}; "
            f"torch {torch.__version__}, {family_versions(args.family)}. Seeded random weights (BatchNorm "
            f"calibrated), fp32 weights, ncnn with exact options; match = relative error ≤ {TOL:g}.{dynamic}", "",
            f"**{len(matched)}/{len(exported)} exported models convert and match PyTorch** "
            f"({len(rows) - len(exported)} did not export with torch).", "",
            "| model | result | ncnn layers | rel. error | convert CPU s | detail |", "|---|---|---|---|---|---|"]
    text += [_row(r) for r in rows]
    out.write_text("\n".join(text) + "\n")
    print(f"{len(matched)}/{len(exported)} match; wrote {out}")
    # the exit code speaks for the models of this run (a --models run keeps other rows of the last)
    failed = [r["model"] for r in fresh if r["status"] not in ("match", "export failed")]
    if failed:
        print(f"not matching in this run: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
