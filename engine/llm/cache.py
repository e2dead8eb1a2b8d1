"""The key/value cache pattern a decode program must follow, checked on its ATen graph.

Each cache input ``past`` (user inputs 1.., in the manifest's order) must be read only by
``cat((past, new), dim=cache_axis)`` (besides size reads; concatenations with empty tensors on
the way, as ``transformers``' ``DynamicCache`` makes them, are looked through), and that
concatenation must be the matching cache output: the cache then grows by the new tokens at
every step, which is what
:mod:`engine.llm.generate` relies on (and what ncnn's ``SDPA`` ``kv_cache=1`` computes). Anything
else — the new entries first, another axis, a cache that is sliced or rolled — is refused with
:class:`CacheLayoutError` naming the node and why.
"""
from __future__ import annotations

from ..errors import PT2Error

_SIZE_READS = ("aten.sym_size.int", "aten.sym_numel.default", "aten.sym_stride.int")
_CATS = ("aten.cat.default", "aten.concat.default")


class CacheLayoutError(PT2Error):
    """A decode program's cache is not ``cat((past, new), dim=cache_axis)``."""

    def __init__(self, program: str, node: str, op: str, reason: str):
        self.program, self.node, self.op, self.reason = program, node, op, reason
        super().__init__(f"program '{program}': unsupported cache layout at node {node} ({op}): {reason}")


def _readers(opd) -> list:
    return [c for c in opd.consumers if c.type not in _SIZE_READS]


def _appends_nothing(op, x) -> bool:
    """``op`` is a concatenation of ``x`` with empty tensors only (a copy of ``x``)."""
    return op.type in _CATS and any(i is x for i in op.inputs) and all(
        i is x or (i.shape is not None and 0 in i.shape) for i in op.inputs)


def check_cache(graph, program: str, cache_tensors: int, cache_axis: int) -> list[str]:
    """The names of the concatenations that grow each cache tensor of the decode program's
    ATen ``graph``; raises CacheLayoutError for any other layout."""
    inputs = [op for op in graph.ops if op.type == "pnnx.Input"]
    outputs = [op for op in graph.ops if op.type == "pnnx.Output"]
    if len(inputs) != 1 + cache_tensors or len(outputs) != 1 + cache_tensors:
        node = (inputs or outputs or graph.ops)[0]
        raise CacheLayoutError(program, node.name, node.type,
                               f"{len(inputs)} inputs and {len(outputs)} outputs; expected 1 + {cache_tensors} "
                               "(the token ids and logits, then the cache tensors)")
    cats = []
    for k in range(cache_tensors):
        past = inputs[1 + k].outputs[0]
        readers = _readers(past)
        while len(readers) == 1 and _appends_nothing(readers[0], past):  # transformers' cat((empty, past))
            past = readers[0].outputs[0]
            readers = _readers(past)
        if len(readers) != 1 or readers[0].type not in _CATS:
            node = readers[0] if readers else inputs[1 + k]
            read = ", ".join(f"{c.name} ({c.type})" for c in readers) or "nothing"
            raise CacheLayoutError(program, node.name, node.type,
                                   f"cache input {past.name} is read by {read}; expected one concatenation "
                                   f"cat(({past.name}, new), dim={cache_axis})")
        cat = readers[0]
        rank = len(past.shape or [])
        dim = cat.params.get("dim", 0)
        if len(cat.inputs) != 2 or cat.inputs[0] is not past:
            raise CacheLayoutError(program, cat.name, cat.type,
                                   f"cache input {past.name} must come first and the new entries second "
                                   f"(it concatenates {', '.join(i.name for i in cat.inputs)})")
        if rank and dim % rank != cache_axis:
            raise CacheLayoutError(program, cat.name, cat.type,
                                   f"concatenates {past.name} along dim {dim % rank}; the cache's sequence axis "
                                   f"is {cache_axis} (cache tensors are (1, kv_heads, length, head_dim))")
        out = outputs[1 + k].inputs[0]
        if out is not cat.outputs[0]:
            raise CacheLayoutError(program, cat.name, cat.type,
                                   f"cache output {k + 1} is {out.name}, not this concatenation (the updated "
                                   "cache must be returned as it is)")
        cats.append(cat.name)
    return cats
