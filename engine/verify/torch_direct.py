"""Run a program in PyTorch straight from this reader's decoded graph: :func:`run_direct`.

``torch.export.load`` costs more than running the model (for Swin-T ~2 s CPU, and it imports
torch._dynamo): it rebuilds a GraphModule node by node through torch's deserializer. This reader
has already decoded the same graph and its weights, so the verifier calls each node's ATen
overload (``torch.ops.aten.conv2d.default``...) itself, in graph order, with the arguments the
file records — the same kernels torch.export.load's module would call — and keeps a copy of
every tensor value it is asked for.

The mode wrappers ``torch.no_grad()`` and ``torch.autocast(...)`` regions export as
(``higher_order.wrap_with_set_grad_enabled`` / ``wrap_with_autocast``, :data:`WRAPPERS`) run
their subgraph's nodes in place, in that mode, as the IR builder inlines them: their values are
captured under their own names like any other. Anything else outside that plain form raises
:class:`Unsupported`, and the caller falls back to
``torch.export.load`` (:mod:`.torch_run`): other higher-order ops (cond, map...), custom-op
namespaces other than aten / prims, custom objects, tokens, stored tensors this reader does not
decode (pickled payloads, float8...), non-contiguous stored tensors, devices other than the
CPU. Every value computed is checked against the dtype and rank the file records for it, so an
argument decoded wrongly ends the direct run instead of producing a wrong reference.

Nothing here unpickles: weights come from this reader's restricted loaders.
"""
from __future__ import annotations

import math
import operator
import time
import warnings
from typing import Any, Callable, Collection

import numpy as np

from ..reader import schema as S
from ..reader.tensors import DTYPES, raw_real
from .errors import cancelled_type, check_cancel, require
from .inputs import ModelInputs

#: operator namespaces run directly
NAMESPACES = ("aten", "prims")
#: Python-level targets of symbolic-size arithmetic
PY_TARGETS = {"_operator": operator, "math": math}
#: mode wrappers whose subgraph runs in place: target → the number of mode arguments before the
#: subgraph (``enabled``; ``device_type, dtype, enabled, cache_enabled``)
WRAPPERS = {"torch.ops.higher_order.wrap_with_set_grad_enabled": 1, "torch.ops.higher_order.wrap_with_autocast": 4}


class Unsupported(Exception):
    """The program needs ``torch.export.load`` (the message says why)."""


def _resolve(target: str):
    parts = target.split(".")
    if parts[0] == "torch" and len(parts) == 5 and parts[1] == "ops" and parts[2] in NAMESPACES:
        torch = require("torch")
        try:
            return getattr(getattr(getattr(torch.ops, parts[2]), parts[3]), parts[4]), True
        except (AttributeError, RuntimeError):
            raise Unsupported(f"unknown operator {target}") from None
    if len(parts) == 2 and parts[0] in PY_TARGETS and hasattr(PY_TARGETS[parts[0]], parts[1]):
        return getattr(PY_TARGETS[parts[0]], parts[1]), False
    if len(parts) == 2 and parts[0] == "torch" and parts[1].startswith("sym_"):
        return getattr(require("torch"), parts[1]), False
    raise Unsupported(f"{target} is not a plain ATen operator")


def _torch_dtype(st: S.ScalarType):
    torch = require("torch")
    dt = getattr(torch, st.torch_name, None)
    if dt is None:
        raise Unsupported(f"dtype {st.name}")
    return dt


