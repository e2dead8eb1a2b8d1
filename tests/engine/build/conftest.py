"""Shared helpers of the builder tests: export a module at test time and load it back."""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.engine.build._reader_shim import load_model  # noqa: E402  (TEMPORARY until engine.load lands)


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """``export(module, inputs, dialect="training"|"core", dynamic_shapes=None)`` → (ep, torch ep):
    the module exported with torch, saved as a .pt2 and loaded back with the engine's reader."""
    folder = tmp_path_factory.mktemp("pt2")
    counter = iter(range(10**6))

    def run(module, inputs, *, dialect: str = "training", dynamic_shapes=None):
        tep = torch.export.export(module, tuple(inputs), dynamic_shapes=dynamic_shapes)
        if dialect == "core":
            tep = tep.run_decompositions()
        path = Path(folder) / f"m{next(counter)}.pt2"
        torch.export.save(tep, str(path))
        return load_model(path, module), tep

    return run
