"""A model with heavy weights (``tests.harness.HeavyLinear``) writes its ncnn and pnnx sides on two threads
(``engine.convert.parallel``): the same bytes as one thread writes, a model the runtime runs,
and the guarantees of one thread kept — a failure or a cancel on either side leaves every old
file as it was and no temporary file, and the caller sees that failure."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from tests.harness import HeavyLinear, export_pt2, rel_error, run_ncnn, torch

from engine.convert import ConvertOptions, convert, parallel
from engine.errors import WriteError
from engine.passes.manager import Cancelled

FILES = ("m.ncnn.param", "m.ncnn.bin", "m.pnnx.param", "m.pnnx.bin", "m_pnnx.py", "m_ncnn.py")


@pytest.fixture(scope="module")
def heavy(tmp_path_factory):
    net = HeavyLinear().eval()
    x = torch.randn(1, 512)
    path = export_pt2(net, [x], tmp_path_factory.mktemp("heavy") / "m.pt2")
    res = convert(path)
    assert res.ok
    with torch.no_grad():
        want = net(x).numpy()
    return res, x, want


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _write(res, folder, **kw):
    return res.write_all(folder, "m", python=True, **kw)


def test_two_threads_write_the_bytes_one_thread_writes(heavy, tmp_path, monkeypatch):
    res, x, want = heavy
    assert parallel.worth_parallel(res.ncnn)
    threads = set()

    def cancel():
        threads.add(threading.current_thread().name)
        return False

    (tmp_path / "two").mkdir()
    paths = _write(res, tmp_path / "two", cancel=cancel)
    assert [p.name for p in paths] == list(FILES)
    assert "pt2ncnn-write-pnnx" in threads and threading.main_thread().name in threads  # both sides ran
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1 << 62)
    assert not parallel.worth_parallel(res.ncnn)
    (tmp_path / "one").mkdir()
    _write(res, tmp_path / "one")
    assert _files(tmp_path / "two") == _files(tmp_path / "one")
    d = tmp_path / "two"
    (got,) = run_ncnn(d / "m.ncnn.param", d / "m.ncnn.bin", [x[0].numpy()], 1)
    assert rel_error(np.asarray(got).reshape(want.shape), want) <= 2e-3  # fp16 weights


def test_a_graph_of_many_light_operators_stays_on_one_thread(tmp_path):
    net = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).eval()
    x = torch.randn(1, 64)
    res = convert(export_pt2(net, [x], tmp_path / "light.pt2"))
    assert not parallel.worth_parallel(res.ncnn)
    threads = set()
    res.write_all(tmp_path, "light", cancel=lambda: threads.add(threading.current_thread().name))
    assert threads == {threading.main_thread().name}
    with torch.no_grad():
        want = net(x).numpy()
    (got,) = run_ncnn(tmp_path / "light.ncnn.param", tmp_path / "light.ncnn.bin", [x[0].numpy()], 1)
    assert rel_error(np.asarray(got).reshape(want.shape), want) <= 5e-3  # fp16 weights


def _old(folder):
    folder.mkdir()
    for name in FILES:
        (folder / name).write_bytes(b"old " + name.encode())
    return _files(folder)


@pytest.mark.parametrize("side", ["ncnn", "pnnx"])
def test_a_failing_side_stops_the_other_and_leaves_the_old_files(heavy, tmp_path, side):
    res, _, _ = heavy
    out = tmp_path / "out"
    before = _old(out)
    paths = {f"{kind}_{ext}": out / f"m.{kind}.{ext}" for kind in ("ncnn", "pnnx") for ext in ("param", "bin")}
    paths[f"{side}_bin"] = out / "missing" / f"m.{side}.bin"  # that side fails as it starts writing
    with pytest.raises(WriteError, match="folder does not exist"):
        res.write(paths["ncnn_param"], paths["ncnn_bin"], paths["pnnx_param"], paths["pnnx_bin"],
                  pnnx_py=out / "m_pnnx.py", ncnn_py=out / "m_ncnn.py")
    assert _files(out) == before  # nothing replaced, no temporary file


@pytest.mark.parametrize("on", ["pt2ncnn-write-pnnx", "MainThread"])
def test_a_cancel_on_either_thread_stops_both(heavy, tmp_path, on):
    res, _, _ = heavy
    out = tmp_path / "out"
    before = _old(out)

    def cancel():
        return threading.current_thread().name == on

    with pytest.raises(Cancelled):
        _write(res, out, cancel=cancel)
    assert _files(out) == before
