"""Small ``.pt2`` packages made with real ``torch.export`` for the reader's unit tests.

Each ``*_pt2()`` exports its module once per test session (cached) into a temporary folder and
returns ``(path, torch_exported_program)``. Also holds helpers that rewrite members of a
package (``rewrite``, ``edit_json``) to provoke the reader's error paths. Needs torch: callers
skip when it is missing.
"""
from __future__ import annotations

import atexit
import collections
import dataclasses
import functools
import json
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest

_DIR = Path(tempfile.mkdtemp(prefix="pt2ncnn-reader-unit-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)


def _torch():
    return pytest.importorskip("torch")


@functools.cache
def feat_pt2():
    """conv/bn, tied + transposed parameters, a sliced buffer, non-persistent buffer, tensor
    constant, fp16/bf16/int8/bool/uint16/float8 buffers, and ops that serialize as_string,
    as_scalar_type, as_memory_format, as_floats, as_tensors, as_optional_tensors, as_device,
    as_layout, as_none."""
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    class Feat(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.lin1 = nn.Linear(4, 4, bias=False)
            self.lin2 = nn.Linear(4, 4, bias=False)
            self.lin2.weight = self.lin1.weight
            self.wt = nn.Parameter(torch.randn(5, 3).t())
            self.register_buffer("full", torch.arange(10.0))
            self.register_buffer("part", self.full[5:9])
            self.register_buffer("scratch", torch.ones(4), persistent=False)
            self.register_buffer("h", torch.randn(4).half())
            self.register_buffer("bf", torch.randn(4).bfloat16())
            self.register_buffer("i8", torch.arange(-2, 2, dtype=torch.int8))
            self.register_buffer("flag", torch.tensor([True, False, True, True]))
            self.register_buffer("u16", torch.tensor([1, 2, 300, 65535], dtype=torch.uint16))
            self.register_buffer("f8", torch.randn(4).to(torch.float8_e4m3fn))
            self.c = torch.tensor([1.0, 2.0, 3.0, 4.0])

        def forward(self, x, idx):
            y = F.gelu(self.bn(self.conv(x)), approximate="tanh")
            y = y.contiguous(memory_format=torch.channels_last)
            y = F.interpolate(y, scale_factor=2.0, mode="nearest")
            z = y.mean((2, 3))
            z = (self.lin2(self.lin1(z)) + self.part + self.scratch + self.c + self.h.float()
                 + self.bf.float() + self.i8 + self.flag + self.u16.float() + self.f8.float())
            z = torch.cat([z, z], 1).to(torch.float64)
            w = z[:, None, idx]
            e = torch.zeros(2, 3, device="cpu", dtype=torch.float32) + (self.wt.sum() + self.full.sum())
            return w, e, torch.where(z > 0, z, 0.5)

    torch.manual_seed(0)
    m = Feat().eval()
    with torch.no_grad():
        ep = torch.export.export(m, (torch.randn(2, 3, 8, 8), torch.tensor([0, 2])))
    return _save(ep, "feat.pt2"), ep


Pair = collections.namedtuple("Pair", ["a", "b"])


@dataclasses.dataclass
class Box:
    w: object
    tag: object


@functools.cache
def io_pt2():
    """Namedtuple / list / dict / int inputs, dict / list / namedtuple / dataclass outputs, a
    dynamic dim, a buffer mutation and a user-input mutation; core ATen dialect."""
    torch = _torch()
    import torch.utils._pytree as pytree
    from torch.export import Dim

    if Pair not in pytree.SUPPORTED_NODES:
        pytree._register_namedtuple(Pair, serialized_type_name="unit.Pair")
        torch.export.register_dataclass(Box, serialized_type_name="unit.Box")

    class IO(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.register_buffer("count", torch.zeros(1))

        def forward(self, pair, items, table, k: int = 2):
            self.count.add_(1)
            items[0].mul_(2.0)
            x = pair.a + pair.b
            y = self.lin(torch.cat(items, 0))
            r = x.reshape(x.shape[0], -1) * table["w"] * k
            return {"sum": r, "parts": [y, r.sum(1)]}, Pair(y.mean(), r.max()), Box(r.min(), y.sum())

    torch.manual_seed(0)
    b = Dim("b", min=2, max=64)
    args = (Pair(torch.randn(4, 3), torch.randn(4, 3)), [torch.randn(2, 3), torch.randn(2, 3)],
            {"w": torch.randn(4, 3)}, 3)
    ds = (Pair(a={0: b}, b={0: b}), [None, None], {"w": {0: b}}, None)
    ep = torch.export.export(IO(), args, dynamic_shapes=ds).run_decompositions()
    return _save(ep, "io.pt2"), ep


@functools.cache
def cond_pt2():
    """``torch.cond``: nodes with ``as_graph`` subgraph arguments."""
    torch = _torch()

    class Cond(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: self.lin(t).relu(), lambda t: t - 1.0, (x,))

    with torch.no_grad():
        ep = torch.export.export(Cond(), (torch.randn(2, 3),))
    return _save(ep, "cond.pt2"), ep


@functools.cache
def tiny_pt2():
    """One linear layer with extra files: the cheapest valid package."""
    torch = _torch()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU())
    ep = torch.export.export(m, (torch.randn(1, 4),))
    path = _DIR / "tiny.pt2"
    torch.export.save(ep, str(path), extra_files={"notes.txt": "hello"})
    return path, ep


def _save(ep, name: str) -> Path:
    path = _DIR / name
    _torch().export.save(ep, str(path))
    return path


# ------------------------------------------------------------------------------ rewriting
def members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i.filename) for i in z.infolist()}


def write_zip(path, contents: dict[str, bytes], *, compression=zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in contents.items():
            z.writestr(name, data)
    return Path(path)


def rewrite(src, dst, changes: dict[str, bytes | None]) -> Path:
    """Copy ``src`` to ``dst`` replacing (bytes) or deleting (None) members; new names are added."""
    contents = members(src)
    for name, data in changes.items():
        if data is None:
            contents.pop(name, None)
        else:
            contents[name] = data
    return write_zip(dst, contents)


def model_member(path, suffix: str = "models/model.json") -> str:
    return next(n for n in members(path) if n.endswith(suffix))


def edit_json(src, dst, fn, suffix: str = "models/model.json") -> Path:
    """Apply ``fn(doc)`` (in place, or returning a replacement) to a JSON member."""
    name = model_member(src, suffix)
    doc = json.loads(members(src)[name])
    out = fn(doc)
    doc = doc if out is None else out
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return rewrite(src, dst, {name: data})
