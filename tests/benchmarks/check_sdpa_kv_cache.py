"""Does the installed ncnn runtime compute ``SDPA`` with ``kv_cache=1`` right?

Run with any environment that has ncnn and torch::

    PYTHONPATH=. /work/main/.venv/bin/python tests/benchmarks/check_sdpa_kv_cache.py

One ``SDPA`` layer (``7=1``: inputs q, k, v, past k, past v; outputs the attention and the
updated k and v) on random grouped-query inputs (4 query heads, 2 key/value heads, head size 8,
a past of 5 and 1 or 3 new tokens) against PyTorch's attention over ``cat((past, new))``. pt2ncnn
emits the cache as a ``Concat`` before a plain ``SDPA`` until this prints ``ok`` for every case
(with ncnn 1.0.20261020 on x86 the updated key blob, and so the attention, is wrong).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import ncnn
import numpy as np
import torch

PARAM = """7767517
6 8
Input q 0 1 q
Input k 0 1 k
Input v 0 1 v
Input pk 0 1 pk
Input pv 0 1 pv
SDPA sdpa 5 3 q k v pk pv out kk vv 7=1
"""


def case(param: Path, new: int, seed: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((h, new, 8)).astype(np.float32) for h in (4, 2, 2))
    pk, pv = (rng.standard_normal((2, 5, 8)).astype(np.float32) for _ in range(2))
    keys, values = np.concatenate([pk, k], 1), np.concatenate([pv, v], 1)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(t)[None] for t in (q, keys, values)), enable_gqa=True)[0].numpy()
    net = ncnn.Net()
    net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = net.opt.use_bf16_storage = False
    net.opt.num_threads = 1
    net.load_param(str(param))
    ex = net.create_extractor()
    for name, a in dict(q=q, k=k, v=v, pk=pk, pv=pv).items():
        ex.input(name, ncnn.Mat(a).clone())
    out, kk, vv = (np.array(ex.extract(n)[1]) for n in ("out", "kk", "vv"))
    return (float(np.abs(out - want).max()), float(np.abs(kk - keys).max()), float(np.abs(vv - values).max()))


def main() -> int:
    ok = True
    with tempfile.TemporaryDirectory() as d:
        param = Path(d) / "sdpa_kv.param"
        param.write_text(PARAM)
        for new in (1, 3):
            errors = case(param, new, new)
            good = max(errors) < 1e-5
            ok &= good
            print(f"ncnn {ncnn.__version__}, {new} new token(s): max |error| attention {errors[0]:.3g}, "
                  f"key {errors[1]:.3g}, value {errors[2]:.3g}: {'ok' if good else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
