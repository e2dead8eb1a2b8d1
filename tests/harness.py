"""The numeric conversion harness every converter test uses.

build a torch module → ``torch.export`` (TRAINING dialect, or its ``run_decompositions()`` core
ATen form) → ``torch.export.save`` → ``engine.convert`` (linting after every pass) → write
``.ncnn.param``/``.ncnn.bin`` → run the real ncnn runtime → compare with PyTorch.

Tolerances (relative to the output's max magnitude): fp32 weights ≤ 1e-4, fp16 weights ≤ 5e-3.
The ncnn runtime runs with fp16/bf16 storage and arithmetic off and one thread, so the only
fp16 effect is the stored weights.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ncnn = pytest.importorskip("ncnn")

import engine  # noqa: E402
from engine.convert import ConvertOptions, convert  # noqa: E402
from engine.diagnostics import format_table  # noqa: E402
from tests.ncnn_runtime import run, run_layout  # noqa: E402

TOL = {False: 1e-4, True: 5e-3}
DIALECTS = ("training", "core")


class Fn(torch.nn.Module):
    """A function of the inputs as a module: ``check_module(Fn(lambda x: x.flatten(1)), ...)``."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class HeavyLinear(torch.nn.Module):
    """36 MB of weights in three layers, input (1, 512): heavy enough that the ncnn and the pnnx
    model are written on two threads (``engine.convert.parallel``)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(512, 4096)
        self.fc2 = torch.nn.Linear(4096, 1536)
        self.fc3 = torch.nn.Linear(1536, 64)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def export_pt2(module, inputs: Sequence, path: Path, *, dialect: str = "training", dynamic_shapes=None) -> Path:
    """Export ``module`` on ``inputs`` and save the package to ``path``."""
    module = module.eval()
    ep = torch.export.export(module, tuple(inputs), dynamic_shapes=dynamic_shapes)
    if dialect == "core":
        ep = ep.run_decompositions()
    torch.export.save(ep, str(path))
    return path


def run_ncnn(param: Path, bin_: Path, inputs: Sequence[np.ndarray], n_outputs: int) -> list[np.ndarray]:
    """Run an ncnn model on batch-less inputs ``in0..``; return ``out0..`` as numpy arrays."""
    return run(param, bin_, {f"in{k}": a for k, a in enumerate(inputs)}, [f"out{k}" for k in range(n_outputs)])


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    scale = max(float(np.abs(want).max()) if want.size else 0.0, 1e-6)
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) / scale if want.size else 0.0


@dataclass
class Checked:
    result: Any  #: the ConversionResult
    outputs: list[np.ndarray]  #: ncnn outputs
    expected: list[np.ndarray]  #: PyTorch outputs
    errors: list[float]  #: relative errors per output
    param: Path
    bin: Path


def _flatten_outputs(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten_outputs(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _flatten_outputs(o)]
    raise TypeError(type(out))


def check_module(module, inputs: Sequence, tmp_path: Path, *, dialect: str = "training", fp16: bool = False,
                 name: str = "model", batched: Sequence[bool] | None = None, converters: Sequence = (),
                 expect_types: Sequence[str] | None = None, forbid_types: Sequence[str] = (),
                 dynamic_shapes=None, run_inputs: Sequence | None = None, tol: float | None = None) -> Checked:
    """Export, convert, run in ncnn and compare; fails the test with the diagnostics table when
    conversion is incomplete, or with the error when outputs differ.

    Inputs are fed, and outputs read, along the batch axis the converter chose for each
    (``result.ncnn.meta["inputs"/"outputs"]``: ``ncnn.Mat(x, batch_index=b)``), so outputs
    are compared in PyTorch's full shapes. ``batched[i]``, when given, asserts whether user
    input ``i`` got a batch axis.
    ``expect_types``: ncnn layer types that must appear; ``forbid_types``: that must not.
    ``run_inputs``: inputs to run ncnn/PyTorch on (default ``inputs``), e.g. another size
    for a dynamic-shape model.
    """
    module = module.eval()
    pt2 = export_pt2(module, inputs, tmp_path / f"{name}_{dialect}.pt2", dialect=dialect, dynamic_shapes=dynamic_shapes)
    result = convert(str(pt2), ConvertOptions(fp16=fp16, lint=True, converters=list(converters)))
    if not result.ok:
        pytest.fail("conversion incomplete:\n" + format_table(result.errors))
    param, bin_ = tmp_path / f"{name}_{dialect}.ncnn.param", tmp_path / f"{name}_{dialect}.ncnn.bin"
    result.write(param, bin_, tmp_path / f"{name}_{dialect}.pnnx.param", tmp_path / f"{name}_{dialect}.pnnx.bin")
    types = [op.type for op in result.ncnn.ops]
    for t in expect_types or ():
        assert t in types, f"expected an ncnn {t} layer, got {types}"
    for t in forbid_types:
        assert t not in types, f"unexpected ncnn {t} layer in {types}"
    layout = result.ncnn.meta
    if batched is not None:
        got_batched = [spec["batch_dim"] is not None for spec in layout["inputs"]]
        assert got_batched == list(batched), f"inputs batched {got_batched}, expected {list(batched)}"
    run_in = list(run_inputs if run_inputs is not None else inputs)
    with torch.no_grad():
        expected = [t.detach().numpy() for t in _flatten_outputs(module(*run_in))]
    # token ids are fed as int32 (ncnn's Embed reads them so), every other input as float32
    np_in = [x.detach().numpy().astype(np.int32 if spec.get("dtype") == "int32" else np.float32)
             for spec, x in zip(layout["inputs"], run_in)]
    got = run_layout(param, bin_, np_in, layout)
    assert len(got) == len(expected), f"{len(got)} ncnn outputs for {len(expected)} PyTorch outputs"
    errors = []
    limit = tol if tol is not None else TOL[fp16]
    for k, (g, want) in enumerate(zip(got, expected)):
        assert g.size == want.size, f"out{k}: ncnn shape {g.shape}, PyTorch {want.shape}"
        err = rel_error(g.reshape(want.shape), want)
        errors.append(err)
        assert err <= limit, f"out{k}: relative error {err:.3g} > {limit} ({dialect}, fp16={fp16})\n{result.ncnn.to_text()}"
    return Checked(result, got, expected, errors, param, bin_)
