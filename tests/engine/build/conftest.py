"""Shared helpers of the builder tests: export a module at test time and load it back."""
from __future__ import annotations

from pathlib import Path

import pytest

import engine

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """``export(module, inputs, dialect="training"|"core", dynamic_shapes=None)`` → (ep, torch ep):
    the module exported with torch, saved as a .pt2 and opened with ``engine.load``."""
    folder = tmp_path_factory.mktemp("pt2")
    packages = []

    def run(module, inputs, *, dialect: str = "training", dynamic_shapes=None):
        tep = torch.export.export(module, tuple(inputs), dynamic_shapes=dynamic_shapes)
        if dialect == "core":
            tep = tep.run_decompositions()
        path = Path(folder) / f"m{len(packages)}.pt2"
        torch.export.save(tep, str(path))
        packages.append(engine.load(path))
        return packages[-1].model, tep

    yield run
    for pkg in packages:
        pkg.close()
