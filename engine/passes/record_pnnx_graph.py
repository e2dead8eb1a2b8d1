"""Keep a copy of the graph at the pnnx stage (written as ``.pnnx.param`` and shown in the
GUI's right-hand view) before it is lowered to ncnn layers."""
from __future__ import annotations

from .manager import graph_pass


@graph_pass("record_pnnx_graph", "keep a copy of the pnnx-level graph for the pnnx writer and the GUI")
def run(graph, cx):
    cx.state["pnnx_graph"] = graph.copy()
