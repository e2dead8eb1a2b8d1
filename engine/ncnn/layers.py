"""The ncnn layer vocabulary: every layer's params (name → id, kind, default) and weights (load
order, tagged or raw fp32, size, condition), read from the generated
:mod:`engine.ncnn.layer_table`, plus the builder converters use instead of bare param ids.

>>> make_params("Convolution", num_output=8, kernel_w=3, bias_term=1, weight_data_size=216)
{0: 8, 1: 3, 5: 1, 6: 216}

Param kinds: ``int``, ``float``, ``int_array``, ``float_array``, ``str``. A default is a
literal, another param (``kernel_h`` defaults to ``kernel_w``) or an expression of other params
(``MultiHeadAttention.scale``). Weights loaded *tagged* (``mb.load(n, 0)``) start with a 4-byte
type tag and may be stored as fp16; the others are raw fp32.
"""
from __future__ import annotations

import logging
import math
from functools import lru_cache
from numbers import Integral, Real
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import expr
from ..records import field, record
from .layer_table import COMMON_PARAMS, LAYERS, NCNN_REVISION

log = logging.getLogger(__name__)

__all__ = ["LayerSpec", "LayerSpecError", "LoadedWeight", "ParamSpec", "WeightSpec", "NCNN_REVISION",
           "check_params", "expected_weights", "get_spec", "layer_loads", "layer_types", "make_params", "param_id",
           "param_values", "resolve_params", "weight_spec"]

PARAM_KINDS = ("int", "float", "int_array", "float_array", "str")


class LayerSpecError(ValueError):
    """Unknown layer type or param name, or a value of the wrong kind."""


@record(frozen=True)
class ParamSpec:
    """One layer param: ``id`` in the .param file, ``kind``, and its default (a literal, or
    ``default_ref`` = another param's name, or ``default_expr`` = an expression)."""

    id: int
    name: str
    kind: str
    default: Any = None
    default_ref: str | None = None
    default_expr: str | None = None
    doc: str = ""

    @property
    def is_array(self) -> bool:
        return self.kind.endswith("_array")


@record(frozen=True)
class WeightSpec:
    """One weight in load order: ``size`` and ``when`` are expressions over the layer's params;
    ``tagged`` is True/False or an expression (``MemoryData``: ``load_type == 0``)."""

    name: str
    size: str
    when: str | None = None
    tagged: bool | str = False


@record(frozen=True)
class LoadedWeight:
    """A weight the runtime will read for given params: its spec, element count, tag flag."""

    spec: WeightSpec
    size: int
    tagged: bool

    @property
    def name(self) -> str:
        return self.spec.name


@record(frozen=True)
class LayerSpec:
    """One ncnn layer type as ``operators.md`` documents it: its params and weights."""

    type: str
    params: tuple[ParamSpec, ...]
    weights: tuple[WeightSpec, ...]
    notes: tuple[str, ...] = ()
    builder_defaults: Mapping[str, Any] = field(default_factory=dict)
    unsupported: tuple[tuple[str, str], ...] = ()

    @property
    def by_name(self) -> dict[str, ParamSpec]:
        return _by_name(self.type)

    @property
    def by_id(self) -> dict[int, ParamSpec]:
        return _by_id(self.type)

    def param(self, key: str | int) -> ParamSpec:
        table = self.by_id if isinstance(key, int) else self.by_name
        if key in table:
            return table[key]
        import difflib  # here: only a misspelled name needs it

        hint = difflib.get_close_matches(str(key), [str(k) for k in table], n=3)
        raise LayerSpecError(f"{self.type} has no param {key!r}" + (f" (did you mean {', '.join(hint)}?)" if hint else "")
                             + f"; known: {', '.join(str(k) for k in table)}")


