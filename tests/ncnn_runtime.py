"""Running ncnn models exactly in tests: fp32 storage and arithmetic, no packing, one thread.

Input Mats are cloned: a Mat wrapping numpy memory has no refcount, and an in-place layer
(ReLU, Sigmoid, scalar BinaryOp...) reading a model input would crash the runtime.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np


def load_net(param: Path, bin_: Path):
    """An ncnn.Net with exact options; returns (net, load_param rc, load_model rc)."""
    import ncnn

    net = ncnn.Net()
    opt = net.opt
    opt.use_fp16_storage = opt.use_fp16_arithmetic = opt.use_fp16_packed = False
    opt.use_bf16_storage = False
    opt.use_packing_layout = False
    opt.num_threads = 1
    rp, rb = net.load_param(str(param)), net.load_model(str(bin_))
    return net, rp, rb


def run(param: Path, bin_: Path, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]) -> list[np.ndarray]:
    """Run the model on named input blobs; return the named output blobs as numpy arrays."""
    import ncnn

    net, rp, rb = load_net(param, bin_)
    assert rp == 0 and rb == 0, f"ncnn refused the model (load_param {rp}, load_model {rb})"
    ex = net.create_extractor()
    for k, arr in inputs.items():  # int32 arrays (token ids) stay int32, anything else is fed as float32
        dtype = np.int32 if np.asarray(arr).dtype == np.int32 else np.float32
        ex.input(k, ncnn.Mat(np.ascontiguousarray(arr, dtype=dtype)).clone())
    result = []
    for k in outputs:
        ret, mat = ex.extract(k)
        assert ret == 0, f"ncnn failed to compute {k} (error {ret})"
        result.append(np.array(mat).copy())
    return result
