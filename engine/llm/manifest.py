"""What a decoder package holds: the manifest :func:`engine.llm.export.export_decoder` stores.

A package made by the export helper holds two programs, ``prefill`` and ``decode``, and the
extra file :data:`MANIFEST` (JSON) naming them with the number of cache tensors and the cache's
sequence axis. :func:`read_manifest` reads it back (torch-free) and checks it against the
package; a package without one is refused with a message saying how to make one.
"""
from __future__ import annotations

import json

from ..errors import PT2FormatError
from ..records import record

PREFILL, DECODE = "prefill", "decode"
MANIFEST = "pt2ncnn_llm.json"
CACHE_AXIS = 2  #: the sequence axis of every ``(1, kv_heads, length, head_dim)`` cache tensor


@record(frozen=True)
class DecoderManifest:
    prefill: str  #: the prefill program's name in the package
    decode: str  #: the decode program's name
    cache_tensors: int  #: how many cache tensors (k0, v0, k1, v1, ...)
    cache_axis: int  #: their sequence axis
    max_length: int  #: the longest sequence the programs accept (prompt + generated tokens)
    vocab_size: int


def read_manifest(package) -> DecoderManifest:
    """The decoder manifest of an opened :class:`engine.Package`; PT2FormatError when it has
    none or it does not match the package."""
    member = f"extra/{MANIFEST}"
    if MANIFEST not in package.extra_files:
        raise PT2FormatError(package.path, f"not a decoder package: no {member} (export the model with "
                                           "engine.llm.export_decoder)")
    try:
        data = json.loads(package.extra_files[MANIFEST])
        m = DecoderManifest(str(data["prefill"]), str(data["decode"]), int(data["cache_tensors"]),
                            int(data["cache_axis"]), int(data["max_length"]), int(data["vocab_size"]))
    except (ValueError, KeyError, TypeError) as e:
        raise PT2FormatError(member, f"unreadable decoder manifest ({type(e).__name__}: {e})") from None
    for name in (m.prefill, m.decode):
        if name not in package.models:
            raise PT2FormatError(member, f"the manifest names program {name!r}, which the package does not "
                                         f"hold (it holds {', '.join(package.model_names)})")
    return m
