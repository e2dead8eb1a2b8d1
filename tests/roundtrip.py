"""The generated Python scripts checked for real: ``<stem>_pnnx.py`` and ``<stem>_ncnn.py`` written
by a conversion, imported and run, and the PT2 round trip.

:func:`check_scripts` takes a :class:`ConversionResult` and the PyTorch module it came from and
checks, in order:

1. the ``_pnnx.py`` module runs on its own random inputs (``make_inputs()``, or the caller's)
   and matches the original module on them (relative error ≤ ``tol``, outputs in the original structure) — in
   float32, or, where fp32 rounding accumulates past ``tol`` (a deep network whose BatchNorms the
   pnnx graph folds into its convolutions), with both run in float64 (recorded in ``notes``);
2. its ``export_exported_program()`` succeeds (dynamic dims kept dynamic);
3. the ``_ncnn.py`` script runs the ncnn model on the same inputs and matches PyTorch
   (``ncnn_tol``; fp32 weights);
4. ``pt2ncnn`` converts the re-exported ``<stem>_pnnx.pt2``; its ncnn model, run by its own
   ``_ncnn.py``, gives the first conversion's outputs (``tol``) with no more layers.

Used by the writer tests and by ``tests/benchmarks/check_python_export.py``. Relative error is
max |a − b| / max |b|, as in :mod:`tests.harness`.
"""
from __future__ import annotations

import importlib.util
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.convert import ConvertOptions, convert

_COUNTER = itertools.count()


def load_script(path: Path):
    """Import a generated script as a fresh module."""
    spec = importlib.util.spec_from_file_location(f"generated_{next(_COUNTER)}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def flatten(value: Any) -> list:
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flatten(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in flatten(v)]
    return [value]


def structure(value: Any) -> Any:
    """The nesting of ``value`` with the leaves blanked (to compare two outputs' structure)."""
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [structure(v) for v in value]
    if isinstance(value, dict):
        return "dict", [(k, structure(v)) for k, v in value.items()]
    return "leaf"


def rel_error(got, want) -> float:
    g = np.asarray(torch.as_tensor(got).detach().double().numpy(), np.float64)
    w = np.asarray(torch.as_tensor(want).detach().double().numpy(), np.float64)
    assert g.shape == w.shape, f"shape {g.shape} differs from {w.shape}"
    if not w.size:
        return 0.0
    return float(np.abs(g - w).max()) / max(float(np.abs(w).max()), 1e-6)


def max_error(got, want) -> float:
    assert structure(got) == structure(want), f"output structure {structure(got)} differs from {structure(want)}"
    return max([rel_error(g, w) for g, w in zip(flatten(got), flatten(want))] or [0.0])


@dataclass
class ScriptCheck:
    pnnx_py: Path
    ncnn_py: Path
    pnnx_error: float = float("nan")  #: _pnnx.py vs the original module
    pnnx_error_fp64: float | None = None  #: the same in float64, when fp32 rounding exceeded the tolerance
    ncnn_error: float = float("nan")  #: _ncnn.py vs the original module
    roundtrip_error: float = float("nan")  #: re-exported model's ncnn outputs vs the first ncnn model's
    layers: int = 0
    roundtrip_layers: int = 0
    notes: list[str] = field(default_factory=list)


def _error_in_float64(gen, module, args, kwargs) -> float:
    """_pnnx.py vs the module, both run in float64 (copies): what is left is not rounding."""
    import copy

    def f64(v):
        return v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v

    a64 = torch.utils._pytree.tree_map(f64, (args, kwargs))
    with torch.no_grad():
        want = copy.deepcopy(module).double()(*a64[0], **a64[1])
        got = gen.Model().double()(*a64[0], **a64[1])
    return max_error(got, want)


def check_scripts(result, module, folder: Path, stem: str = "model", *, tol: float = 1e-5, ncnn_tol: float = 1e-4,
                  ncnn: bool = True, roundtrip: bool = True, inputs: list | None = None) -> ScriptCheck:
    """Write the scripts of ``result`` (fp32 weights) into ``folder`` and check them against
    ``module`` (see the module docstring); asserts on every failure. ``inputs``: the module's
    positional tensor arguments to run everything on instead of the scripts' ``make_inputs()``
    (a test's own inputs: ``make_inputs()`` draws from [0, 1), where ``|x| - x`` is all zeros and
    a relative error measures nothing but rounding)."""
    folder.mkdir(parents=True, exist_ok=True)
    result.write_all(folder, stem, python=True, fp16=False, partial=not result.ok)
    check = ScriptCheck(folder / f"{stem}_pnnx.py", folder / f"{stem}_ncnn.py", layers=result.layer_count)
    gen = load_script(check.pnnx_py)
    args, kwargs = gen.make_inputs()
    if inputs is not None:
        args, kwargs = tuple(inputs), {}
    with torch.no_grad():
        want = module(*args, **kwargs)
        got = gen.test_inference() if inputs is None else gen.Model()(*args)
    check.pnnx_error = max_error(got, want)
    if check.pnnx_error > tol:  # fp32 rounding (a folded BatchNorm rounds otherwise), or a real difference?
        check.pnnx_error_fp64 = _error_in_float64(gen, module, args, kwargs)
        check.notes.append(f"fp32 {check.pnnx_error:.1e}, fp64 {check.pnnx_error_fp64:.1e}")
        assert check.pnnx_error_fp64 <= tol, \
            f"{check.pnnx_py.name}: relative error {check.pnnx_error:.3g} (float64: {check.pnnx_error_fp64:.3g}) > {tol}"
    gen.export_exported_program()
    pt2 = Path(gen.OUTPUT_STEM + ".pt2")
    assert pt2.is_file(), f"export_exported_program() wrote no {pt2}"
    if not ncnn:
        return check
    first = load_script(check.ncnn_py)
    ncnn_in = first.make_inputs() if inputs is None else list(inputs)
    ncnn_out = first.run(ncnn_in)
    check.ncnn_error = max_error(ncnn_out, want)
    assert check.ncnn_error <= ncnn_tol, f"{check.ncnn_py.name}: relative error {check.ncnn_error:.3g} > {ncnn_tol}"
    if not roundtrip:
        return check
    again = convert(str(pt2), ConvertOptions(fp16=False, lint=True))
    assert again.ok, f"{pt2.name} did not convert: {[str(d) for d in again.errors]}"
    check.roundtrip_layers = again.layer_count
    again.write_all(folder, f"{stem}_roundtrip", python=True, fp16=False)
    second = load_script(folder / f"{stem}_roundtrip_ncnn.py")
    check.roundtrip_error = max_error(second.run(ncnn_in), ncnn_out)
    assert check.roundtrip_error <= tol, f"round trip: relative error {check.roundtrip_error:.3g} > {tol}"
    assert check.roundtrip_layers <= check.layers, \
        f"round trip: {check.roundtrip_layers} ncnn layers, more than the first conversion's {check.layers}"
    return check
