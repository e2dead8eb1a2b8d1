"""The least any converter of a ``.pt2`` must spend: start Python, import numpy, read every
weight from the archive checking its zip CRC, convert it to fp16 (pt2ncnn's bit arithmetic)
and write an ``.ncnn.bin`` (fp16) and the fp32 bytes of a ``.pnnx.bin`` — no graph work, no
engine import. Issue 13's "2x faster than ddd4dc1" is bounded below by this: a classifier whose
target (half of ddd4dc1's CPU time, ``bench_convert_speed.py``) is near or under its floor
cannot get there by speeding up the conversion.

    /work/benchvenv/bin/python tests/benchmarks/bench_convert_floor.py MODEL.pt2 [...] [--runs 5]
    /work/benchvenv/bin/python tests/benchmarks/bench_convert_floor.py --baseline /work/wt/ddd [MODEL.pt2 ...] [--runs 3]

Prints, per model, the median CPU time (user + system) of whole processes doing only that, and
of a process that only starts Python and imports numpy. Each run writes into an empty folder
(the previous run's files are removed outside the measured process, as ``bench_convert_speed.py``
does: freeing hundreds of MB costs whoever frees them). With ``--baseline TREE`` each round also
runs ``pt2ncnn convert`` of that tree and of this one, interleaved with the floor (this VM's speed
moves by tenths between minutes: only times of the same rounds compare), and writes
``results/convert_floor.md``: each model's target (half the baseline's CPU time) against its floor.
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
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FP16 = HERE.parents[1] / "engine" / "writers" / "fp16.py"
RESULTS = HERE / "results"
WORK = Path("/tmp/pt2ncnn-bench-scale/torchvision")

#: the child: the archive's central directory parsed by hand (zipfile's import costs more)
_CHILD = r'''
import importlib.util, mmap, os, struct, sys, zlib
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np
spec = importlib.util.spec_from_file_location("fp16", sys.argv[3]); fp16 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fp16)
f = open(sys.argv[1], "rb"); mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
eocd = mm.rfind(b"PK\x05\x06")
cnt, cdsize, cdoff = struct.unpack_from("<HII", mm, eocd + 10)
if cnt == 0xFFFF or cdoff == 0xFFFFFFFF:
    loc = mm.rfind(b"PK\x06\x07", 0, eocd)
    cnt, cdsize, cdoff = struct.unpack_from("<QQQ", mm, struct.unpack_from("<Q", mm, loc + 8)[0] + 32)
CH = 1 << 16
enc, buf = fp16.Fp16Encoder(CH), np.empty(CH, "<f2")
nb, pb = open(sys.argv[2] + ".ncnn.bin", "wb"), open(sys.argv[2] + ".pnnx.bin", "wb")
p = cdoff
for _ in range(cnt):
    crc, csz, usz, nl, el, cl = struct.unpack_from("<IIIHHH", mm, p + 16)
    hoff = struct.unpack_from("<I", mm, p + 42)[0]
    name = bytes(mm[p + 46:p + 46 + nl]).decode()
    if hoff == 0xFFFFFFFF or usz == 0xFFFFFFFF:  # zip64 extra field
        ex, q = bytes(mm[p + 46 + nl:p + 46 + nl + el]), 0
        while q < len(ex):
            hid, hl = struct.unpack_from("<HH", ex, q)
            if hid == 1:
                vals = list(struct.unpack_from("<" + "Q" * (hl // 8), ex, q + 4))
                usz = vals.pop(0) if usz == 0xFFFFFFFF else usz
                csz = vals.pop(0) if csz == 0xFFFFFFFF else csz
                hoff = vals.pop(0) if hoff == 0xFFFFFFFF else hoff
            q += 4 + hl
    p += 46 + nl + el + cl
    if "/data/weights/" not in name:
        continue
    n, e = struct.unpack_from("<HH", mm, hoff + 26)
    view = memoryview(mm)[hoff + 30 + n + e:hoff + 30 + n + e + usz]
    if zlib.crc32(view) != crc:
        raise SystemExit(f"{name}: CRC mismatch")
    pb.write(view)
    if usz % 4:  # not float32 data (a flag): its bytes only
        continue
    a = np.frombuffer(view, np.float32)
    nb.write(b"\x47\x6b\x30\x01")
    for lo in range(0, a.size, CH):
        c = a[lo:lo + CH]
        o = buf[:c.size]
        enc.into(c, o)
        nb.write(o)
'''


def _cpu(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def floor_once(model: Path) -> float:
    """CPU seconds of one process doing only the byte work of converting ``model``, writing
    into an empty folder."""
    d = tempfile.mkdtemp(prefix="pt2ncnn-floor-")
    try:
        return _cpu([sys.executable, "-c", _CHILD, str(model), f"{d}/m", str(FP16)])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def measure(model: Path, runs: int, baseline: Path | None, out: Path) -> dict:
    """Medians of ``runs`` interleaved rounds: the floor, and with ``baseline`` the whole
    ``pt2ncnn convert`` of the baseline tree and of this one (``bench_convert_speed.cli_cpu``)."""
    from bench_convert_speed import ROOT, cli_cpu

    floors, base, cur = [], [], []
    for _ in range(runs):
        floors.append(floor_once(model))
        if baseline is not None:
            base.append(sum(cli_cpu(sys.executable, baseline, model, out)[:2]))
            cur.append(sum(cli_cpu(sys.executable, ROOT, model, out)[:2]))
    row = {"model": model.stem, "mb": round(model.stat().st_size / 2**20, 1),
           "floor_s": round(statistics.median(floors), 3)}
    if baseline is not None:
        b, c = statistics.median(base), statistics.median(cur)
        row.update(baseline_s=round(b, 3), target_s=round(b / 2, 3), current_s=round(c, 3), speedup=round(b / c, 2))
    shutil.rmtree(out, ignore_errors=True)
    return row


def write_report(rows: list[dict], baseline_rev: str, current_rev: str, base: float, runs: int) -> Path:
    """``results/convert_floor.md``: every model's 2x target against its floor."""
    reach = [r for r in rows if r["target_s"] > r["floor_s"]]
    below = [r for r in rows if r["target_s"] <= r["floor_s"]]
    lines = [
        "# The floor of a conversion against the 2x target (`tests/benchmarks/bench_convert_floor.py`)", "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')}, median of {runs} interleaved rounds per model, each "
        "round three whole processes: the *floor*, a process that starts Python, imports numpy, reads "
        "every weight with its zip CRC checked, converts it to fp16 (the engine's encoder) and writes "
        "both weight files, with no graph work and no engine import; `pt2ncnn convert` of the baseline "
        f"({baseline_rev}) and of the current tree ({current_rev}); CPU time (user + system), every "
        f"process writing into an empty folder. Python + numpy alone: {base:.3f} s. *target*: half the "
        "baseline's time. A target at or below the floor cannot be met by any conversion that checks "
        "the CRCs, converts to fp16 and writes both files.", "",
        f"**{len(rows)} models: {len(reach)} with the target above the floor, {len(below)} at or below it.**", "",
    ]
    for group, what in ((reach, "above"), (below, "at or below")):
        if group:
            sp = [r["speedup"] for r in group]
            lines += [f"**Target {what} the floor: speed-up min {min(sp):.2f}×, median {statistics.median(sp):.2f}×, "
                      f"max {max(sp):.2f}×; {sum(x >= 2 for x in sp)} of {len(sp)} at 2× or more.**", ""]
    lines += ["| model | .pt2 | floor | baseline | target (baseline / 2) | current | speed-up | floor / target | "
              "current − floor |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: r["floor_s"] / r["target_s"]):
        lines.append(f"| {r['model']} | {r['mb']:.0f} MB | {r['floor_s']:.3f} s | {r['baseline_s']:.3f} s | "
                     f"{r['target_s']:.3f} s | {r['current_s']:.3f} s | {r['speedup']:.2f}× | "
                     f"{r['floor_s'] / r['target_s']:.2f} | {r['current_s'] - r['floor_s']:.3f} s |")
    out = RESULTS / "convert_floor.md"
    out.write_text("\n".join(lines) + "\n")
    (RESULTS / "convert_floor.json").write_text(json.dumps(rows, indent=1) + "\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", type=Path, help=".pt2 files (default with --baseline: every one in --work)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", type=Path, help="a checkout of the baseline commit: also convert with it and "
                    "with this tree in the same rounds, and write the report")
    ap.add_argument("--work", type=Path, default=WORK)
    args = ap.parse_args()
    models = args.models or (sorted(args.work.glob("*.pt2")) if args.baseline else [])
    if not models:
        ap.error("give models, or --baseline")
    sys.path.insert(0, str(HERE))
    from bench_convert_speed import ROOT, _rev

    base = statistics.median(_cpu([sys.executable, "-c", "import numpy"]) for _ in range(args.runs))
    print(f"Python + numpy alone: {base:.3f} s CPU")
    rows = []
    for model in models:
        r = measure(model, args.runs, args.baseline, Path(tempfile.gettempdir()) / "pt2ncnn-floor-out")
        rows.append(r)
        extra = (f", baseline {r['baseline_s']:.3f} s (target {r['target_s']:.3f} s), current {r['current_s']:.3f} s"
                 if args.baseline else "")
        print(f"{r['model']}: floor {r['floor_s']:.3f} s{extra}", flush=True)
    if args.baseline:
        print(f"report: {write_report(rows, _rev(args.baseline), _rev(ROOT), base, args.runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
