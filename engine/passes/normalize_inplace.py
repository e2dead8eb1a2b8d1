"""Turn in-place ATen ops (``aten.relu_.default``, ``aten.add_.Tensor``, ``aten.hardtanh_``...)
into their functional forms. Uses of the mutated input that come after the in-place op read
the mutated value, so they are redirected to the op's result."""
from __future__ import annotations

import functools
import re

from ..ir.vocab import is_aten
from .manager import graph_pass

_INPLACE = re.compile(r"^(aten)\.([a-z][a-z0-9_]*[a-z0-9])_\.(\w+)$")


@functools.lru_cache(maxsize=4096)  # a graph has a few dozen op types on thousands of operators
def _functional(op_type: str) -> str | None:
    """The functional overload of an in-place one (``aten.relu_.default`` → ``aten.relu.default``)."""
    m = _INPLACE.match(op_type)
    return f"{m.group(1)}.{m.group(2)}.{m.group(3)}" if m else None


@graph_pass("normalize_inplace", "rewrite in-place ATen ops (relu_, add_...) to functional ones")
def run(graph, cx):
    position = None
    for op in list(graph.ops):
        functional = _functional(op.type)
        if not (functional and is_aten(op) and op.inputs and op.outputs):
            continue
        if position is None:  # the order as it came (this pass does not change it)
            position = {id(o): i for i, o in enumerate(graph.ops)}
        op.meta.setdefault("aten_op", op.type)
        op.type = functional
        mutated, result = op.inputs[0], op.outputs[0]
        here = position[id(op)]
        for c in list(mutated.consumers):
            if c is not op and position.get(id(c), -1) > here:
                for i, x in enumerate(c.inputs):
                    if x is mutated:
                        graph.set_input(c, i, result)
