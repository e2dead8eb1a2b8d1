"""Benchmark: building the conversion IR from a 1,500-node program, against the anchor of
``torch.export.load`` on the same file in the same run (not collected by pytest).

    .venv/bin/python tests/benchmarks/bench_build.py

Prints the CPU time of ``engine.load`` + ``build_graph`` (median of 5, schema table warm) and
of ``torch.export.load`` (median of 3), and their ratio.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    import torch

    import engine
    from engine.build import build_graph
    from tests.engine.build.models import Deep

    path = Path(tempfile.mkdtemp()) / "deep.pt2"
    torch.export.save(torch.export.export(Deep(300).eval(), (torch.randn(1, 8, 4, 4),)), str(path))

    def ours() -> float:
        t = time.process_time()
        with engine.load(path) as pkg:
            build_graph(pkg.model)
        return time.process_time() - t

    def theirs() -> float:
        t = time.process_time()
        torch.export.load(str(path))
        return time.process_time() - t

    ours()
    a = statistics.median(ours() for _ in range(5))
    b = statistics.median(theirs() for _ in range(3))
    with engine.load(path) as pkg:
        n = len(pkg.model.nodes)
    print(f"{n} nodes: engine.load + build_graph {a * 1000:.0f} ms CPU; torch.export.load {b * 1000:.0f} ms CPU; "
          f"ratio {b / a:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
