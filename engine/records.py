"""``@record``: :func:`dataclasses.dataclass` at a fraction of its cost to define.

Python 3.11's ``dataclass`` compiles every method it adds from source text, one ``exec`` per
method: ``__init__``, ``__repr__``, ``__eq__``, and for a frozen class ``__hash__``,
``__setattr__`` and ``__delattr__`` too. The engine defines 77 such classes, and compiling
them cost 58 ms of every ``pt2ncnn convert`` (a fifth of converting MobileNet-V3-S after
numpy is imported).

``record`` makes the same classes with one ``exec`` each at the most, for ``__init__`` alone,
which runs on every instance and so must be the generated code; it is compiled after the
class's first few instances (:func:`_lazy_init`: most records make only a few), as one ``def``
without the standard library's enclosing ``__create_fn__``. ``__repr__``, ``__eq__``,
``__hash__`` and the frozen ``__setattr__``/``__delattr__`` are shared functions reading the
fields through an ``operator.attrgetter``: no compiling, and as fast as the generated ones.
The field bookkeeping is the standard library's (``__dataclass_fields__`` of
``dataclasses.Field``), done by :func:`_add_fields` where every annotation is a plain type and
by ``dataclasses.dataclass`` with nothing generated otherwise, so ``dataclasses.fields``,
``asdict``, ``replace`` and ``is_dataclass`` work on a record as on a dataclass.

Supported: ``init``, ``repr``, ``eq``, ``frozen``; fields with ``default``,
``default_factory``, ``init=False``, ``repr=False``, ``compare=False``, ``hash``;
``__post_init__``; inheritance between records and dataclasses (with the standard library's
frozen/non-frozen checks); methods a class defines itself are kept (as ``dataclass`` keeps
them). ``order``, ``unsafe_hash``, ``kw_only``, ``slots`` and ``InitVar`` are not (no engine
class uses them): use ``dataclasses.dataclass`` for those.
"""
from __future__ import annotations

import abc
import dataclasses
import reprlib
import types
from operator import attrgetter
from typing import Any, Callable

field = dataclasses.field
FrozenInstanceError = dataclasses.FrozenInstanceError

#: stands for "not given" in a generated ``__init__`` whose field has a default factory
_FACTORY = object()


def record(cls: type | None = None, /, *, init: bool = True, repr: bool = True, eq: bool = True,
           frozen: bool = False) -> Any:
    """Decorate a class like ``@dataclass`` / ``@dataclass(frozen=True)`` (see the module)."""

    def wrap(c: type) -> type:
        return _make(c, init=init, repr_=repr, eq=eq, frozen=frozen)

    return wrap if cls is None else wrap(cls)


def _make(cls: type, *, init: bool, repr_: bool, eq: bool, frozen: bool) -> type:
    own = cls.__dict__
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    doc = own.get("__doc__")
    if not doc:
        cls.__doc__ = cls.__name__  # not None: dataclass would compute a signature for it
    # a dataclass base: the standard library's own frozen handling (its inheritance checks too)
    based = any(dataclasses.is_dataclass(b) for b in cls.__mro__[1:])
    if based or not all(map(_plain, own.get("__annotations__", {}).values())):
        dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=frozen and based)
    else:
        _add_fields(cls)
    # what the class is, for subclasses' checks (the standard library reads a base's frozen)
    cls.__dataclass_params__ = types.SimpleNamespace(init=init, repr=repr_, eq=eq, order=False,
                                                     unsafe_hash=False, frozen=frozen)
    fields = dataclasses.fields(cls)
    if not doc:
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields if f.init)})"
    if init:
        _add(cls, "__init__", _lazy_init(cls, fields, frozen))
    if repr_:
        _add(cls, "__repr__", _repr([f.name for f in fields if f.repr]))
    compared = [f.name for f in fields if f.compare]
    if eq:
        _add(cls, "__eq__", _eq(_values(compared)))
        if not explicit_hash:
            hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
            cls.__hash__ = _hash(_values(hashed)) if frozen else None
            if frozen:
                _name(cls, cls.__hash__)
    if frozen:
        _add(cls, "__setattr__", _frozen_setattr(cls, {f.name for f in fields}))
        _add(cls, "__delattr__", _frozen_delattr(cls, {f.name for f in fields}))
    return cls


def _plain(annotation: Any) -> bool:
    """Certainly a field's type, not ``ClassVar``, ``InitVar`` or ``KW_ONLY`` (which make no field
    or change the others): a string annotation naming none of them, or a plain class."""
    if isinstance(annotation, str):
        return "ClassVar" not in annotation and "InitVar" not in annotation and "KW_ONLY" not in annotation
    return type(annotation) is type and annotation is not dataclasses.KW_ONLY and annotation is not dataclasses.InitVar


