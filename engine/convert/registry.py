"""Converter registries (Torch-TensorRT style): lowering rules keyed by op, with a capability
validator and a priority.

Two registries share one mechanism:

* :data:`ATEN` — ATen overload → pnnx ops. Keys must name an overload
  (``aten.conv2d.default``; ``aten.conv2d`` is refused). Python-operator targets such as
  ``_operator.mul`` are keys as they appear in the graph.
* :data:`NCNN` — pnnx op type → ncnn layers (``nn.Conv2d``, ``F.relu``, ``torch.cat``...).

A rule is a function ``fn(ctx, op) -> Operand | Sequence[Operand] | None`` (see
:mod:`engine.convert.context`): it emits replacement operators through ``ctx`` and returns the
operand(s) that replace ``op``'s outputs, in order. A validator ``validator(op, ctx) -> None |
True | str`` accepts the op (None/True) or refuses it with a reason (``"unsupported:
padding_mode='circular'"``). Candidates are tried by descending priority, then most recently
registered first; the first whose validator accepts wins. Plug-ins register with
:data:`Priority.HIGH` by default, so they override built-ins.

Usage::

    from engine.convert import aten_converter, ncnn_rule

    @aten_converter("aten.relu.default")
    def relu(ctx, op):
        return ctx.emit("F.relu", [op.inputs[0]])
"""
from __future__ import annotations

import enum
import functools
import itertools
import re
from typing import Any, Callable, Iterable

from ..ir.vocab import is_ncnn
from ..records import record

Validator = Callable[..., Any]
ConverterFn = Callable[..., Any]


class Priority(enum.IntEnum):
    LOW = 0
    STANDARD = 50
    HIGH = 100


class RegistryError(ValueError):
    """A malformed registration (bad key, not callable...)."""


class Refusal(str):
    """A validator's reason for refusing an op (a ``str``); ``where`` is the ``file:line`` of the
    plug-in code at fault ("" for a built-in rule)."""

    where = ""

    @classmethod
    def at(cls, text: str, where: str) -> "Refusal":
        r = cls(text)
        r.where = where
        return r


@record
class Converter:
    """One registered rule."""

    target: str
    fn: ConverterFn
    validator: Validator | None
    priority: int
    origin: str  #: ``builtin:<module>`` or ``plugin:<file>``
    seq: int  #: registration order (later wins among equal priorities)

    @property
    def name(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__qualname__}"

    @functools.cached_property
    def tag(self) -> str:
        """What the operators this rule emitted carry in ``meta["converted_by"]``:
        ``<plug-in file>::<function>`` for a plug-in's rule, the qualified name of a built-in."""
        path = self.plugin_file
        return self.name if path is None else f"{path}::{self.fn.__qualname__}"

    @property
    def plugin_file(self) -> str | None:
        """The plug-in file that registered this rule (None for a built-in)."""
        return self.origin[len("plugin:"):] if self.origin.startswith("plugin:") else None

    def location(self, exc: BaseException | None = None, fn: Callable | None = None) -> str:
        """``file:line`` in this rule's plug-in file: the line where ``exc`` was raised when it
        passed through the file, else where ``fn`` (default: the rule) is defined; "" for a
        built-in."""
        from .plugins import line_in

        path = self.plugin_file
        if path is None:
            return ""
        line = line_in(path, exc.__traceback__) if exc is not None else None
        if line is None:
            code = getattr(fn or self.fn, "__code__", None)
            line = code.co_firstlineno if code is not None else None
        return path if line is None else f"{path}:{line}"

    @property
    def label(self) -> str:
        """How messages name the rule: ``converter <module.function>`` for a built-in,
        ``plug-in rule <function> (<file>:<line>)`` for a plug-in's."""
        if self.plugin_file is None:
            return f"converter {self.name}"
        return f"plug-in rule {self.fn.__qualname__} ({self.location()})"

    def check(self, op, ctx) -> Refusal | None:
        """None if this converter accepts ``op``, else the refusal reason."""
        if self.validator is None:
            return None
        try:
            verdict = self.validator(op, ctx)
        except Exception as e:  # a crashing validator is a refusal, never a crash
            where = self.location(e, self.validator) or self.origin.removeprefix("builtin:")
            return Refusal.at(f"validator {getattr(self.validator, '__name__', 'validator')} ({where}) failed: "
                              f"{type(e).__name__}: {e}", self.location(e, self.validator))
        if verdict is None or verdict is True:
            return None
        where = self.location(fn=self.validator)  # only for a refusal
        if verdict is False:
            return Refusal.at(f"unsupported: rejected by {getattr(self.validator, '__name__', 'validator')}", where)
        return Refusal.at(str(verdict), where)


