"""Exporting a decoder-only language model as one ``.pt2`` holding two programs.

:func:`export_decoder` takes a model following one flat calling convention::

    model(input_ids)         -> (logits, k0, v0, k1, v1, ...)   # prefill: the prompt
    model(input_ids, *past)  -> (logits, k0, v0, k1, v1, ...)   # decode: new tokens + the cache

``input_ids`` is ``(1, n)`` int64, ``logits`` ``(1, n, vocab)``; every cache tensor is
``(1, kv_heads, length, head_dim)``, ``length`` on axis :data:`CACHE_AXIS` (the returned cache
holds the past followed by the new tokens). It exports the *prefill* program (prompt length
dynamic) and the *decode* program (one token, cache length dynamic) with ``torch.export`` and
saves both in one package, with :data:`MANIFEST` describing them (read back by
:func:`engine.llm.manifest.read_manifest`). torch is imported inside the functions only.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import WriteError
from ..writers.atomic import describe_os_error
from .manifest import CACHE_AXIS, DECODE, MANIFEST, PREFILL

DEFAULT_MAX_LENGTH = 256


def export_programs(model, *, prompt_length: int = 8, max_length: int = DEFAULT_MAX_LENGTH,
                    dialect: str = "training"):
    """``(programs, manifest)``: the prefill and decode ``ExportedProgram``s of ``model`` (by
    name) and the manifest describing them. ``prompt_length``: the sample prompt's length
    (≥ 2, under ``max_length``); ``max_length``: the longest sequence (prompt + generated)
    either program accepts; ``dialect``: ``"training"`` or ``"core"`` (``run_decompositions``)."""
    import torch

    if not 2 <= prompt_length < max_length:
        raise ValueError(f"prompt_length must be in [2, {max_length}), got {prompt_length}")
    model = model.eval()
    ids = torch.arange(prompt_length, dtype=torch.long).unsqueeze(0) % 2 + 1
    with torch.no_grad():
        out = model(ids)
    if not isinstance(out, (tuple, list)) or len(out) < 3 or len(out) % 2 == 0:
        raise ValueError("the model must return (logits, k0, v0, k1, v1, ...) from model(input_ids); "
                         f"it returned {type(out).__name__}"
                         + (f" of {len(out)} values" if isinstance(out, (tuple, list)) else ""))
    cache = tuple(t.detach() for t in out[1:])
    for k, t in enumerate(cache):
        if t.dim() != 4 or t.shape[CACHE_AXIS] != prompt_length:
            raise ValueError(f"cache output {k} has shape {tuple(t.shape)}; expected (1, kv_heads, "
                             f"{prompt_length}, head_dim) for a prompt of {prompt_length} tokens")
    seq = torch.export.Dim("prompt", min=1, max=max_length - 1)
    past = torch.export.Dim("past", min=1, max=max_length - 1)
    with torch.no_grad():
        prefill = torch.export.export(model, (ids,), dynamic_shapes=({1: seq},))
        decode = torch.export.export(model, (ids[:, :1], *cache),
                                     dynamic_shapes=(None, tuple({CACHE_AXIS: past} for _ in cache)))
    if dialect == "core":
        prefill, decode = prefill.run_decompositions(), decode.run_decompositions()
    elif dialect != "training":
        raise ValueError(f"dialect must be 'training' or 'core', got {dialect!r}")
    manifest = {"kind": "decoder", "version": 1, "prefill": PREFILL, "decode": DECODE,
                "cache_tensors": len(cache), "cache_axis": CACHE_AXIS, "max_length": max_length,
                "vocab_size": int(out[0].shape[-1])}
    return {PREFILL: prefill, DECODE: decode}, manifest


def save_programs(programs: dict, manifest: dict, path: str | os.PathLike) -> Path:
    """Save several ``ExportedProgram``s (name → program) and the manifest as one ``.pt2``,
    atomically (a temporary file in the same folder, renamed over ``path`` when complete)."""
    from torch.export.pt2_archive._package import package_pt2

    target = Path(path)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.tmp.pt2")  # package_pt2 wants the suffix
    try:
        package_pt2(str(tmp), exported_programs=dict(programs), extra_files={MANIFEST: json.dumps(manifest)})
        os.replace(tmp, target)
    except OSError as e:
        raise WriteError(os.fspath(target), describe_os_error(e)) from e
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def export_decoder(model, path: str | os.PathLike, *, prompt_length: int = 8,
                   max_length: int = DEFAULT_MAX_LENGTH, dialect: str = "training") -> Path:
    """Export ``model`` (see the module docstring) as prefill + decode programs in one ``.pt2``
    at ``path``; returns the path."""
    programs, manifest = export_programs(model, prompt_length=prompt_length, max_length=max_length,
                                         dialect=dialect)
    return save_programs(programs, manifest, path)
