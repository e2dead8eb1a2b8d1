"""The conversion IR (see :mod:`engine.ir.graph`) and its text form (:mod:`engine.ir.text`)."""
from .graph import DTYPES, Attribute, Dim, Graph, IRError, Operand, Operator, Provenance, short_dtype
from .text import format_graph, format_value, parse_graph, parse_value

__all__ = ["Attribute", "DTYPES", "Dim", "Graph", "IRError", "Operand", "Operator", "Provenance",
           "format_graph", "format_value", "parse_graph", "parse_value", "short_dtype"]