_ATEN_KEY = re.compile(r"^[A-Za-z_][\w]*\.[A-Za-z_][\w]*\.[A-Za-z_][\w]*$")
_PY_KEY = re.compile(r"^(_operator|operator|builtins|math|torch|torch\._C\._nn|_?sym)\.[\w.]+$")


def _check_aten_key(key: str) -> str:
    key = key[len("torch.ops."):] if key.startswith("torch.ops.") else key
    if _ATEN_KEY.match(key):
        return key
    if key.count(".") == 1 and not _PY_KEY.match(key):
        raise RegistryError(f"converter key {key!r} names no overload: register e.g. {key + '.default'!r} "
                            "(every overload is registered separately)")
    if _PY_KEY.match(key):
        return key
    raise RegistryError(f"converter key {key!r} is not an op overload like 'aten.conv2d.default'")


def _check_pnnx_key(key: str) -> str:
    if not re.match(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$", key):
        raise RegistryError(f"rule key {key!r} is not a pnnx op type like 'nn.Conv2d'")
    return key


class Registry:
    """Rules for one vocabulary step; see the module docstring."""

    _seq = itertools.count()

    def __init__(self, name: str, key_check: Callable[[str], str]):
        self.name = name
        self._key_check = key_check
        self._rules: dict[str, list[Converter]] = {}

    def register(self, target: str, fn: ConverterFn, *, validator: Validator | None = None,
                 priority: int = Priority.STANDARD, origin: str | None = None) -> Converter:
        if not callable(fn):
            raise RegistryError(f"converter for {target!r} is not callable")
        key = self._key_check(target)
        conv = Converter(key, fn, validator, int(priority), origin or f"builtin:{fn.__module__}", next(self._seq))
        rules = self._rules.setdefault(key, [])
        rules.append(conv)
        rules.sort(key=_rank)  # kept in trial order: select() runs once per operator
        return conv

    def unregister(self, conv: Converter) -> None:
        lst = self._rules.get(conv.target, [])
        if conv in lst:
            lst.remove(conv)

    def candidates(self, target: str) -> list[Converter]:
        """The rules for ``target`` in the order they are tried (highest priority, then latest)."""
        return list(self._rules.get(target, ()))

    def select(self, op, ctx) -> tuple[Converter | None, list[Refusal]]:
        """The first accepting candidate for ``op`` and the refusal reasons of those before it."""
        reasons: list[Refusal] = []
        for conv in self._rules.get(op.type, ()):
            why = conv.check(op, ctx)
            if why is None:
                return conv, reasons
            reasons.append(why)
        return None, reasons

    def targets(self) -> list[str]:
        return sorted(k for k, v in self._rules.items() if v)

    def __contains__(self, target: str) -> bool:
        return bool(self._rules.get(target))

    def snapshot(self) -> dict[str, list[Converter]]:
        return {k: list(v) for k, v in self._rules.items()}

    def restore(self, snap: dict[str, list[Converter]]) -> None:
        self._rules = {k: list(v) for k, v in snap.items()}


def _rank(c: Converter) -> tuple[int, int]:
    return -c.priority, -c.seq


ATEN = Registry("aten", _check_aten_key)
NCNN = Registry("ncnn", _check_pnnx_key)

# set by the plug-in loader while a plug-in file executes, so its registrations are tagged
_current_origin: list[tuple[str, int]] = []


def _decorator(registry: Registry, targets: Iterable[str], validator, priority):
    targets = list(targets)
    if not targets:
        raise RegistryError("a converter needs at least one target")
    for t in targets:
        registry._key_check(t)  # fail at decoration time

    def wrap(fn):
        origin, default_prio = _current_origin[-1] if _current_origin else (None, Priority.STANDARD)
        prio = default_prio if priority is None else priority
        for t in targets:
            registry.register(t, fn, validator=validator, priority=prio, origin=origin)
        return fn

    return wrap


def aten_converter(*targets: str, validator: Validator | None = None, priority: int | None = None):
    """Register ``fn(ctx, op)`` as the lowering of ATen overload(s) ``targets`` to pnnx ops."""
    return _decorator(ATEN, targets, validator, priority)


def ncnn_rule(*targets: str, validator: Validator | None = None, priority: int | None = None):
    """Register ``fn(ctx, op)`` as the lowering of pnnx op type(s) ``targets`` to ncnn layers."""
    return _decorator(NCNN, targets, validator, priority)


# --------------------------------------------------------------------------- custom ncnn layers
_LAYER_TYPE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@record(frozen=True)
class CustomLayer:
    """An ncnn layer type of the user's own (registered in their runtime with
    ``Net::register_custom_layer``). ``forward(*inputs, params=..., weights=...)`` computes it
    on numpy arrays in ncnn's layout (batch axis dropped) — what ``pt2ncnn verify`` runs for it;
    it receives ``params`` ({id: value}) and ``weights`` (arrays, in load order) when its
    signature names them."""

    type: str
    forward: Callable[..., Any]
    origin: str


class CustomLayers:
    """The declared custom layer types, by name (snapshot / restore like a :class:`Registry`)."""

    def __init__(self) -> None:
        self._layers: dict[str, CustomLayer] = {}

    def get(self, layer_type: str) -> CustomLayer | None:
        return self._layers.get(layer_type)

    def declare(self, layer: CustomLayer) -> None:
        self._layers[layer.type] = layer

    def snapshot(self) -> dict[str, CustomLayer]:
        return dict(self._layers)

    def restore(self, snap: dict[str, CustomLayer]) -> None:
        self._layers = dict(snap)


CUSTOM = CustomLayers()


def ncnn_custom_layer(layer_type: str):
    """Declare ``layer_type`` a custom ncnn layer, computed (for ``pt2ncnn verify``) by the
    decorated function; an ncnn rule may then emit it. Its params are written to the .param
    as given (``{id: value}``), its weights to the .bin in order, each raw (float32, or int32
    for integers; ``ModelBin::load(n, 1)`` reads one back)."""
    from ..ncnn.layers import LayerSpecError, get_spec

    if not isinstance(layer_type, str) or not _LAYER_TYPE.match(layer_type):
        raise RegistryError(f"custom layer type {layer_type!r} is not a name like 'BesselJ0'")
    try:
        get_spec(layer_type)
    except LayerSpecError:
        pass
    else:
        raise RegistryError(f"custom layer type {layer_type!r} is a built-in ncnn layer")

    def wrap(fn):
        if not callable(fn):
            raise RegistryError(f"custom layer {layer_type!r}: its forward is not callable")
        origin = _current_origin[-1][0] if _current_origin else f"builtin:{fn.__module__}"
        CUSTOM.declare(CustomLayer(layer_type, fn, origin))
        return fn

    return wrap


@functools.cache
def _builtin_layer_types() -> frozenset[str]:
    from ..ncnn.layers import layer_types

    return frozenset(layer_types())


def check_ncnn_layer(op) -> None:
    """Refuse (``Unsupported``) an operator an ncnn rule emitted that is neither a built-in ncnn
    layer nor a declared custom layer; mark a custom one (``meta["plugin_layer"]``: its
    :class:`CustomLayer`) so it is written with its params and weights."""
    if not is_ncnn(op) or op.type in _builtin_layer_types():
        return
    from ..ncnn.layers import LayerSpecError, get_spec
    from ..writers.ncnn_check import MARKER_TYPES
    from .context import Unsupported

    if op.type in MARKER_TYPES:
        return
    try:
        get_spec(op.type)
        return
    except LayerSpecError as e:
        unknown = str(e)
    custom = CUSTOM.get(op.type)
    if custom is None:
        raise Unsupported(f"unsupported: {unknown}; a custom layer must be declared with "
                          f"@ncnn_custom_layer({op.type!r}) in the plug-in that emits it")
    op.meta["plugin_layer"] = custom