def _spec_from_table(name: str, entry: Mapping[str, Any]) -> LayerSpec:
    params = []
    for p in list(entry["params"]) + [c for c in COMMON_PARAMS if c["id"] not in {q["id"] for q in entry["params"]}]:
        d = p["default"]
        ref = d.get("ref") if isinstance(d, dict) else None
        ex = d.get("expr") if isinstance(d, dict) else None
        params.append(ParamSpec(p["id"], p["name"], p["kind"], None if isinstance(d, dict) else d, ref, ex,
                                p.get("doc", "")))
    weights = tuple(WeightSpec(w["name"], w["size"], w.get("when"), w["tagged"]) for w in entry["weights"])
    return LayerSpec(name, tuple(params), weights, tuple(entry.get("notes", ())),
                     dict(entry.get("builder_defaults", {})),
                     tuple((c, r) for c, r in entry.get("unsupported", ())))


@lru_cache(maxsize=None)
def _spec(layer_type: str) -> LayerSpec:
    """The spec of a layer type of :data:`LAYERS`, made on first use: a conversion uses a
    dozen of the runtime's 110 types, and making them all took 14 M instructions of every run."""
    return _spec_from_table(layer_type, LAYERS[layer_type])


@lru_cache(maxsize=None)
def _by_name(layer_type: str) -> dict[str, ParamSpec]:
    return {p.name: p for p in _spec(layer_type).params}


@lru_cache(maxsize=None)
def _by_id(layer_type: str) -> dict[int, ParamSpec]:
    return {p.id: p for p in _spec(layer_type).params}


# ---------------------------------------------------------------------------- lookups
def layer_types() -> list[str]:
    """Every layer type of the runtime, sorted."""
    return sorted(LAYERS)


def get_spec(layer_type: str) -> LayerSpec:
    if layer_type in LAYERS:
        return _spec(layer_type)
    import difflib  # here: only a misspelled name needs it

    hint = difflib.get_close_matches(layer_type, list(LAYERS), n=3)
    raise LayerSpecError(f"unknown ncnn layer type {layer_type!r}" + (f" (did you mean {', '.join(hint)}?)" if hint else ""))


def param_id(layer_type: str, name: str) -> int:
    return get_spec(layer_type).param(name).id


def weight_spec(layer_type: str) -> tuple[WeightSpec, ...]:
    """All weights the layer may load, in load order (conditions not applied)."""
    return get_spec(layer_type).weights


@lru_cache(maxsize=None)
def weight_names(layer_type: str) -> frozenset[str]:
    """The names of :func:`weight_spec` (made once per layer type; shared: do not change it)."""
    return frozenset(w.name for w in weight_spec(layer_type))


@lru_cache(maxsize=None)
def param_kinds(layer_type: str) -> dict[int, str]:
    """Param id → kind (``int``, ``float_array``...) of the layer type, made once per type
    (shared: do not change it)."""
    return {p.id: p.kind for p in get_spec(layer_type).params}


# ---------------------------------------------------------------------------- values
def _coerce(layer_type: str, p: ParamSpec, value: Any) -> Any:
    """Check a value against the param kind and normalise it (numpy scalars → Python)."""
    where = f"{layer_type}.{p.name} ({p.kind})"
    if p.kind == "int":
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        if isinstance(value, Integral):
            return int(value)
        raise LayerSpecError(f"{where}: expected an int, got {value!r}")
    if p.kind == "float":
        if isinstance(value, (Real, np.floating, np.integer)) and not isinstance(value, (bool, np.bool_)):
            f = float(value)
            if math.isnan(f):
                raise LayerSpecError(f"{where}: NaN cannot be written to a .param file")
            return f
        raise LayerSpecError(f"{where}: expected a number, got {value!r}")
    if p.kind == "str":
        if isinstance(value, str):
            return value
        raise LayerSpecError(f"{where}: expected a string, got {value!r}")
    if isinstance(value, np.ndarray):
        value = value.reshape(-1).tolist()
    if not isinstance(value, (list, tuple)):
        raise LayerSpecError(f"{where}: expected a list, got {value!r}")
    scalar = ParamSpec(p.id, p.name, p.kind[:-6])
    return [_coerce(layer_type, scalar, v) for v in value]


def _same(kind: str, a: Any, b: Any) -> bool:
    if kind == "float":
        return np.float32(a) == np.float32(b)
    if kind == "float_array":
        return len(a) == len(b) and all(np.float32(x) == np.float32(y) for x, y in zip(a, b))
    if kind == "int_array":
        return list(a) == list(b)
    return a == b


