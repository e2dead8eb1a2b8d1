"""Check: torchvision's custom operators that pt2ncnn converts (``torchvision.ops.DeformConv2d``
→ ncnn ``DeformableConv2D``) convert and match PyTorch, in both dialects.

torchvision does not import beside the test suite's torch, so these cases live here, run with
the benchmark virtualenv (torch 2.14.1 + torchvision 0.29.1), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_torchvision_ops.py

Each case is a small module built with seeded random weights, exported with
``torch.export.export`` on a seeded 1×C×H×W input (and ``run_decompositions()`` for the core
dialect: torchvision's op stays a custom op there), converted in-process with fp32 weights, run
by the ncnn runtime with exact options. Match = relative error ≤ 1e-4 (as the test suite's
harness). Refusals that are expected (more groups than the runtime has) must be refused.
Writes ``tests/benchmarks/results/torchvision_ops.md``.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
TOL = 1e-4

#: name → (DeformConv2d kwargs, in channels, out channels, use a mask, conversion expected)
CASES = {
    "dcn_v1": (dict(kernel_size=3, padding=1), 3, 4, False, True),
    "dcn_v2_mask": (dict(kernel_size=3, padding=1), 3, 4, True, True),
    "stride2_dilation2": (dict(kernel_size=3, stride=2, padding=2, dilation=2), 4, 6, True, True),
    "kernel_1x3_no_bias": (dict(kernel_size=(1, 3), padding=(0, 1), bias=False), 3, 5, True, True),
    "kernel_5": (dict(kernel_size=5, padding=2), 2, 3, False, True),
    "groups_2_refused": (dict(kernel_size=3, padding=1, groups=2), 4, 4, False, False),
}


def _module(kwargs: dict, in_c: int, out_c: int, mask: bool):
    import torch
    from torchvision.ops import DeformConv2d

    k = kwargs["kernel_size"]
    kh, kw = (k, k) if isinstance(k, int) else k
    stride, padding, dilation = (kwargs.get(key, d) for key, d in (("stride", 1), ("padding", 0), ("dilation", 1)))

    class Block(torch.nn.Module):
        """Offsets (and mask) predicted by plain convolutions, as in DCN blocks."""

        def __init__(self):
            super().__init__()
            conv = dict(kernel_size=(kh, kw), stride=stride, padding=padding, dilation=dilation)
            self.offset = torch.nn.Conv2d(in_c, 2 * kh * kw, **conv)
            self.mask = torch.nn.Conv2d(in_c, kh * kw, **conv) if mask else None
            self.dcn = DeformConv2d(in_c, out_c, **kwargs)

        def forward(self, x):
            offset = self.offset(x)
            if self.mask is None:
                return self.dcn(x, offset)
            return self.dcn(x, offset, torch.sigmoid(self.mask(x)))

    torch.manual_seed(0)
    m = Block().eval()
    with torch.no_grad():  # offsets of a pixel or two: bilinear sampling between pixels matters
        m.offset.weight.mul_(4.0)
    return m


def check(name: str, dialect: str, work: Path) -> dict:
    import numpy as np
    import torch

    from engine.convert import ConvertOptions, convert
    from tests.ncnn_runtime import run

    kwargs, in_c, out_c, mask, expected = CASES[name]
    m = _module(kwargs, in_c, out_c, mask)
    x = torch.randn(1, in_c, 11, 12, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = m(x).numpy()
    ep = torch.export.export(m, (x,))
    if dialect == "core":
        ep = ep.run_decompositions()
    path = work / f"{name}_{dialect}.pt2"
    torch.export.save(ep, str(path))
    result = convert(str(path), ConvertOptions(fp16=False))
    rec = {"case": name, "dialect": dialect, "layers": result.layer_count}
    if not result.ok:
        reasons = "; ".join(sorted({d.reason for d in result.errors}))
        return rec | {"status": "refused" if not expected else "unconverted", "detail": reasons[:200]}
    if not expected:
        return rec | {"status": "converted but should be refused"}
    param, bin_ = work / f"{name}_{dialect}.ncnn.param", work / f"{name}_{dialect}.ncnn.bin"
    result.write(param, bin_)
    (got,) = run(param, bin_, {"in0": x.numpy()[0]}, ["out0"])
    err = float(np.abs(np.asarray(got, np.float64).reshape(want.shape) - want).max() / max(np.abs(want).max(), 1e-6))
    types = [op.type for op in result.ncnn.ops]
    return rec | {"status": "match" if err <= TOL and "DeformableConv2D" in types else "mismatch", "rel_err": err}


def main() -> int:
    import torch
    import torchvision

    rows = []
    with tempfile.TemporaryDirectory(prefix="tv_ops_") as work:
        for name in CASES:
            for dialect in ("training", "core"):
                rows.append(check(name, dialect, Path(work)))
                r = rows[-1]
                print(f"{name:22s} {dialect:8s} {r['status']:10s} {r.get('rel_err', '')}", flush=True)
    good = [r for r in rows if r["status"] in ("match", "refused")]
    text = ["# torchvision operators through pt2ncnn", "",
            f"Generated by `tests/benchmarks/check_torchvision_ops.py` on {time.strftime('%Y-%m-%d %H:%M')}; "
            f"torch {torch.__version__}, torchvision {torchvision.__version__}. fp32 weights, ncnn with exact "
            f"options; match = relative error ≤ {TOL:g}.", "",
            f"**{len(good)}/{len(rows)} as expected** (converted and matching, or refused where the runtime has no "
            "equivalent).", "",
            "| case | dialect | result | ncnn layers | rel. error | detail |", "|---|---|---|---|---|---|"]
    for r in rows:
        err = f"{r['rel_err']:.1e}" if "rel_err" in r else "—"
        text.append(f"| {r['case']} | {r['dialect']} | {r['status']} | {r['layers']} | {err} | {r.get('detail', '')} |")
    (RESULTS / "torchvision_ops.md").write_text("\n".join(text) + "\n")
    print(f"{len(good)}/{len(rows)} as expected")
    return 0 if len(good) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