class _Program:
    """The decoded program, its values as torch objects while it runs."""

    def __init__(self, ep, inputs: ModelInputs, wanted: set[str] | None, cancel):
        self.torch = require("torch")
        self.ep = ep
        self.wanted = wanted
        self.cancel = cancel
        self.env: dict[str, Any] = {}
        self.values: dict[str, np.ndarray] = {}
        self.metas = ep.graph.tensor_values
        self._load_inputs(inputs)

    # ---------------------------------------------------------------- inputs
    def _stored(self, info) -> Any:
        torch = self.torch
        meta = info.meta
        if info.payload is None or not info.payload.readable or meta is None:
            raise Unsupported(f"input {info.name}: no readable stored tensor")
        raw = raw_real(meta.dtype)
        if DTYPES[meta.dtype].raw_bits and not raw or not meta.is_contiguous or str(meta.device) != "cpu":
            raise Unsupported(f"input {info.name}: {meta.dtype.name} {meta.device} stored tensor")
        arr = np.array(self.ep.tensor(info.name))  # own, writable copy
        if raw:  # bfloat16 / float8: the stored bits, viewed as that dtype (numpy has none of them)
            bits = torch.from_numpy(arr.view(f"i{arr.dtype.itemsize}"))
            return bits.view(_torch_dtype(meta.dtype))
        return torch.from_numpy(arr).to(_torch_dtype(meta.dtype))

    def _load_inputs(self, inputs: ModelInputs) -> None:
        torch = self.torch
        given = dict(zip(inputs.names, zip(inputs.arrays, inputs.torch_dtypes)))
        for info in self.ep.signature.inputs:
            kind = info.kind
            if kind is S.InputKind.USER_INPUT and info.name in given:
                arr, dtype = given[info.name]
                self.env[info.name] = torch.from_numpy(np.ascontiguousarray(arr)).to(getattr(torch, dtype))
            elif kind is S.InputKind.CONSTANT_INPUT or kind is S.InputKind.USER_INPUT and info.meta is None:
                self.env[info.name] = info.value
            elif kind in (S.InputKind.PARAMETER, S.InputKind.BUFFER, S.InputKind.TENSOR_CONSTANT):
                self.env[info.name] = self._stored(info)
            else:
                raise Unsupported(f"input {info.name} is a {kind.value}")
            self._keep(info.name, self.env[info.name])

    # ---------------------------------------------------------------- arguments
    def _arg(self, a: S.Argument):
        tag, v = a.tag, a.value
        torch = self.torch
        if tag == "as_none":
            return None
        if tag in ("as_tensor", "as_optional_tensor", "as_sym_int", "as_sym_float", "as_sym_bool"):
            return self._ref(v)
        if tag in ("as_tensors", "as_optional_tensors", "as_sym_ints", "as_sym_floats", "as_sym_bools"):
            return [self._ref(x) for x in v]
        if tag in ("as_int", "as_float", "as_bool", "as_string", "as_ints", "as_floats", "as_bools", "as_strings",
                   "as_complex"):
            return list(v) if isinstance(v, (list, tuple)) else v
        if tag == "as_scalar_type":
            return _torch_dtype(v)
        if tag == "as_memory_format":
            name = {S.MemoryFormat.CONTIGUOUS: "contiguous_format", S.MemoryFormat.CHANNELS_LAST: "channels_last",
                    S.MemoryFormat.CHANNELS_LAST_3D: "channels_last_3d",
                    S.MemoryFormat.PRESERVE: "preserve_format"}.get(v)
            if name is None:
                raise Unsupported(f"memory format {v!r}")
            return getattr(torch, name)
        if tag == "as_layout":
            if v != S.Layout.STRIDED:
                raise Unsupported(f"layout {v!r}")
            return torch.strided
        if tag == "as_device":
            if v.type != "cpu":
                raise Unsupported(f"device {v}")
            return torch.device("cpu")
        raise Unsupported(f"argument kind {tag}")

    def _ref(self, v):
        if isinstance(v, (S.TensorRef, S.SymRef)):
            if v.name not in self.env:
                raise Unsupported(f"value {v.name} used before it is computed")
            return self.env[v.name]
        return v  # a concrete scalar in a symbolic slot, or None

    def _call_args(self, fn, node: S.Node, is_op: bool) -> tuple[list, dict]:
        given = {a.name: self._arg(a.arg) for a in node.inputs}
        if not is_op:
            return list(given.values()), {}
        args, kwargs, positional = [], {}, True
        for sa in fn._schema.arguments:
            if sa.name not in given:
                positional = False  # a default: later arguments go by name
                continue
            if positional and not sa.kwarg_only:
                args.append(given.pop(sa.name))
            else:
                kwargs[sa.name] = given.pop(sa.name)
        if given:
            raise Unsupported(f"{node.target}: arguments {sorted(given)} not in its schema")
        return args, kwargs

    # ---------------------------------------------------------------- outputs
    def _keep(self, name: str, value) -> None:
        if isinstance(value, self.torch.Tensor) and (self.wanted is None or name in self.wanted):
            from .torch_run import to_numpy

            self.values[name] = to_numpy(value)

    def _check(self, name: str, value) -> None:
        meta = self.metas.get(name)
        if meta is None or not isinstance(value, self.torch.Tensor):
            return
        if value.dtype != _torch_dtype(meta.dtype) or value.dim() != len(meta.sizes):
            raise Unsupported(f"{name}: computed {value.dtype} rank {value.dim()}, the file records "
                              f"{meta.dtype.name} rank {len(meta.sizes)}")

    @staticmethod
    def _one_value(node: S.Node) -> bool:
        """Whether the node returns one value (not a list of them)."""
        return len(node.outputs) == 1 and node.outputs[0].tag not in ("as_tensors", "as_optional_tensors")

    def _bind(self, node: S.Node, result) -> None:
        outs = node.outputs
        if not outs:  # an op run for its check alone (``_assert_tensor_metadata``): nothing to bind
            return
        if self._one_value(node):
            pairs = [(outs[0], result)]
        elif len(outs) == 1:
            pairs = [(S.Argument("as_tensor", r), v) for r, v in zip(outs[0].value, result)]
        else:
            if not isinstance(result, (tuple, list)) or len(result) != len(outs):
                raise Unsupported(f"{node.name}: {len(outs)} outputs recorded, the operator returned another number")
            pairs = list(zip(outs, result))
        for a, v in pairs:
            ref = a.value
            if a.tag == "as_none" or ref is None:
                continue
            if not isinstance(ref, (S.TensorRef, S.SymRef)):
                raise Unsupported(f"{node.name}: output kind {a.tag}")
            self._check(ref.name, v)
            self.env[ref.name] = v
            self._keep(ref.name, v)

    def run(self) -> list[str]:
        self._run_nodes(self.ep.nodes)
        return [o.name for o in self.ep.signature.user_outputs]

    def _run_nodes(self, nodes) -> None:
        for node in nodes:
            check_cancel(self.cancel, f"at PyTorch node {node.name}")
            if node.target in WRAPPERS:
                self._bind(node, self._wrapped(node, WRAPPERS[node.target]))
                continue
            fn, is_op = _resolve(node.target)
            args, kwargs = self._call_args(fn, node, is_op)
            self._bind(node, fn(*args, **kwargs))

    def _wrapped(self, node: S.Node, n_modes: int):
        """Run a mode wrapper's subgraph in its mode; its results, as the node returns them."""
        torch = self.torch
        args = [a.arg for a in node.inputs]
        if len(args) <= n_modes or not isinstance(args[n_modes].value, S.GraphArgument):
            raise Unsupported(f"{node.target}: not the expected form (mode arguments, then a subgraph)")
        modes = [self._arg(a) for a in args[:n_modes]]
        sub = args[n_modes].value.graph
        operands = [self._arg(a) for a in args[n_modes + 1:]]
        if len(operands) != len(sub.inputs):
            raise Unsupported(f"{node.name}: {len(operands)} operands for a subgraph of {len(sub.inputs)} inputs")
        for a, v in zip(sub.inputs, operands):
            if not isinstance(a.value, (S.TensorRef, S.SymRef)):
                raise Unsupported(f"{node.name}: subgraph input kind {a.tag}")
            self.env[a.value.name] = v
        mode = torch.set_grad_enabled(bool(modes[0])) if n_modes == 1 else \
            torch.autocast(device_type=modes[0], dtype=modes[1], enabled=bool(modes[2]), cache_enabled=modes[3])
        outer, self.metas = self.metas, sub.tensor_values
        try:
            with mode:
                self._run_nodes(sub.nodes)
        finally:
            self.metas = outer
        results = [self._ref(o.value) for o in sub.outputs]
        return results[0] if self._one_value(node) and len(results) == 1 else tuple(results)


def run_direct(ep, inputs: ModelInputs, *, keep: Collection[str] | None = None,
               cancel: Callable[[], bool] | None = None):
    """Run the engine ExportedProgram ``ep`` on ``inputs``; capture every tensor value (only
    those named in ``keep`` and the user outputs when ``keep`` is given). Raises
    :class:`Unsupported` when the program needs ``torch.export.load``."""
    from .torch_run import TorchValues

    torch = require("torch")
    t0 = time.perf_counter()
    outputs = [o.name for o in ep.signature.user_outputs]
    wanted = None if keep is None else set(keep) | set(outputs)
    program = _Program(ep, inputs, wanted, cancel)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            outputs = program.run()
        except (Unsupported, cancelled_type()):
            raise
        except Exception as e:  # an operator refused its arguments: let torch's own loader try
            raise Unsupported(f"{type(e).__name__}: {e}") from None
    return TorchValues(program.values, outputs, time.perf_counter() - t0)

