"""Why pnnx's ConvNeXt-Tiny runs ~10x slower than ours in ncnn: its shape-expression Reshapes.

pnnx lowers a Linear on a channels-last (1, H, W, C) tensor to ``Reshape 6="0w,-1" → Gemm →
Reshape 6="0w,1h,1c"``, the second reading its shape from another blob. This script measures
(ncnn Python runtime, one thread, CPU time, median):

1. one such Reshape against the same reshape with a static shape, on the 3136×384 blob of
   ConvNeXt-Tiny's first stage;
2. with ``--pnnx-param DIR`` (a folder with pnnx's ``model.ncnn.param/.bin`` and the
   benchmark's ``input.npy`` one level up in ``export/``, as ``bench_convert.py`` leaves them):
   pnnx's whole model as written, and the same model with every shape-expression Reshape
   replaced by the static shape it evaluates to on that input.

Run with the project's virtualenv: ``python tests/benchmarks/bench_reshape_expression.py
[--pnnx-param /tmp/pt2ncnn-bench/convert/convnext_tiny/pnnx]``.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ncnn
import numpy as np


def _net(param: str, bin_path: str | None = None) -> ncnn.Net:
    net = ncnn.Net()
    net.opt.num_threads = 1
    net.load_param(param)
    if bin_path:
        net.load_model(bin_path)
    return net


def _time(net: ncnn.Net, feeds: dict[str, np.ndarray], out: str, runs: int = 9, warmup: int = 2) -> float:
    times = []
    for _ in range(runs + warmup):
        t = time.process_time()
        ex = net.create_extractor()
        for name, value in feeds.items():
            ex.input(name, ncnn.Mat(value))
        ex.extract(out)
        times.append(time.process_time() - t)
    return float(np.median(times[warmup:])) * 1e3


def one_reshape(tmp: Path) -> None:
    a = np.random.default_rng(0).standard_normal((3136, 384), dtype=np.float32)
    ref = np.zeros((56, 56, 96), np.float32)
    (tmp / "expr.param").write_text('7767517\n3 3\nInput a 0 1 a\nInput r 0 1 r\n'
                                    'Reshape rs 2 1 a r out 6="0w,1h,1c"\n')
    (tmp / "static.param").write_text("7767517\n2 2\nInput a 0 1 a\nReshape rs 1 1 a out 0=384 1=56 2=56\n")
    te = _time(_net(str(tmp / "expr.param")), {"a": a, "r": ref}, "out")
    ts = _time(_net(str(tmp / "static.param")), {"a": a}, "out")
    print(f"one Reshape of a 3136x384 blob to 56x56x384: shape expression {te:.1f} ms, static {ts:.1f} ms "
          f"({te / ts:.0f}x)")


def static_copy(param: Path, bin_path: Path, x: np.ndarray, tmp: Path) -> tuple[Path, int]:
    """pnnx's param with each shape-expression Reshape made static (the shape it gives on ``x``)."""
    lines = param.read_text().splitlines()
    net = _net(str(param), str(bin_path))
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(x))
    out, n = lines[:2], 0
    for line in lines[2:]:
        f = line.split()
        nin, nout = int(f[2]), int(f[3])
        params = f[4 + nin + nout:]
        if f[0] != "Reshape" or not any(p.startswith("6=") for p in params):
            out.append(line)
            continue
        top = f[4 + nin]
        y = np.array(ex.extract(top)[1])
        shape = " ".join(f"{k}={v}" for k, v in zip("012", reversed(y.shape)))  # ncnn order: w, h, c
        out.append(f"{f[0]} {f[1]} 1 1 {f[4]} {top} {shape}")
        n += 1
    fixed = tmp / "static.ncnn.param"
    fixed.write_text("\n".join(out) + "\n")
    return fixed, n


def whole_model(folder: Path, tmp: Path) -> None:
    param, bin_path = folder / "model.ncnn.param", folder / "model.ncnn.bin"
    x = np.load(folder.parent / "export" / "input.npy")[0]
    last = param.read_text().splitlines()[-1].split()
    top = last[4 + int(last[2])]
    fixed, n = static_copy(param, bin_path, x, tmp)
    t0 = _time(_net(str(param), str(bin_path)), {"in0": x}, top, runs=5, warmup=1)
    t1 = _time(_net(str(fixed), str(bin_path)), {"in0": x}, top, runs=5, warmup=1)
    ex0, ex1 = _net(str(param), str(bin_path)).create_extractor(), _net(str(fixed), str(bin_path)).create_extractor()
    ex0.input("in0", ncnn.Mat(x)), ex1.input("in0", ncnn.Mat(x))
    same = np.array_equal(np.array(ex0.extract(top)[1]), np.array(ex1.extract(top)[1]))
    print(f"{folder}: as written {t0:.0f} ms; {n} shape-expression Reshapes made static {t1:.0f} ms "
          f"({t0 / t1:.1f}x); same output: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pnnx-param", type=Path, help="folder with pnnx's model.ncnn.param/.bin (see above)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        one_reshape(Path(d))
        if args.pnnx_param:
            whole_model(args.pnnx_param, Path(d))


if __name__ == "__main__":
    main()
