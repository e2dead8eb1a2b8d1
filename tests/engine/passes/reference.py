"""The reference of the pass snapshots: the pipeline run with a full text snapshot
(``format_graph``) after every pass, next to the pass manager's structural records (used by
``test_structural_snapshots.py`` and the Passes panel's test)."""
from __future__ import annotations

from pathlib import Path

from engine.ir.text import format_graph
from engine.passes import PIPELINE, PassContext, PassManager


def _with_reference(passes, texts: list[str]):
    """The passes, each followed by a full text snapshot appended to ``texts``."""
    out = []
    for p in passes:
        def run(graph, cx, _p=p):
            _p(graph, cx)
            texts.append(format_graph(graph))

        run.pass_name = getattr(p, "pass_name", p.__name__)
        run.pass_description = getattr(p, "pass_description", "")
        out.append(run)
    return out


def convert_with_reference(path: Path):
    """(records, texts): the manager's records of converting ``path`` and the text form of the
    graph after every pass (texts[0]: as built)."""
    from engine import load
    from engine.build import build_graph
    from engine.convert import ConvertOptions

    ep = load(path).model
    graph = build_graph(ep)
    texts = [format_graph(graph)]
    cx = PassContext(options=ConvertOptions(), program=ep)
    records = PassManager(_with_reference(PIPELINE, texts)).run(graph, cx)
    return records, texts
