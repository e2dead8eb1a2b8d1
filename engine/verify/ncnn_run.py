"""Run an ncnn model with the ncnn Python runtime and read any blob (imports ncnn lazily).

Runs are exact and repeatable: fp16/bf16 storage and arithmetic and Vulkan off, one thread,
light mode off (so every intermediate blob stays readable and in-place layers work on copies).
The packed layout stays on, as ncnn runs by default: some x86 kernels crash without it (a dilated
3×3 convolution of DeepLabV3 killed the process), and the runtime unpacks every blob it hands
out and packs what it is given. Input Mats are cloned: a Mat wrapping numpy memory has no
refcount, and an in-place layer reading it would write into (or free) the caller's array.

Any blob may be set before extracting — ``ncnn.Extractor.input`` accepts intermediate blobs —
and the runtime computes only what is missing, which is how one layer is run in isolation on
PyTorch's values of its inputs.
"""
from __future__ import annotations

import logging
import os
from typing import Sequence

import numpy as np

from . import custom_layers
from ..records import record
from .errors import VerifyError, require

log = logging.getLogger(__name__)


@record
class BlobFailure:
    """ncnn could not produce a blob (``code`` is the runtime's return value)."""

    code: int
    message: str

    def __str__(self) -> str:
        return self.message


#: layers that move an int32 blob's bits without computing on them
_BIT_MOVES = ("Split", "Reshape", "Crop", "Permute", "Flatten")


def int32_input_blobs(graph) -> set[str]:
    """The blobs that hold int32 token ids: the outputs of the ``Input`` layers the
    ``mark_integer_inputs`` pass marked ``meta["ncnn_dtype"] = "int32"`` — or, in files read back
    (no such mark), whose ids reach an ``Embed`` layer, which reads int32 — and of the layers
    that only move their bits on (``Split``, ``Reshape``...). They are fed as int32, also when
    Verify feeds one to a layer run alone, and read back as integers."""
    out: set[str] = set()
    for op in graph.ops_of_type("Input"):
        for o in op.outputs:
            moved = _bits_moved(o)
            if op.meta.get("ncnn_dtype") == "int32" or any(r.type == "Embed" for b in moved for r in b.consumers):
                out.update(b.name for b in moved)
    return out


def _bits_moved(blob) -> list:
    """``blob`` and the blobs the layers that only move bits make of it."""
    found, stack, seen = [], [blob], set()
    while stack:
        b = stack.pop()
        if b.name not in seen:
            seen.add(b.name)
            found.append(b)
            stack += [o for r in b.consumers if r.type in _BIT_MOVES for o in r.outputs]
    return found


def _mat(ncnn, arr: np.ndarray, int32: bool = False, batch: bool = False):
    """``arr`` as an ncnn Mat; ``batch``: its first axis is the Mat's batch of samples."""
    a = np.ascontiguousarray(arr, dtype=np.int32 if int32 else np.float32)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim - batch > 4:
        raise VerifyError(f"a {a.ndim - batch}-D value {list(a.shape[batch:])} cannot be an ncnn Mat")
    return (ncnn.Mat(a, batch_index=0) if batch else ncnn.Mat(a)).clone()


def fp32_options(opt, threads: int = 1) -> None:
    """fp32 storage and arithmetic on the CPU (no fp16/bf16, no Vulkan), ``threads`` threads."""
    opt.use_vulkan_compute = False
    opt.use_fp16_storage = opt.use_fp16_arithmetic = opt.use_fp16_packed = False
    opt.use_bf16_storage = False
    opt.num_threads = threads


class NcnnModel:
    """One loaded ncnn model (``.param`` + ``.bin``). ``custom``: the model's plug-in custom
    layers, in file order (see :mod:`.custom_layers`)."""

    def __init__(self, param: str | os.PathLike, bin_path: str | os.PathLike, custom: Sequence = ()):
        ncnn = require("ncnn")
        self._ncnn = ncnn
        self._host = None
        if custom:
            self._host = custom_layers.acquire(custom)
            net = self._host.net
        else:
            net = ncnn.Net()
        fp32_options(net.opt)
        net.opt.use_packing_layout = True  # the runtime's default; off, x86 kernels crash (module doc)
        net.opt.lightmode = False
        self.net = net
        #: input blobs holding int32 token ids (:func:`int32_input_blobs`)
        self.int32_blobs: set[str] = set()
        try:
            if net.load_param(os.fspath(param)) != 0:
                raise VerifyError(f"{param}: the ncnn runtime refused the param file")
            if net.load_model(os.fspath(bin_path)) != 0:
                raise VerifyError(f"{bin_path}: the ncnn runtime refused the weights file")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Free the model (a net hosting custom layers goes back to its pool)."""
        if self._host is not None:
            custom_layers.release(self._host)
            self._host = None
        self.net = None

    def run(self, feeds: dict[str, np.ndarray], wanted: list[str], *, batched: frozenset[str] = frozenset(),
            batches: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray | BlobFailure]:
        """Set ``feeds`` (blob → array in ncnn layout, batch axis dropped, or first for the blobs
        in ``batched``), extract ``wanted``. Each wanted blob comes back as a numpy array (of a
        batch of several samples, as RAFT's encoder runs both images as one batch: the first) or a
        :class:`BlobFailure`; ``batches`` receives every such batch whole (samples first)."""
        ex = self.net.create_extractor()
        ex.set_light_mode(False)
        for blob, arr in feeds.items():
            if ex.input(blob, _mat(self._ncnn, arr, blob in self.int32_blobs, blob in batched)) != 0:
                raise VerifyError(f"the ncnn model has no blob named {blob!r}")
        out: dict[str, np.ndarray | BlobFailure] = {}
        for blob in wanted:
            ret, mat = ex.extract(blob)
            if ret != 0:
                why = self._host.take_error() if self._host is not None else None
                out[blob] = BlobFailure(ret, f"ncnn failed to compute {blob} (error {ret})" + (f": {why}" if why else ""))
            else:
                whole = batches is not None and getattr(mat, "n", 1) > 1
                # a copy (the Mat dies with the extractor): the whole batch, samples first, or the first
                a = np.array(mat.numpy(batch_index=0) if whole else mat)
                if blob in self.int32_blobs:
                    a = a.view(np.int32).astype(np.float32)
                if whole:
                    batches[blob], a = a, a[0]
                out[blob] = a
        return out
