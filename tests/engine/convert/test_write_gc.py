"""Writing a conversion runs without the cyclic garbage collector, like the conversion itself:
on a big model one full collection walks every object of the program and the graphs (it doubled
the write of a 10k-node graph). The caller's collector setting is restored, and the files are
the same model the runtime runs."""
from __future__ import annotations

import gc

import numpy as np

from tests.gc_watch import collections_during
from tests.harness import export_pt2, rel_error, run_ncnn, torch

from engine.convert import ConvertOptions, convert


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, padding=1),
                                                              torch.nn.BatchNorm2d(4), torch.nn.ReLU())
                                          for _ in range(12)])

    def forward(self, x):
        return self.body(x).mean((2, 3))


def test_write_runs_without_collections_and_restores_the_collector(tmp_path):
    torch.manual_seed(0)
    net = _Net().eval()
    x = torch.randn(1, 4, 16, 16)
    res = convert(export_pt2(net, [x], tmp_path / "m.pt2"), ConvertOptions(fp16=False))
    assert res.ok
    (tmp_path / "again").mkdir()
    gc.collect()
    was = gc.isenabled()
    gc.enable()
    try:
        with collections_during() as seen:
            paths = res.write_all(tmp_path, "m", python=True)
        n = len(seen)
        assert gc.isenabled()
        gc.disable()
        with collections_during() as seen_off:
            res.write_all(tmp_path / "again", "m")
        n_off = len(seen_off)
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        (gc.enable if was else gc.disable)()
    assert n == 0 and n_off == 0
    assert {p.name for p in paths} >= {"m.ncnn.param", "m.ncnn.bin", "m.pnnx.param", "m.pnnx.bin"}
    with torch.no_grad():
        want = net(x).numpy()
    (got,) = run_ncnn(tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin", [x[0].numpy()], 1)
    assert rel_error(np.asarray(got).reshape(want.shape), want) <= 1e-4