def _default(p: ParamSpec, resolved: Mapping[str, Any]) -> Any:
    if p.default_ref is not None:
        return resolved[p.default_ref]
    if p.default_expr is not None:
        try:
            return expr.evaluate(p.default_expr, resolved)
        except (ZeroDivisionError, ValueError):
            return None
    return list(p.default) if p.is_array else p.default


def _resolve(spec: LayerSpec, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every param's effective value: the given one, else its (possibly computed) default."""
    out: dict[str, Any] = {}
    pending = list(spec.params)
    for _ in range(len(pending) + 1):  # refs point at params with lower or higher ids: iterate
        rest = []
        for p in pending:
            if p.name in given:
                out[p.name] = given[p.name]
            elif p.default_ref is not None and p.default_ref not in out:
                rest.append(p)
            elif p.default_expr is not None and not expr.names(p.default_expr) <= out.keys():
                rest.append(p)
            else:
                out[p.name] = _default(p, out)
        if not rest:
            return out
        pending = rest
    raise LayerSpecError(f"{spec.type}: circular param defaults among {[p.name for p in pending]}")


# ---------------------------------------------------------------------------- memo
# A model has thousands of layers but few distinct param sets: what depends on (type, params)
# alone is worked out once per set. Keys carry each value's type (1, 1.0 and True are equal
# keys to a dict but not to the checks); a value that is not a plain scalar or a list of them
# (a numpy array) is not memoised.
_PLAIN = frozenset((int, float, str, bool, type(None)))
_MEMO_MAX = 8192


def _memo_key(tag: str, layer_type: str, params: Mapping[Any, Any]) -> tuple | None:
    types = tuple(map(type, params.values()))
    if _PLAIN.issuperset(types):  # scalars only, as most layers: the items as they are, and their types
        return tag, layer_type, "scalars", tuple(params.items()), types
    key: list = [tag, layer_type]
    for k, v in params.items():
        t = type(v)
        if t is list or t is tuple:
            if not all(type(x) in _PLAIN for x in v):
                return None
            v = tuple((type(x), x) for x in v)
        elif t not in _PLAIN:
            return None
        key.append((k, t, v))
    return tuple(key)


_memo: dict[tuple, Any] = {}


def _memoised(tag: str, layer_type: str, params: Mapping[Any, Any], compute):
    """``compute()``, remembered under (tag, layer type, params); exceptions are not."""
    key = _memo_key(tag, layer_type, params)
    if key is None:
        return compute()
    try:
        return _memo[key]
    except KeyError:
        pass
    value = compute()
    if len(_memo) >= _MEMO_MAX:
        _memo.clear()
    _memo[key] = value
    return value


def _fresh(d: dict) -> dict:
    """A copy of a remembered dict whose list values the caller may change."""
    return {k: (list(v) if type(v) is list else v) for k, v in d.items()}


def make_params(layer_type: str, **values: Any) -> dict[int, Any]:
    """Named params → ``{id: value}`` for :attr:`Operator.params`, in id order. Values equal to
    their (effective) default are left out; unknown layer types or names and values of the
    wrong kind raise :class:`LayerSpecError`. ``None`` values are ignored (left at default)."""
    return _fresh(_memoised("make", layer_type, values, lambda: _make_params(layer_type, values)))


def _make_params(layer_type: str, values: Mapping[str, Any]) -> dict[int, Any]:
    spec = get_spec(layer_type)
    given = {k: v for k, v in values.items() if v is not None}
    for k, v in spec.builder_defaults.items():
        given.setdefault(k, v)
    coerced = {}
    for name, value in given.items():
        p = spec.param(name)
        coerced[name] = _coerce(layer_type, p, value)
    resolved = _resolve(spec, coerced)
    explicit_defaults = set(spec.builder_defaults)
    out: dict[int, Any] = {}
    for p in sorted(spec.params, key=lambda q: q.id):
        if p.name not in coerced:
            continue
        default = _default(p, resolved)
        if default is not None and _same(p.kind, coerced[p.name], default) and p.name not in explicit_defaults:
            continue
        out[p.id] = coerced[p.name]
    return out


def param_values(layer_type: str, params: Mapping[int, Any]) -> dict[str, Any]:
    """``{id: value}`` → ``{name: value}`` (explicit params only; unknown ids keep their id)."""
    spec = get_spec(layer_type)
    return {(spec.by_id[k].name if k in spec.by_id else k): v for k, v in params.items()}


def resolve_params(layer_type: str, params: Mapping[int, Any]) -> dict[str, Any]:
    """Every param of the layer by name, with the runtime's defaults filled in."""
    return _fresh(_memoised("resolve", layer_type, params, lambda: _resolve_params(layer_type, params)))


def _resolve_params(layer_type: str, params: Mapping[int, Any]) -> dict[str, Any]:
    spec = get_spec(layer_type)
    given = {spec.by_id[k].name: v for k, v in params.items() if k in spec.by_id}
    return _resolve(spec, given)


def check_params(layer_type: str, params: Mapping[Any, Any]) -> list[str]:
    """Problems with a layer's ``{id: value}`` params: unknown ids, values of the wrong kind,
    settings the writer cannot handle. Empty when all is well."""
    return list(_memoised("check", layer_type, params, lambda: _check_params(layer_type, params)))


def _check_params(layer_type: str, params: Mapping[Any, Any]) -> list[str]:
    spec = get_spec(layer_type)
    problems = []
    for k, v in params.items():
        if not isinstance(k, int) or isinstance(k, bool):
            problems.append(f"param key {k!r} is not an ncnn param id")
            continue
        if k not in spec.by_id:
            problems.append(f"param id {k} is not a {layer_type} param (known: "
                            + ", ".join(f"{p.id}={p.name}" for p in spec.params) + ")")
            continue
        try:
            _coerce(layer_type, spec.by_id[k], v)
        except LayerSpecError as e:
            problems.append(str(e))
    if problems:
        return problems
    resolved = resolve_params(layer_type, params)
    for cond, reason in spec.unsupported:
        if expr.evaluate(cond, resolved):
            problems.append(f"{layer_type} with {reason} is not supported by the writer")
    return problems


def expected_weights(layer_type: str, params: Mapping[int, Any]) -> list[LoadedWeight]:
    """The weights the runtime will read for these params, in load order, with sizes."""
    return list(_memoised("weights", layer_type, params, lambda: _expected_weights(layer_type, params)))


def layer_loads(layer_type: str, params: Mapping[Any, Any]) -> tuple[list[str], list[LoadedWeight]]:
    """:func:`check_params`'s problems and, when there are none, :func:`expected_weights`'s
    weights (else none), in one remembered lookup: what a writer or reader asks of every layer.
    Raises :class:`LayerSpecError` as those do."""
    problems, weights = _memoised("loads", layer_type, params, lambda: _layer_loads(layer_type, params))
    return list(problems), list(weights)


def _layer_loads(layer_type: str, params: Mapping[Any, Any]) -> tuple[list[str], list[LoadedWeight]]:
    problems = _check_params(layer_type, params)
    return problems, ([] if problems else _expected_weights(layer_type, params))


def _expected_weights(layer_type: str, params: Mapping[int, Any]) -> list[LoadedWeight]:
    spec = get_spec(layer_type)
    env = resolve_params(layer_type, params)
    out = []
    for w in spec.weights:
        try:
            if w.when is not None and not expr.evaluate(w.when, env):
                continue
            size = int(expr.evaluate(w.size, env))
            tagged = bool(w.tagged if isinstance(w.tagged, bool) else expr.evaluate(w.tagged, env))
        except ZeroDivisionError:
            raise LayerSpecError(f"{layer_type}: weight {w.name} size {w.size!r} divides by zero with "
                                 f"these params") from None
        out.append(LoadedWeight(w, size, tagged))
    return out


def describe(layer_type: str, params: Mapping[int, Any]) -> str:
    """``name=value ...`` of the explicit params, for messages and the GUI."""
    return " ".join(f"{k}={v}" for k, v in param_values(layer_type, params).items())


def doc_notes(layer_types_: Iterable[str] | None = None) -> dict[str, Sequence[str]]:
    """Where operators.md and the runtime disagree, per layer (the runtime wins)."""
    return {t: _spec(t).notes for t in (layer_types_ or LAYERS) if _spec(t).notes}