def _add_fields(cls: type) -> None:
    """The field bookkeeping of ``dataclasses.dataclass(cls, init=False, repr=False, eq=False)``
    for a class without dataclass bases whose annotations are all :func:`_plain`: the
    ``__dataclass_fields__`` that ``fields``, ``asdict``, ``replace`` and ``is_dataclass`` read,
    the class attributes as dataclass leaves them, ``__match_args__``. The standard library
    makes sure of every string annotation with three regular-expression look-ups (is it
    ``ClassVar``, ``InitVar``, ``KW_ONLY``?): its bookkeeping of the engine's 370 fields took
    20 M instructions of every ``pt2ncnn`` run, this takes 6 M. A field is marked as one with ``dataclasses._FIELD``, the standard
    library's own (private, and the same since Python 3.7) marker."""
    own = cls.__dict__
    annotations = own.get("__annotations__", {})
    fields = {}
    for name, annotation in annotations.items():
        default = getattr(cls, name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            f = default
            if f.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        else:
            if isinstance(default, types.MemberDescriptorType):  # a __slots__ entry: no default
                default = dataclasses.MISSING
            f = dataclasses.field(default=default)
        f.name, f.type, f._field_type = name, annotation, dataclasses._FIELD
        if f.kw_only is dataclasses.MISSING:
            f.kw_only = False
        if f.default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
        fields[name] = f
    for name, value in own.items():
        if isinstance(value, dataclasses.Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    cls.__dataclass_fields__ = fields
    if "__match_args__" not in own:
        cls.__match_args__ = tuple(f.name for f in fields.values() if f.init and not f.kw_only)
    abc.update_abstractmethods(cls)


def _add(cls: type, name: str, fn: Callable, *, replace: bool = False) -> None:
    """``fn`` as ``cls.<name>`` unless the class body defines that method itself (``replace``:
    the one there is ours)."""
    if replace or name not in cls.__dict__:
        fn.__name__ = name
        fn.__module__ = cls.__module__
        _name(cls, fn)
        setattr(cls, name, fn)


def _name(cls: type, fn: Callable) -> None:
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"


#: instances a record makes by binding its fields generically before its own ``__init__`` is
#: compiled (:func:`_lazy_init`)
COMPILE_AFTER = 5


def _lazy_init(cls: type, fields, frozen: bool) -> Callable:
    """An ``__init__`` that binds the fields generically for the class's first
    :data:`COMPILE_AFTER` instances, then compiles the class's own, puts it in its place and
    runs it. Compiling (~0.4 M instructions) is most of the cost of a record, and most records
    make only a few instances in a conversion (those of other commands, of rare ops, of one
    package's header; a third of the engine's none): converting a one-layer model compiled 49
    of them for 25 M instructions, now 9. The generic binding is ~10 times slower per instance
    (3 µs), so the records that make thousands of instances (the schema's nodes and
    arguments) take it only for their first few. A call it cannot take (a missing, unknown or
    repeated argument) compiles at once, for the compiled function's own error. Until the
    compile the class's ``__init__`` signature reads ``(self, *args, **kwargs)``; a required
    field after one with a default is refused here, when the class is made, as ``dataclass``
    refuses it."""
    defaulted = False
    for f in fields:
        if f.init and not _required(f):
            defaulted = True
        elif f.init and defaulted:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    params = [f.name for f in fields if f.init]
    known, required = frozenset(params), frozenset(f.name for f in fields if f.init and _required(f))
    steps = [(f.name, f.init, f.default, f.default_factory) for f in fields if f.init or not _required(f)]
    put = object.__setattr__ if frozen else setattr
    post_init = hasattr(cls, "__post_init__")
    made = 0

    def __init__(obj, /, *args, **kwargs):  # positional-only: a field may be named self
        nonlocal made
        made += 1
        given = dict(zip(params, args))
        if made > COMPILE_AFTER or len(args) > len(params) or not kwargs.keys() <= known - given.keys() \
                or not required <= given.keys() | kwargs.keys():
            init = _init(cls, fields, frozen)
            _add(cls, "__init__", init, replace=True)
            init(obj, *args, **kwargs)
            return
        given.update(kwargs)
        for name, is_param, default, factory in steps:  # in field order, as the compiled one
            value = given.get(name, _FACTORY) if is_param else _FACTORY
            if value is _FACTORY:
                value = default if factory is dataclasses.MISSING else factory()
            put(obj, name, value)
        if post_init:
            obj.__post_init__()

    return __init__


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _init(cls: type, fields, frozen: bool) -> Callable:
    """The generated ``__init__``: parameters in field order, defaults and factories as the
    fields say, then ``__post_init__`` if the class has one. The defaults, factories and
    ``object.__setattr__`` are the globals of its own namespace (read once when the ``def``
    runs, or as fast as a closure's cells), so the source is one ``def`` with no enclosing
    function: a third less to compile than the standard library's ``__create_fn__`` form."""
    env: dict[str, Any] = {"__builtins__": __builtins__, "__rec_factory": _FACTORY,
                           "__rec_set": object.__setattr__}
    me = "__rec_self" if any(f.name == "self" for f in fields) else "self"  # a field may be named self
    params, body = [me], []
    for i, f in enumerate(fields):
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_default:
            env[f"__rec_d{i}"] = f.default
        if has_factory:
            env[f"__rec_f{i}"] = f.default_factory
        if f.init:
            params.append(f"{f.name}=__rec_d{i}" if has_default else f"{f.name}=__rec_factory" if has_factory
                          else f.name)
            value = f"__rec_f{i}() if {f.name} is __rec_factory else {f.name}" if has_factory else f.name
        elif has_factory:
            value = f"__rec_f{i}()"
        elif has_default:
            value = f"__rec_d{i}"
        else:
            continue
        body.append(f"__rec_set({me}, {f.name!r}, {value})" if frozen else f"{me}.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append(f"{me}.__post_init__()")
    src = f"def __init__({', '.join(params)}):\n" + "".join(f" {line}\n" for line in body or ["pass"])
    exec(src, env)
    return env["__init__"]


def _values(names: list[str]) -> Callable[[Any], tuple]:
    """``obj -> (obj.<name>, ...)``, always a tuple."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return lambda obj: ()


def _repr(names: list[str]) -> Callable:
    @reprlib.recursive_repr()
    def __repr__(self):
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    return __repr__


def _eq(values: Callable[[Any], tuple]) -> Callable:
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash(values: Callable[[Any], tuple]) -> Callable:
    def __hash__(self):
        return hash(values(self))

    return __hash__


def _frozen_setattr(cls: type, names: set[str]) -> Callable:
    def __setattr__(self, name, value):
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: type, names: set[str]) -> Callable:
    def __delattr__(self, name):
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__
