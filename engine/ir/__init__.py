"""The conversion IR (see :mod:`engine.ir.graph`) and its text form (:mod:`engine.ir.text`).

The text form is imported on first use: a conversion that keeps no pass snapshots (``pt2ncnn
convert`` without ``--dump-passes``/``--report``) never formats or parses a graph, and the
text form and the snapshots built on it cost 4 M instructions of every run to import.
"""
from .graph import DTYPES, Attribute, Dim, Graph, IRError, Operand, Operator, Provenance, short_dtype

_TEXT_FORM = ("format_graph", "format_value", "parse_graph", "parse_value")


def __getattr__(name):
    if name in _TEXT_FORM:
        from . import text

        return getattr(text, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Attribute", "DTYPES", "Dim", "Graph", "IRError", "Operand", "Operator", "Provenance",
           "format_graph", "format_value", "parse_graph", "parse_value", "short_dtype"]
