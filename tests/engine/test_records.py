"""``engine.records.record`` behaves as ``dataclasses.dataclass`` on every shape the engine uses:
each class below is made twice, by ``record`` and by ``dataclass``, and the two are compared."""
from __future__ import annotations

import copy
import dataclasses
import pickle
import sys
import types

import pytest

from engine import records
from engine.records import FrozenInstanceError, field, record


def _twins(body: str, **options):
    """The classes ``body`` defines, once under ``@record(**options)`` and once under
    ``@dataclasses.dataclass(**options)`` (module-level, so they pickle)."""
    made = []
    for deco in (record, dataclasses.dataclass):
        mod = types.ModuleType(f"_records_{deco.__name__}_{len(sys.modules)}")
        sys.modules[mod.__name__] = mod
        mod.__dict__.update(deco=lambda c, d=deco: d(**options)(c), field=field, dataclasses=dataclasses)
        exec(body, mod.__dict__)
        made.append(mod)
    return made


PLAIN = '''
@deco
class Box:
    """A box."""
    name: str
    size: int = 3
    tags: list = field(default_factory=list)
    note: str = field(default="n", repr=False, compare=False)
    seen: dict = field(default_factory=dict, init=False, repr=False, compare=False)
'''


def test_init_repr_eq_and_fields_match_dataclass():
    rec, std = _twins(PLAIN)
    for args, kwargs in [(("a",), {}), (("a", 5), {}), (("a",), {"tags": [1]}), (("b", 1, [2], "x"), {})]:
        r, s = rec.Box(*args, **kwargs), std.Box(*args, **kwargs)
        assert repr(r).replace(rec.__name__, "") == repr(s).replace(std.__name__, "")
        assert dataclasses.asdict(r) == dataclasses.asdict(s)
        assert dataclasses.astuple(r) == dataclasses.astuple(s)
    assert [(f.name, f.init, f.repr, f.compare) for f in dataclasses.fields(rec.Box)] == \
        [(f.name, f.init, f.repr, f.compare) for f in dataclasses.fields(std.Box)]
    a, b = rec.Box("a"), rec.Box("a")
    assert a.tags is not b.tags and a.seen is not b.seen  # a fresh value from each factory
    assert a == b and rec.Box("a", note="other") == a and rec.Box("a", 4) != a
    assert (a == std.Box("a")) is False  # another class: not equal, as dataclass says
    assert rec.Box.__hash__ is None and std.Box.__hash__ is None  # eq, not frozen: unhashable
    with pytest.raises(TypeError):
        rec.Box()
    with pytest.raises(TypeError):
        rec.Box("a", seen={})  # init=False field
    assert dataclasses.is_dataclass(a)
    assert dataclasses.replace(a, size=9) == rec.Box("a", 9)
    assert rec.Box.__doc__ == "A box."
    for mod in (rec, std):  # what the class keeps as dataclass leaves it
        assert (mod.Box.size, mod.Box.note, hasattr(mod.Box, "tags"), hasattr(mod.Box, "seen")) == (3, "n", False, False)
    assert rec.Box.__match_args__ == std.Box.__match_args__ == ("name", "size", "tags", "note")


def test_string_annotations_and_class_variables_match_dataclass():
    body = '''from __future__ import annotations
import typing
from typing import ClassVar

@deco
class Tagged:
    count: ClassVar[int] = 0
    kinds: typing.ClassVar[tuple] = ("a",)
    name: str
    size: int | None = None
    tags: list[str] = field(default_factory=list)
'''
    rec, std = _twins(body)
    assert [(f.name, f.type, f.kw_only, f.default) for f in dataclasses.fields(rec.Tagged)] == \
        [(f.name, f.type, f.kw_only, f.default) for f in dataclasses.fields(std.Tagged)]
    assert [f.name for f in dataclasses.fields(rec.Tagged)] == ["name", "size", "tags"]
    assert rec.Tagged.count == 0 and rec.Tagged("x").size is None and dataclasses.astuple(rec.Tagged("x")) == ("x", None, [])
    with pytest.raises(ValueError, match="mutable default <class 'list'> for field xs is not allowed"):
        record(type("Bad", (), {"__annotations__": {"xs": "list"}, "xs": []}))
    with pytest.raises(TypeError, match="'loose' is a field but has no type annotation"):
        record(type("Loose", (), {"__annotations__": {}, "loose": field(default=1)}))


FROZEN = '''
@deco
class Key:
    kind: str
    dims: tuple = ()
    weight: float = field(default=1.0, compare=False)
    cached: int = field(default=0, hash=False)
'''


def test_frozen_hash_and_assignment_match_dataclass():
    rec, std = _twins(FROZEN, frozen=True)
    for args in [("a",), ("a", (1, 2)), ("b", (), 2.0, 7)]:
        r, s = rec.Key(*args), std.Key(*args)
        assert hash(r) == hash(s)
        assert repr(r).replace(rec.__name__, "") == repr(s).replace(std.__name__, "")
    k = rec.Key("a", (1,))
    assert {k: 1}[rec.Key("a", (1,), 5.0)] == 1  # weight not compared, not hashed
    assert rec.Key("a", cached=1) != rec.Key("a", cached=2)  # compared, though not hashed
    assert hash(rec.Key("a", cached=1)) == hash(rec.Key("a", cached=2))
    for mod in (rec, std):
        obj = mod.Key("a")
        with pytest.raises(FrozenInstanceError, match="cannot assign to field 'kind'"):
            obj.kind = "b"
        with pytest.raises(FrozenInstanceError, match="cannot delete field 'dims'"):
            del obj.dims
        with pytest.raises(FrozenInstanceError):
            obj.other = 1
    assert copy.deepcopy(k) == k and pickle.loads(pickle.dumps(k)) == k
    assert dataclasses.replace(k, kind="z") == rec.Key("z", (1,))


