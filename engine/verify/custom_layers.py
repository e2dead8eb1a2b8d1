"""Plug-in custom layers in the ncnn Python runtime, for verification: :func:`acquire`.

A plug-in declares its own ncnn layer type with a Python function computing it
(:func:`engine.convert.ncnn_custom_layer`); to run the converted model, each such type is
registered with ``Net.register_custom_layer`` as a ``ncnn.Layer`` subclass calling that
function on the layer's input (numpy, ncnn's layout) with the layer's params and weights. It
reads its weights from the .bin as the writer stored them (raw float32), so the layers after it
load theirs from the right place.

Two limits of the pip ``ncnn`` binding shape this module:

* a process can register at most 10 custom layer types in all (each registration takes one of
  ten fixed slots, never given back), so nets hosting custom layers are pooled by their set of
  types and reused (``Net.clear`` keeps the registrations): repeated verifications of the same
  model take no new slot;
* a custom layer's ``forward`` with several inputs or outputs gets a copy of the output list,
  so its results never reach the runtime: only layers of one input and one output can run,
  others are refused with that reason.
"""
from __future__ import annotations

import inspect
import logging
import threading
from typing import Any, Sequence

import numpy as np

from ..records import field, record
from .errors import VerifyError, require

log = logging.getLogger(__name__)

#: what the binding allows per process (``g_layer_factroys`` in ncnn's python/src/main.cpp)
MAX_REGISTRATIONS = 10


@record
class CustomRun:
    """One custom layer of a model file: its declaration and what it was converted with."""

    name: str
    spec: Any  #: the :class:`engine.convert.CustomLayer`
    params: dict
    weights: list  #: numpy arrays, in load order
    n_inputs: int = 1
    n_outputs: int = 1


@record
class _Host:
    """A net with custom layer types registered, and the layers it is to create next."""

    net: Any
    types: frozenset
    pending: dict = field(default_factory=dict)  # type -> [CustomRun] still to create, file order
    alive: list = field(default_factory=list)  # the layer objects of the loaded model
    errors: list = field(default_factory=list)

    def take_error(self) -> str | None:
        return self.errors.pop(0) if self.errors else None


_lock = threading.Lock()
_free: dict[frozenset, list[_Host]] = {}
_registered = 0


def _call(spec, x: np.ndarray, run: CustomRun) -> np.ndarray:
    try:
        sig = inspect.signature(spec.forward).parameters
    except (TypeError, ValueError):
        sig = {}
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.values())
    extra = {k: v for k, v in (("params", dict(run.params)), ("weights", list(run.weights)))
             if var_kw or k in sig}
    y = spec.forward(x, **extra)
    return np.ascontiguousarray(np.asarray(y, dtype=np.float32))


def _layer_class(ncnn):
    class PluginLayer(ncnn.Layer):
        def __init__(self, host: _Host, run: CustomRun | None):
            ncnn.Layer.__init__(self)
            self.one_blob_only = True
            self.support_inplace = False
            self.host, self.run = host, run

        def load_model(self, mb):
            for w in self.run.weights if self.run is not None else ():
                if np.asarray(w).size and mb.load(int(np.asarray(w).size), 1).empty():
                    return -100
            return 0

        def forward(self, bottom_blob, top_blob, opt):
            if self.run is None:
                self.host.errors.append("a custom layer the conversion did not declare")
                return -1
            try:
                y = _call(self.run.spec, np.array(bottom_blob), self.run)
            except Exception as e:  # the plug-in's function: report it, never crash the runtime
                self.host.errors.append(f"custom layer {self.run.name} ({self.run.spec.type}): "
                                        f"{type(e).__name__}: {e}")
                return -1
            top_blob.clone_from(ncnn.Mat(y), opt.blob_allocator)
            return 0 if not top_blob.empty() else -100

    return PluginLayer


def _new_host(types: frozenset) -> _Host:
    global _registered
    ncnn = require("ncnn")
    if _registered + len(types) > MAX_REGISTRATIONS:
        raise VerifyError(f"ncnn's Python runtime registers at most {MAX_REGISTRATIONS} custom layer types per "
                          f"process ({_registered} taken); verify this model in a new process")
    cls = _layer_class(ncnn)
    host = _Host(ncnn.Net(), types)

    def creator_for(t):
        def create():
            queue = host.pending.get(t)
            layer = cls(host, queue.pop(0) if queue else None)
            host.alive.append(layer)
            return layer
        return create

    for t in sorted(types):
        host.net.register_custom_layer(t, creator_for(t), lambda layer: None)
        _registered += 1
    return host


def acquire(runs: Sequence[CustomRun]) -> _Host:
    """A net able to load a model with these custom layers (in file order)."""
    for r in runs:
        if (r.n_inputs, r.n_outputs) != (1, 1):
            raise VerifyError(f"custom layer {r.name} ({r.spec.type}) has {r.n_inputs} input(s) and "
                              f"{r.n_outputs} output(s): ncnn's Python runtime runs custom layers of one input "
                              "and one output only, so this model cannot be verified")
    types = frozenset(r.spec.type for r in runs)
    with _lock:
        pool = _free.get(types)
        host = pool.pop() if pool else _new_host(types)
    host.net.clear()
    host.alive.clear()
    host.errors.clear()
    host.pending = {}
    for r in runs:
        host.pending.setdefault(r.spec.type, []).append(r)
    return host


def release(host: _Host) -> None:
    host.net.clear()
    host.alive.clear()
    with _lock:
        _free.setdefault(host.types, []).append(host)
