"""Run an ExportedProgram in PyTorch and capture every intermediate value (imports torch lazily).

The program is loaded with ``torch.export.load``; its ``graph_module`` (the lifted graph whose
node names are the serialized node / value names the converter's provenance uses) runs under a
``torch.fx.Interpreter`` that records a copy of every tensor a node produces, so a later in-place
op does not change what was recorded. Parameters, buffers and constants are passed from the
program's state in signature order.
"""
from __future__ import annotations

import logging
import os
import warnings
from typing import Callable, Collection

import numpy as np

from ..errors import PT2Error
from ..records import record
from .errors import VerifyError, cancelled_type, check_cancel, require
from .inputs import ModelInputs

log = logging.getLogger(__name__)


@record
class TorchValues:
    """Every tensor value of one PyTorch run, by ATen value name (numpy, batch axis kept)."""

    values: dict[str, np.ndarray]
    outputs: list[str]  #: the user outputs' value names, in order
    seconds: float = 0.0
    runner: str = "torch.export.load"  #: or ``direct`` (:mod:`.torch_direct`)


def vet_for_torch(path: str | os.PathLike, package=None) -> None:
    """Refuse a package ``torch.export.load`` must not see. PyTorch unpickles weights and
    constants stored as pickles (``torch.load(weights_only=False)``), custom and opaque objects
    (TorchScript's unpickler, ``pickle.loads``) and the sample inputs (falling back to
    ``weights_only=False``) — a crafted file runs code there. So every pickle it would load must
    first pass this reader's restricted unpickler, and payloads this reader never decodes
    (custom / opaque objects, tensor subclasses) are not handed over at all."""
    from contextlib import nullcontext

    from ..reader.package import load

    try:
        with (nullcontext(package) if package is not None else load(path)) as pkg:
            for ep in pkg.models.values():
                for e in ep.tensors.entries() + ep.tensors.objects():
                    if not e.readable:
                        raise VerifyError(f"{path}: {e.member or e.fqn}: not run in PyTorch: '{e.fqn}' is a payload "
                                          f"only PyTorch's unrestricted unpickler reads ({e.reason})")
                ep.sample_inputs()
    except PT2Error as e:
        if isinstance(e, VerifyError):
            raise
        raise VerifyError(f"{path}: not run in PyTorch, which would unpickle it without restrictions: {e}") from None


def load_program(path: str | os.PathLike, model: str | None = None):
    """``torch.export.load`` of the package (one named model of a multi-model package), once
    :func:`vet_for_torch` accepted it."""
    torch = require("torch")
    vet_for_torch(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecation notes while loading
            if model and model != "model":
                from torch.export.pt2_archive._package import load_pt2

                return load_pt2(os.fspath(path)).exported_programs[model]
            return torch.export.load(os.fspath(path))
    except Exception as e:  # torch's own reasons: a newer schema, a custom op not registered...
        raise VerifyError(f"{path}: PyTorch cannot load the program: {type(e).__name__}: {e}") from None


def to_numpy(t) -> np.ndarray:
    """A contiguous numpy copy of tensor ``t`` (one copy: a later in-place op must not change it)."""
    torch = require("torch")
    t = t.detach()
    if t.dtype in (torch.bfloat16,) or getattr(t.dtype, "itemsize", 4) == 1 and t.dtype.is_floating_point:
        t = t.float()
    if t.is_complex():
        t = t.resolve_conj()
    a = t.numpy()
    return a.copy() if a.flags.c_contiguous else np.ascontiguousarray(a)


def _flat_args(ep, inputs: ModelInputs) -> list:
    torch = require("torch")
    from torch.export.graph_signature import InputKind, TensorArgument

    given = {n: torch.from_numpy(np.ascontiguousarray(a)).to(getattr(torch, d))
             for n, a, d in zip(inputs.names, inputs.arrays, inputs.torch_dtypes)}
    args = []
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if spec.kind == InputKind.USER_INPUT:
            if isinstance(spec.arg, TensorArgument):
                if name not in given:
                    raise VerifyError(f"no value for model input {name}")
                args.append(given[name])
            else:
                args.append(getattr(spec.arg, "value", None))
        elif spec.kind == InputKind.PARAMETER or (spec.kind == InputKind.BUFFER and spec.persistent is not False):
            args.append(ep.state_dict[spec.target])
        elif spec.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            args.append(ep.constants[spec.target])
        else:
            raise VerifyError(f"input {name}: {spec.kind.name} inputs are not supported by verify")
    return args


def run_program(ep, inputs: ModelInputs, *, keep: Collection[str] | None = None,
                cancel: Callable[[], bool] | None = None) -> TorchValues:
    """Run ``ep`` (a torch ExportedProgram) on ``inputs``; capture every tensor value (only those
    named in ``keep``, and the user outputs, when ``keep`` is given)."""
    import time

    torch = require("torch")
    from torch.export.graph_signature import OutputKind

    Cancelled = cancelled_type()
    values: dict[str, np.ndarray] = {}
    outputs = [getattr(s.arg, "name", "") for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    wanted = None if keep is None else set(keep) | set(outputs)

    class Capture(torch.fx.Interpreter):
        def run_node(self, n):
            check_cancel(cancel, f"at PyTorch node {n.name}")
            out = super().run_node(n)
            if isinstance(out, torch.Tensor) and n.op != "output" and (wanted is None or n.name in wanted):
                values[n.name] = to_numpy(out)
            return out

    t0 = time.perf_counter()
    args = _flat_args(ep, inputs)
    try:
        with torch.no_grad():
            Capture(ep.graph_module).run(*args, enable_io_processing=False)
    except Cancelled:
        raise
    except Exception as e:
        raise VerifyError(f"PyTorch failed to run the program: {type(e).__name__}: {e}") from None
    return TorchValues(values, outputs, time.perf_counter() - t0)


def run_torch(path: str | os.PathLike, ep, inputs: ModelInputs, *, model: str | None = None,
              keep: Collection[str] | None = None, cancel: Callable[[], bool] | None = None) -> TorchValues:
    """Run the program of the engine ExportedProgram ``ep`` (read from ``path``) in PyTorch:
    straight from the decoded graph when it is plain ATen (:func:`.torch_direct.run_direct`),
    else through ``torch.export.load`` (:func:`load_program`, :func:`run_program`)."""
    from .torch_direct import Unsupported, run_direct

    vet_for_torch(path, ep.package)  # the same refusals either way: a package is run whole or not at all
    try:
        tv = run_direct(ep, inputs, keep=keep, cancel=cancel)
        tv.runner = "direct"
        return tv
    except Unsupported as e:
        log.info("running %s through torch.export.load: %s", path, e)
    return run_program(load_program(path, model), inputs, keep=keep, cancel=cancel)