INHERIT = '''
@deco
class Base:
    a: int
    b: int = 2

    def __post_init__(self):
        self.total = self.a + self.b


@deco
class Child(Base):
    c: list = field(default_factory=lambda: [0])

    def __eq__(self, other):  # its own: kept
        return isinstance(other, Base) and self.a == other.a

    def __repr__(self):  # its own: kept
        return "child"
'''


def test_inheritance_post_init_and_own_methods_match_dataclass():
    rec, std = _twins(INHERIT)
    for mod in (rec, std):
        c = mod.Child(1, 5, [3])
        assert (c.a, c.b, c.c, c.total) == (1, 5, [3], 6)
        assert repr(c) == "child" and c == mod.Base(1) and mod.Base(1, 2) != mod.Base(1, 3)
        assert mod.Child.__hash__ is None
        assert [f.name for f in dataclasses.fields(mod.Child)] == ["a", "b", "c"]
        assert mod.Child(4).c == [0]


def test_explicit_hash_and_no_eq_match_dataclass():
    body = '''
@deco
class Ident:
    x: int

    def __hash__(self):
        return 7
'''
    for mod in _twins(body):
        assert hash(mod.Ident(1)) == 7 and mod.Ident(1) == mod.Ident(1)
    for mod in _twins("@deco\nclass Bare:\n    x: int = 0\n", eq=False, init=False):
        a = mod.Bare()
        assert a.x == 0 and a != mod.Bare() and hash(a) == object.__hash__(a)
        with pytest.raises(TypeError):
            mod.Bare(1)


def test_recursive_repr_does_not_overflow():
    rec, std = _twins("@deco\nclass Node:\n    children: list = field(default_factory=list)\n")
    for mod in (rec, std):
        n = mod.Node()
        n.children.append(n)
        assert repr(n) == "Node(children=[...])"


def test_frozen_inheritance_checks_and_a_field_named_self_match_dataclass():
    @record(frozen=True)
    class Base:
        a: int

    @record(frozen=True)
    class Sub(Base):
        b: int = 2

    assert (Sub(1).a, Sub(1).b) == (1, 2) and hash(Sub(1)) == hash(Sub(1))
    with pytest.raises(FrozenInstanceError):
        Sub(1).b = 3
    with pytest.raises(TypeError, match="non-frozen dataclass from a frozen one"):
        record(type("Loose", (Base,), {"__annotations__": {"c": "int"}}))
    std = dataclasses.dataclass(frozen=True)(type("Std", (Base,), {"__annotations__": {"c": "int"}}))
    assert std(1, 3).c == 3 and dataclasses.fields(std)[0].name == "a"
    assert Base.__dataclass_params__.frozen and Base.__dataclass_params__.eq

    rec, ref = _twins("@deco\nclass Odd:\n    self: int\n    x: int = 0\n")
    assert repr(rec.Odd(1, 2)).replace(rec.__name__, "") == repr(ref.Odd(1, 2)).replace(ref.__name__, "")
    for _ in range(records.COMPILE_AFTER + 1):  # by keyword too, bound generically then compiled
        assert vars(rec.Odd(self=3, x=4)) == vars(ref.Odd(self=3, x=4))
    assert rec.Odd.__init__.__module__ == rec.__name__



def test_init_binds_generically_then_compiles_on_a_call_it_cannot_bind_or_after_its_first_instances():
    for body, options in ((PLAIN, {}), (FROZEN, {"frozen": True}), (INHERIT, {})):
        rec, std = _twins(body, **options)
        cls = next(c for c in vars(rec).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
                   and c.__name__ in ("Box", "Key", "Child"))
        twin, stub = getattr(std, cls.__name__), cls.__init__
        for args, kwargs in [(("a",), {}), (("a", 5), {}), ((), {"size": 2, "name": "b"}), (("a",), {"tags": [1]}),
                             ((1, 2, [3]), {}), ((1,), {"c": [4], "b": 0}), (("k", (1,)), {"cached": 3})]:
            try:
                expected = twin(*args, **kwargs)
            except TypeError:
                continue  # not a call of this shape
            got = cls(*args, **kwargs)  # bound generically: the same attributes in the same order
            assert list(vars(got).items()) == list(vars(expected).items()) and cls.__init__ is stub
            valid = args, kwargs
        args, kwargs = valid
        for _ in range(records.COMPILE_AFTER):
            cls(*args, **kwargs)
        assert cls.__init__ is not stub and cls.__init__.__qualname__ == f"{cls.__name__}.__init__"
        assert list(vars(cls(*args, **kwargs)).items()) == list(vars(twin(*args, **kwargs)).items())

    rec, std = _twins(PLAIN)
    stub = rec.Box.__init__
    for bad_args, bad_kwargs in [((), {}), (("a",), {"name": "b"}), (("a",), {"bogus": 1}), ((1, 2, 3, 4, 5), {})]:
        with pytest.raises(TypeError) as r:  # compiled at once, failing as dataclass's
            rec.Box(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError) as s:
            std.Box(*bad_args, **bad_kwargs)
        assert str(r.value) == str(s.value)
    init = rec.Box.__init__
    assert init is not stub and init.__module__ == rec.__name__ and rec.Box("a").size == 3 and rec.Box.__init__ is init

    plain_sub = type("Sub", (rec.Box,), {})  # not a record: binds as Box does
    assert plain_sub("x", 4).size == 4


def test_a_required_field_after_a_defaulted_one_is_refused_when_the_class_is_made():
    for deco in (record, dataclasses.dataclass):
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
            deco(type("Late", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1}))
    late = record(type("Late", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1,
                                    "b": field(default=2, init=True)}))
    assert (late().a, late().b) == (1, 2)
