"""Where in the user's code an operator comes from: the whole call stack of its ATen node —
no Qt.

A node's ``stack_trace`` lists the frames outermost first: the model's ``forward`` (``x =
self.features(x)``), then every module's ``forward`` down to the line that called the operator,
often ending inside torch itself (``torch/nn/modules/activation.py``). The line a user wants
first is the *deepest frame of their own code*: :func:`call_stack` returns the frames with that
one first, then the others deepest first; :func:`is_library` tells torch's and Python's own
frames apart (shown muted).
"""
from __future__ import annotations

import re
from typing import Any

from engine.ir import Operator
from engine.reader.metadata import parse_stack_trace
from engine.reader.schema import SourceLocation

#: a frame in torch's own package or in Python's standard library
_LIBRARY = re.compile(r"([\\/](site|dist)-packages[\\/]torch[\\/])|([\\/]lib[\\/]python3\.\d+[\\/](?!site-packages))"
                      r"|(^<frozen )")


def is_library(frame: SourceLocation) -> bool:
    return bool(_LIBRARY.search(frame.file))


def call_stack(program: Any, op: Operator) -> list[SourceLocation]:
    """The frames of ``op``'s ATen node (a lowered operator: of the first node it came from),
    the deepest user frame first, then the rest deepest first; [] when the file has no trace."""
    if program is None:
        return []
    names = op.provenance.nodes or (op.name,)
    node = program.node(names[0])
    trace = node.metadata.stack_trace if node is not None else None
    if not trace:
        return []
    frames = parse_stack_trace(trace)[::-1]  # deepest first
    user = next((k for k, f in enumerate(frames) if not is_library(f)), None)
    if user is None:
        return frames
    return [frames[user], *frames[:user], *frames[user + 1:]]
