"""Modules used more than once (issue 12, item 11): each call is its own group, so the graph
still flows top-down — ResNet's BasicBlock calls one ``relu`` twice, a shared block is called
twice. Models exported with torch at test time, shown in a real window with every group open."""
from __future__ import annotations

import pytest

from tests.gui.conftest import open_model

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from tests.gui import studio_models as models  # noqa: E402


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock: ``self.relu`` after the first conv and after the add."""

    def __init__(self, c: int):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)


class Mixer(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c, 1), nn.Conv2d(c, c, 1)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Reuse(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(8), BasicBlock(8))
        self.mixer = Mixer(8)  # called twice, around a pooling

    def forward(self, x):
        y = self.mixer(self.layer1(self.stem(x)))
        return self.mixer(nn.functional.avg_pool2d(y, 2))


@pytest.fixture(scope="module")
def reuse_pt2(tmp_path_factory):
    return models.export(Reuse(), (torch.randn(1, 3, 16, 16),), tmp_path_factory.mktemp("calls") / "reuse.pt2")


@pytest.mark.parametrize("side", ["aten", "right"])
def test_a_module_called_twice_keeps_the_flow_top_down(window, qtbot, reuse_pt2, side):
    open_model(window, reuse_pt2)
    panel = window.aten_panel if side == "aten" else window.right_panel
    panel.expand_all()
    qtbot.waitUntil(lambda: not panel.busy, timeout=60_000)
    assert panel.expanded == panel.tree.all_groups()
    p = panel.scene.layout
    g = panel.graph
    up = [(g.nodes[g.edges[k].src].name, g.nodes[g.edges[k].dst].name) for _u, _v, k, route in p.edges
          if route and route[-1][1] < route[0][1] - 1]
    assert not up, f"edges running back up: {up}"
    titles = [panel.tree.groups[gid].title for gid in p.boxes]
    # both calls of the mixer are boxes of their own, the second one says so
    assert "mixer" in titles and "mixer (call 2)" in titles, titles
    # a ReLU called twice is no box holding both calls: each call sits in its block
    assert not any(t.startswith("layer1.0.relu") for t in titles), titles
    relus = [i for i, n in enumerate(g.nodes) if n.module == "layer1.0.relu"]
    block = next(gid for gid in p.boxes if panel.tree.groups[gid].title == "layer1.0")
    assert len(relus) == 2 or side == "right"
    for i in relus:
        assert block in panel.tree.ancestors(i)
