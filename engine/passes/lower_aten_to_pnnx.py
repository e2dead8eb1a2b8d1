"""Lower ATen operators to pnnx operators through the :data:`engine.convert.registry.ATEN`
registry (one rule per ATen overload, see :mod:`engine.converters`)."""
from __future__ import annotations

from ..convert.context import STRUCTURAL, ConversionContext
from ..convert.lowering import lower_graph
from ..convert.registry import ATEN
from ..ir.vocab import is_aten
from .manager import graph_pass


@graph_pass("lower_aten_to_pnnx", "convert each ATen operator to pnnx operators with the converter registry")
def run(graph, cx):
    ctx = ConversionContext(graph, options=cx.options, diagnostics=cx.diagnostics, stage="lower_aten_to_pnnx")
    lower_graph(graph, ATEN, ctx, skip=lambda op: op.type in STRUCTURAL or not is_aten(op))
