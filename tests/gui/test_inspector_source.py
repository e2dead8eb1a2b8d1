"""The inspector's Source (issue 12, item 12): the whole call stack of a node, the deepest frame
of the user's own code first — not only the model's outermost ``forward`` line. A model whose
operator is called three modules deep (through a helper), exported with torch at test time."""
from __future__ import annotations

import pytest

from tests.gui.conftest import open_model

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from tests.gui import studio_models as models  # noqa: E402


def scale_and_shift(x, w):
    return x * w + 1.0  # the line the mul comes from


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.full((1, 4, 1, 1), 0.5))

    def forward(self, x):
        return scale_and_shift(torch.relu(x), self.w)  # inner call


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x)  # outer call


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3)
        self.outer = Outer()

    def forward(self, x):
        return self.outer(self.conv(x))  # model call


def _line(marker: str) -> int:
    import inspect

    lines = inspect.getsource(__import__(__name__, fromlist=["x"])).splitlines()
    return next(k + 1 for k, text in enumerate(lines) if text.rstrip().endswith(marker))


def test_source_lists_the_whole_stack_deepest_user_frame_first(window, tmp_path):
    path = models.export(Deep(), (torch.randn(1, 3, 8, 8),), tmp_path / "deep.pt2")
    open_model(window, path)
    mul = next(n.name for n in window.aten_panel.graph.nodes if n.type.startswith("aten.mul"))
    window.aten_panel.select([mul], emit=True)
    text = window.inspector.text()
    source = text[text.index("SOURCE") if "SOURCE" in text else text.index("Source"):]
    here = __file__.rsplit("/", 1)[-1]
    # torch records the frames of the modules' forward methods (not the helper's own frame)
    wanted = [f"{here}:{_line(m)}" for m in ("# inner call", "# outer call", "# model call")]
    positions = [source.find(w) for w in wanted]
    assert all(p >= 0 for p in positions), (wanted, positions, source[:900])
    assert positions == sorted(positions), "deepest first"
    # the deepest user frame comes first, with its code
    first = source.split("\n")[1:4]
    assert wanted[0] in first[0] and "scale_and_shift(torch.relu(x), self.w)" in first[2], first
    # a lowered operator shows the stack of the ATen node it came from
    window.show_right("pnnx")
    assert window.wait_settled()
    lowered = window.sync.index.lowered_of([mul])
    window.right_panel.select([lowered[0]], emit=True)
    assert wanted[0] in window.inspector.text()
