"""The least any converter of a ``.pt2`` must spend: start Python, import numpy, read every
weight from the archive checking its zip CRC, convert it to fp16 (pt2ncnn's bit arithmetic)
and write an ``.ncnn.bin`` (fp16) and the fp32 bytes of a ``.pnnx.bin`` — no graph work, no
engine import. Issue 13's "2x faster than ddd4dc1" is bounded below by this: a classifier whose
target (half of ddd4dc1's CPU time, ``bench_convert_speed.py``) is near or under its floor
cannot get there by speeding up the conversion.

    /work/benchvenv/bin/python tests/benchmarks/bench_convert_floor.py MODEL.pt2 [...] [--runs 5]

Prints, per model, the median CPU time (user + system) of whole processes doing only that, and
of a process that only starts Python and imports numpy.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FP16 = HERE.parents[1] / "engine" / "writers" / "fp16.py"

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
        c.min(), c.max()
        o = buf[:c.size]
        enc.into(c, o)
        nb.write(o)
'''


def _cpu(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    base = statistics.median(_cpu([sys.executable, "-c", "import numpy"]) for _ in range(args.runs))
    print(f"Python + numpy alone: {base:.3f} s CPU")
    for model in args.models:
        with tempfile.TemporaryDirectory() as d:
            runs = [_cpu([sys.executable, "-c", _CHILD, str(model), f"{d}/m", str(FP16)]) for _ in range(args.runs)]
        print(f"{model.stem}: floor {statistics.median(runs):.3f} s CPU (user + system, median of {args.runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
