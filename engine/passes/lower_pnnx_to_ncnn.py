"""Lower pnnx operators to ncnn layers through the :data:`engine.convert.registry.NCNN`
registry (rules keyed by pnnx op type; the batch axis is dropped per ncnn's rules)."""
from __future__ import annotations

from ..convert.context import ConversionContext
from ..convert.lowering import lower_graph
from ..convert.registry import NCNN, check_ncnn_layer
from ..ir.vocab import is_pnnx
from .manager import graph_pass


@graph_pass("lower_pnnx_to_ncnn", "convert each pnnx operator to ncnn layers with the rule registry")
def run(graph, cx):
    ctx = ConversionContext(graph, options=cx.options, diagnostics=cx.diagnostics, stage="lower_pnnx_to_ncnn")
    lower_graph(graph, NCNN, ctx, skip=lambda op: not is_pnnx(op), check=check_ncnn_layer)
