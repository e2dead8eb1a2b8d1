"""Greedy generation with a decoder package converted to ncnn (imports ncnn lazily).

:func:`convert_decoder` converts both programs of a package made by
:func:`engine.llm.export_decoder` to ``<stem>.prefill.ncnn.*`` and ``<stem>.decode.ncnn.*``;
:class:`NcnnDecoder` runs them — the prefill on the prompt, then one decode step per new token,
the cache handed from each run to the next — and :func:`greedy` picks the most likely token at
every step (the first on ties, like ``torch.argmax``).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ConversionError
from ..records import field, record
from .manifest import DecoderManifest, read_manifest

#: ncnn's "no batch axis" for ``Mat(batch_index=)`` / ``Mat.numpy(batch_index=)``
_NO_BATCH = 233


@record
class ConvertedProgram:
    name: str  #: the program's name in the package
    param: Path
    bin: Path
    inputs: list[dict]  #: the ncnn graph's input specs (blob, shape, batch_dim, dtype)
    outputs: list[dict]
    layers: dict[str, int]  #: ncnn layer type → count


@record
class ConvertedDecoder:
    manifest: DecoderManifest
    prefill: ConvertedProgram
    decode: ConvertedProgram
    seconds: float  #: conversion time of both programs


def convert_decoder(pt2: str | os.PathLike, out_dir: str | os.PathLike | None = None, *, stem: str | None = None,
                    fp16: bool = False) -> ConvertedDecoder:
    """Convert the prefill and decode programs of ``pt2`` into ``out_dir`` (default: its folder)
    as ``<stem>.prefill.ncnn.param/.bin`` and ``<stem>.decode.ncnn.param/.bin``. Raises
    CacheLayoutError when the decode program's cache is not ``cat((past, new))`` along the cache
    axis, ConversionError naming the program and the operators that did not convert."""
    from collections import Counter

    from ..build import build_graph
    from ..convert import ConvertOptions, convert
    from ..diagnostics import format_table
    from ..reader.package import load
    from ..writers.atomic import atomic_transaction
    from .cache import check_cache

    src = Path(pt2)
    folder = Path(out_dir) if out_dir is not None else src.parent
    stem = stem or (src.name[:-4] if src.name.endswith(".pt2") else src.stem)
    t0 = time.perf_counter()
    results = {}
    with load(src) as pkg:
        manifest = read_manifest(pkg)
        for role, name in (("decode", manifest.decode), ("prefill", manifest.prefill)):
            graph = build_graph(pkg.models[name])
            if role == "decode":
                check_cache(graph, name, manifest.cache_tensors, manifest.cache_axis)
            r = convert(pkg, ConvertOptions(fp16=fp16, model=name, snapshots=False, keep_aten=False), graph=graph)
            if not r.ok:
                raise ConversionError(f"{src}: program '{name}' did not convert:\n{format_table(r.errors)}")
            results[role] = r
        done = {}  # written while the package is open: weights are read from it
        with atomic_transaction():  # both programs' files, or none
            for role in ("prefill", "decode"):
                r = results[role]
                param, bin_ = folder / f"{stem}.{role}.ncnn.param", folder / f"{stem}.{role}.ncnn.bin"
                r.write(param, bin_)
                done[role] = ConvertedProgram(r.program.name, param, bin_, list(r.ncnn.meta["inputs"]),
                                              list(r.ncnn.meta["outputs"]), dict(Counter(op.type for op in r.ncnn.ops)))
    return ConvertedDecoder(manifest, done["prefill"], done["decode"], time.perf_counter() - t0)


def _restore(a: np.ndarray, shape: Sequence) -> np.ndarray:
    """``a`` in PyTorch's shape ``shape`` (at most one dim symbolic, inferred from the size)."""
    dims = [d if isinstance(d, int) else -1 for d in shape]
    return a.reshape(dims) if dims.count(-1) <= 1 else a


class _Program:
    """One loaded ncnn program, fed and read along the batch axes its conversion chose."""

    def __init__(self, ncnn, p: ConvertedProgram, threads: int):
        self.ncnn, self.spec = ncnn, p
        from ..verify.ncnn_run import fp32_options

        net = ncnn.Net()
        fp32_options(net.opt, threads)
        if net.load_param(str(p.param)) != 0 or net.load_model(str(p.bin)) != 0:
            raise ConversionError(f"{p.param}: the ncnn runtime refused the model")
        self.net = net

    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        ncnn = self.ncnn
        ex = self.net.create_extractor()
        for spec, a in zip(self.spec.inputs, arrays):
            b = spec["batch_dim"]
            data = np.ascontiguousarray(a, dtype=np.int32 if spec.get("dtype") == "int32" else np.float32)
            ex.input(spec["blob"], ncnn.Mat(data, batch_index=_NO_BATCH if b is None else b).clone())
        out = []
        for spec in self.spec.outputs:
            ret, mat = ex.extract(spec["blob"])
            if ret != 0:
                raise ConversionError(f"{self.spec.param}: ncnn failed to compute {spec['blob']} (error {ret})")
            b = spec["batch_dim"]
            out.append(_restore(np.array(mat.numpy(batch_index=_NO_BATCH if b is None else b)), spec["shape"]))
        return out


class NcnnDecoder:
    """The two converted programs, loaded: :meth:`prefill` a prompt, then :meth:`step` a token."""

    def __init__(self, converted: ConvertedDecoder, *, threads: int = 1):
        from ..verify.errors import require

        ncnn = require("ncnn")
        self.converted = converted
        self._prefill = _Program(ncnn, converted.prefill, threads)
        self._decode = _Program(ncnn, converted.decode, threads)

    def prefill(self, ids: Sequence[int]) -> tuple[np.ndarray, list[np.ndarray]]:
        """``(logits (n, vocab), cache)`` of the prompt ``ids``."""
        logits, *cache = self._prefill([np.asarray(ids, np.int64).reshape(1, -1)])
        return logits.reshape(len(ids), -1), cache

    def step(self, token: int, cache: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """``(logits (vocab,), cache)`` after one more token."""
        logits, *cache = self._decode([np.array([[token]], np.int64), *cache])
        return logits.reshape(-1), cache


@record
class Generation:
    tokens: list[int]  #: the new tokens
    logits: list[np.ndarray] = field(default_factory=list)  #: the logits each new token was picked from
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0  #: all decode steps

    @property
    def decode_tokens_per_second(self) -> float:
        steps = max(len(self.tokens) - 1, 0)
        return steps / self.decode_seconds if self.decode_seconds > 0 else 0.0


def greedy(decoder: NcnnDecoder, prompt: Sequence[int], max_new_tokens: int) -> Generation:
    """Greedy decoding: ``max_new_tokens`` tokens after ``prompt`` (bounded by the programs'
    ``max_length``)."""
    limit = decoder.converted.manifest.max_length
    if not prompt:
        raise ValueError("the prompt is empty")
    if len(prompt) + max_new_tokens > limit:
        raise ValueError(f"prompt ({len(prompt)}) + new tokens ({max_new_tokens}) exceed the programs' "
                         f"max_length {limit}")
    out = Generation([])
    t0 = time.perf_counter()
    logits, cache = decoder.prefill(prompt)
    out.prefill_seconds = time.perf_counter() - t0
    last = logits[-1]
    t0 = time.perf_counter()
    for k in range(max_new_tokens):
        token = int(np.argmax(last))
        out.tokens.append(token)
        out.logits.append(last)
        if k + 1 < max_new_tokens:
            last, cache = decoder.step(token, cache)
    out.decode_seconds = time.perf_counter() - t0
    return out
