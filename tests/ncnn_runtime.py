"""Running ncnn models exactly in tests: fp32 storage and arithmetic, no packing, one thread.

Input Mats are cloned: a Mat wrapping numpy memory has no refcount, and an in-place layer
(ReLU, Sigmoid, scalar BinaryOp...) reading a model input would crash the runtime.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np


def load_net(param: Path, bin_: Path, *, packed: bool = False):
    """An ncnn.Net with exact options; returns (net, load_param rc, load_model rc). ``packed``
    keeps ncnn's default packed layout on (x86 kernels of some layers crash without it: a 3×3
    convolution dilated wider than its map, DeepLabV3's ASPP)."""
    import ncnn

    net = ncnn.Net()
    opt = net.opt
    opt.use_fp16_storage = opt.use_fp16_arithmetic = opt.use_fp16_packed = False
    opt.use_bf16_storage = False
    opt.use_packing_layout = packed
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
        data = np.ascontiguousarray(arr, dtype=dtype)  # kept alive until cloned: the Mat wraps it
        ex.input(k, ncnn.Mat(data).clone())
    result = []
    for k in outputs:
        ret, mat = ex.extract(k)
        assert ret == 0, f"ncnn failed to compute {k} (error {ret})"
        result.append(np.array(mat).copy())
    return result


def feed_mat(arr: np.ndarray, batch: int | None):
    """An ncnn Mat of ``arr`` (a PyTorch-shaped array) with axis ``batch`` as the Mat's batch;
    int32 (token ids) stays int32, anything else is fed as float32."""
    import ncnn

    a = np.ascontiguousarray(arr, dtype=np.int32 if np.asarray(arr).dtype == np.int32 else np.float32)
    if a.ndim == 0:
        a = a.reshape(1)
    if batch is None:
        return ncnn.Mat(a).clone()
    return ncnn.Mat(a, batch_index=batch).clone()


def read_mat(mat, batch: int | None, shape) -> np.ndarray:
    """A blob read back in PyTorch's shape ``shape`` (its batch axis ``batch`` restored)."""
    a = mat.numpy(batch_index=batch) if batch is not None else np.array(mat)
    a = np.array(a).copy()
    if shape is not None and all(isinstance(d, int) for d in shape) and a.size == int(np.prod(shape)):
        a = a.reshape(shape)
    return a


def run_layout(param: Path, bin_: Path, inputs: Sequence[np.ndarray], layout: Mapping, *,
               raw: bool = False, packed: bool = False) -> list[np.ndarray]:
    """Run a converted model on PyTorch-shaped ``inputs``, fed and read along the batch axes the
    converter chose (``layout``: the ncnn graph's ``meta`` with ``inputs``/``outputs`` entries
    ``{blob, shape, batch_dim}``); outputs come back in PyTorch's shapes. With ``raw`` the
    inputs are one-sample blobs given to ncnn as they are (no batch axis); ``packed``: see
    :func:`load_net`."""
    net, rp, rb = load_net(param, bin_, packed=packed)
    assert rp == 0 and rb == 0, f"ncnn refused the model (load_param {rp}, load_model {rb})"
    ex = net.create_extractor()
    for spec, arr in zip(layout["inputs"], inputs):
        ex.input(spec["blob"], feed_mat(arr, None if raw else spec["batch_dim"]))
    result = []
    for spec in layout["outputs"]:
        ret, mat = ex.extract(spec["blob"])
        assert ret == 0, f"ncnn failed to compute {spec['blob']} (error {ret})"
        result.append(read_mat(mat, spec["batch_dim"], spec["shape"]))
    return result
