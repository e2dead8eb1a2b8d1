"""Fixtures of the GUI tests: a main window with settings in a temporary file, the bundled
samples, and models exported with torch at test time (once per session)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gui  # noqa: E402,F401  (applies the binding work-around before any Qt call)
from gui.main_window import MainWindow  # noqa: E402
from gui.settings import Settings  # noqa: E402
from gui import theme  # noqa: E402
from gui.graph.panel import GraphPanel  # noqa: E402
from gui.workers import TaskRunner  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "resources" / "samples"
TINY_CNN = SAMPLES / "tiny_cnn.pt2"
TINY_TRANSFORMER = SAMPLES / "tiny_transformer.pt2"


@pytest.fixture
def settings(tmp_path) -> Settings:
    s = Settings.at(tmp_path / "studio.ini")
    s.mark_first_run_done()
    return s


@pytest.fixture
def window(qtbot, settings):
    w = MainWindow(settings, restore_state=False)
    qtbot.addWidget(w)
    w.resize(1500, 950)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.reporter.dismiss_all()
    w.runner.shutdown()


def open_model(window: MainWindow, path, *, timeout_ms: int = 120_000) -> None:
    """Open (and, with the default settings, convert) a model; wait until everything settled."""
    window.open_file(path)
    assert window.wait_settled(timeout_ms), "the window did not settle"
    assert window.doc is not None and os.path.samefile(window.doc.path, path), window.reporter.history


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """``exported(name)`` → path of a .pt2 exported from :mod:`tests.gui.models` (cached)."""
    torch = pytest.importorskip("torch")
    from tests.gui import studio_models as models
    from tests.harness import HeavyLinear

    folder = tmp_path_factory.mktemp("gui_models")
    cache: dict[str, Path] = {}
    makers = {
        "unsupported": lambda p: models.export(models.WithUnsupportedOp(), (torch.randn(1, 3, 8, 8),), p),
        "densenet121": lambda p: models.export(models.DenseNet121(), (torch.randn(1, 3, 224, 224),), p),
        "nan_weight": lambda p: models.export(models.with_nan_weight(models.SmallConvNet()),
                                              (torch.randn(1, 3, 16, 16),), p),
        "rotary_stack": lambda p: models.export(models.RotaryStack(), (torch.randn(1, 4, 16),), p),
        "heavy_linear": lambda p: models.export(HeavyLinear(), (torch.randn(1, 512),), p),
        "dynamic_batch": lambda p: models.export(models.SmallConvNet(), (torch.randn(2, 3, 16, 16),), p,
                                                 dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=8)},)),
        "dynamic_size": lambda p: models.export(models.SmallConvNet(), (torch.randn(1, 3, 16, 16),), p,
                                                dynamic_shapes=({2: 8 * torch.export.Dim("h", min=1, max=8),
                                                                 3: 8 * torch.export.Dim("w", min=1, max=8)},)),
    }

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = makers[name](folder / f"{name}.pt2")
        return cache[name]

    return get


@pytest.fixture
def panel(qtbot):
    """A shown 1200×800 ATen graph panel with its own task runner."""
    runner = TaskRunner()
    p = GraphPanel("ATen", runner, theme.graph_theme(), key="aten")
    qtbot.addWidget(p)
    p.resize(1200, 800)
    p.show()
    yield p
    runner.shutdown()
