"""Breadth check: ``pt2ncnn verify`` cries no wolf on any torchvision classifier, and still names
a sabotaged layer.

Run with the benchmark virtualenv (torch 2.14.1 + torchvision 0.29.1), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_verify.py [--models a,b]
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_verify.py --family optical_flow
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_verify.py --family segmentation
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_verify.py --family timm
    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_verify.py --family transformers
    PYTHONPATH=. /work/extvenv/bin/python tests/benchmarks/check_torchvision_verify.py --family ultralytics
    PYTHONPATH=. /work/extvenv/bin/python tests/benchmarks/check_torchvision_verify.py --family diffusers

Each model runs in its own process: built and exported like ``check_torchvision_convert.py``
(seeded random weights, calibrated BatchNorm, TRAINING dialect, 1×3×224×224; ``--family
optical_flow``: RAFT on two 1×3×128×128 images, ``torchvision_verify_optical_flow.md``; ``--family
segmentation``: DeepLabV3, FCN, LR-ASPP, ``torchvision_verify_segmentation.md``; ``--family
ultralytics``: YOLO v3–v26 and RT-DETR on a 1×3×320×320 image), then the real
command ``pt2ncnn verify MODEL.pt2 --json`` runs with fp16 weights and with fp32 weights. A
correct conversion must give exit status 0 and no divergent layer in both. Then the fp32 model
is written and one activation layer in its middle is sabotaged in the .param (ReLU, GELU, Swish,
HardSwish, Clip... turned Sigmoid; a Sigmoid turned TanH; when every activation is fused, a
convolution's fused ReLU, ``9=1``, turned sigmoid, ``9=4``): ``pt2ncnn verify --ncnn-param``
must exit 1 and name that layer first (or a layer run together with it, when the sabotaged
layer has no PyTorch counterpart of its own). Writes ``tests/benchmarks/results/
torchvision_verify.md`` and ``.json``; a run with ``--models`` replaces those models' rows.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
ACTIVATIONS = ("ReLU", "GELU", "Swish", "HardSwish", "Clip", "Mish", "ELU", "HardSigmoid", "Sigmoid")


def _verify(args: list[str]) -> dict:
    """``pt2ncnn verify ... --json`` as a user runs it: exit status, seconds and the document."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "engine.cli.main", "verify", *args, "--json"], cwd=ROOT,
                       capture_output=True, text=True)
    rec = {"exit": p.returncode, "s": round(time.perf_counter() - t0, 1)}
    if p.returncode not in (0, 1):
        return rec | {"error": (p.stderr.strip().splitlines() or [""])[-1][:200]}
    d = json.loads(p.stdout)
    fd = d["first_divergent"]
    layers = d["layers"]
    owns = [x["own_max_rel"] for x in layers if x["own_max_rel"] is not None]
    return rec | {"ok": d["ok"], "first": fd["layer"] if fd else None,
                  "first_with": fd["isolated_with"] if fd else [],
                  "divergent": sum(x["status"] in ("divergent", "failed") for x in layers),
                  "layers": len(layers), "compared": sum(x["max_rel"] is not None for x in layers),
                  "worst_own": max(owns) if owns else None, "out_rel": max(o["max_rel"] or 0 for o in d["outputs"]),
                  "runner": d.get("torch_runner")}


def sabotage(param: Path, out: Path) -> str | None:
    """Break one activation in the middle of the model; returns the layer's name."""
    lines = param.read_text().splitlines()
    acts = [k for k, ln in enumerate(lines[2:], 2) if ln.split()[0] in ACTIVATIONS]
    fused = [k for k, ln in enumerate(lines[2:], 2)
             if ln.split()[0] in ("Convolution", "ConvolutionDepthWise", "InnerProduct") and " 9=1" in ln]
    if acts:
        k = acts[len(acts) // 2]
        old = lines[k].split()[0]
        lines[k] = ("TanH" if old == "Sigmoid" else "Sigmoid").ljust(len(old)) + lines[k][len(old):]
        # a Clip's / ELU's params mean nothing to Sigmoid / TanH: drop them
        lines[k] = re.sub(r"\s+-?\d+=\S+", "", lines[k])
    elif fused:
        k = fused[len(fused) // 2]
        lines[k] = lines[k].replace(" 9=1", " 9=4", 1)
    else:
        return None
    out.write_text("\n".join(lines) + "\n")
    return lines[k].split()[1]


def one(name: str, work: Path, family: str = "classification") -> dict:
    from engine.convert import ConvertOptions, convert
    from tests.benchmarks.check_torchvision_convert import export_model

    rec: dict = {"model": name}
    try:
        path, _, _ = export_model(name, "training", work, family)
    except Exception as e:  # torch's export, not ours
        return rec | {"status": "export failed", "detail": f"{type(e).__name__}: {str(e)[:160]}"}
    rec["fp16"] = _verify([str(path)])
    rec["fp32"] = _verify([str(path), "--fp16", "0"])
    result = convert(str(path), ConvertOptions(fp16=False, snapshots=False))
    if result.ok:
        param, bin_ = work / f"{name}.ncnn.param", work / f"{name}.ncnn.bin"
        result.write(param, bin_)
        layer = sabotage(param, work / "sabotaged.param")
        if layer is not None:
            s = _verify([str(path), "--ncnn-param", str(work / "sabotaged.param"), "--ncnn-bin", str(bin_)])
            s["layer"] = layer
            s["named"] = s.get("exit") == 1 and (s.get("first") == layer or layer in s.get("first_with", []))
            rec["sabotage"] = s
    clean = all(rec[k].get("exit") == 0 and rec[k].get("divergent") == 0 for k in ("fp16", "fp32"))
    rec["status"] = "clean" if clean else "false alarm" if any(
        rec[k].get("exit") == 1 or rec[k].get("divergent") for k in ("fp16", "fp32")) else "error"
    return rec


def _cell(v: dict | None) -> str:
    if not v:
        return "—"
    if "error" in v:
        return f"exit {v['exit']}: {v['error']}"
    mark = "✅" if v["exit"] == 0 and not v["divergent"] else f"❌ exit {v['exit']}, first {v['first']}"
    own = f"{v['worst_own']:.1e}" if v["worst_own"] is not None else "—"
    return f"{mark} ({v['compared']}/{v['layers']}, worst alone {own}, out {v['out_rel']:.1e}, {v['s']} s)"


def _row(r: dict) -> str:
    if r["status"] in ("export failed", "crashed"):
        return f"| {r['model']} | — {r['status']} | | | {r.get('detail', '')} |"
    s = r.get("sabotage")
    sab = "—" if s is None else (f"✅ {s['layer']} named, exit 1" if s.get("named") else
                                 f"❌ {s['layer']}: exit {s.get('exit')}, first {s.get('first')}")
    return f"| {r['model']} | {_cell(r.get('fp16'))} | {_cell(r.get('fp32'))} | {sab} | |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: all models of the family)")
    ap.add_argument("--family", choices=("classification", "optical_flow", "segmentation", "timm", "transformers", "ultralytics", "diffusers"), default="classification")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per model")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, Path(args.work), args.family)))
        return 0
    import torch

    from tests.benchmarks.check_torchvision_convert import (FAMILIES, family_models, family_versions, run_children,
                                                            store_rows)

    title = FAMILIES[args.family][1]
    names = family_models(args.family, args.models)
    rows = run_children(Path(__file__), names, ["--family", args.family], args.timeout, _row)
    out = RESULTS / ("torchvision_verify.md" if args.family == "classification" else f"torchvision_verify_{args.family}.md")
    rows = store_rows(out.with_suffix(".json"), rows, subset=bool(args.models))
    checked = [r for r in rows if r["status"] not in ("export failed", "crashed")]
    clean = [r for r in checked if r["status"] == "clean"]
    sabotaged = [r for r in checked if r.get("sabotage")]
    named = [r for r in sabotaged if r["sabotage"].get("named")]
    heading = {"timm": f"the smallest {title} of each timm architecture",
               "ultralytics": "every YOLO generation and task, and RT-DETR (Ultralytics, scale n)",
               "diffusers": "diffusers' UNets and VAE in small",
               "transformers": "the Hugging Face models of the conversion check (`transformers_zoo`)"}.get(
        args.family, f"every torchvision {title}")
    text = [f"# `pt2ncnn verify` on {heading}", "",
            f"Generated by `tests/benchmarks/check_torchvision_verify.py` on {time.strftime('%Y-%m-%d %H:%M')}; torch "
            f"{torch.__version__}, {family_versions(args.family)}. Seeded random weights (BatchNorm "
            "calibrated), TRAINING dialect, the package's sample input; `pt2ncnn verify MODEL.pt2 --json` with "
            "fp16 and with fp32 weights (default tolerances), then one activation of the fp32 model sabotaged in "
            "the .param and verified with `--ncnn-param`.", "",
            f"**{len(clean)}/{len(checked)} models verify clean with fp16 and fp32 weights (exit 0, no divergent "
            f"layer); the sabotaged layer is named first with exit 1 in {len(named)}/{len(sabotaged)}** "
            f"({len(rows) - len(checked)} did not export with torch or crashed).", "",
            "Cells: result (compared / ncnn layers, worst per-layer error alone, output error, seconds of the "
            "whole `pt2ncnn verify` process on a shared 2-core machine). An output error above the tolerance "
            "(fp16 1e-2, fp32 1e-4) with every layer right by itself is rounding adding up over a deep network: "
            "verify reports no divergent layer and exits 0 (README, verify).", "",
            "| model | fp16 weights | fp32 weights | sabotaged layer | detail |", "|---|---|---|---|---|"]
    text += [_row(r) for r in rows]
    out.write_text("\n".join(text) + "\n")
    print(f"{len(clean)}/{len(checked)} clean; sabotage named {len(named)}/{len(sabotaged)}; wrote {out}")
    return 0 if len(clean) == len(checked) and len(named) == len(sabotaged) else 1


if __name__ == "__main__":
    sys.exit(main())
