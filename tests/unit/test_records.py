"""records.py: the plain data classes of the launch path (`record`, `value`, `factory`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_sandbox.records import HOT, factory, record, value


@record
class Point:
    x: int
    y: int = 0
    tags: list = factory(list)


@value
class Key:
    name: str
    depth: int = 1


def test_fields_are_positional_or_keyword_in_annotation_order():
    assert Point(1, 2, ["a"]).tags == ["a"]
    p = Point(y=5, x=3)
    assert (p.x, p.y, p.tags) == (3, 5, [])
    assert Point._fields == ("x", "y", "tags")
    with pytest.raises(TypeError):
        Point()  # x has no default
    with pytest.raises(TypeError):
        Point(1, 2, [], 4)  # one argument too many
    with pytest.raises(TypeError):
        Point(1, z=2)  # not a field


def test_defaults_apply_and_a_factory_makes_a_fresh_value_per_instance():
    a, b = Point(1), Point(2)
    assert a.y == 0 and a.tags == [] and a.tags is not b.tags
    a.tags.append("x")
    assert b.tags == [] and Point(3).tags == []
    given = ["mine"]
    assert Point(1, tags=given).tags is given  # a value passed is kept, not copied
    assert "tags" not in Point.__dict__  # the Factory itself is no class attribute left to share


def test_a_factory_default_is_called_once_per_instance_that_needs_it():
    calls = []

    def make():
        calls.append(1)
        return {}

    @record
    class Box:
        items: dict = factory(make)

    Box(), Box()
    Box(items={"a": 1})
    assert len(calls) == 2


def test_equality_compares_fields_and_type():
    assert Point(1, 2) == Point(1, 2, [])
    assert Point(1, 2) != Point(1, 3)
    assert Point(1, tags=["a"]) != Point(1, tags=["b"])

    @record
    class Other:
        x: int
        y: int = 0
        tags: list = factory(list)

    assert Point(1) != Other(1)  # same fields, another type
    assert Point(1).__eq__(Other(1)) is NotImplemented


def test_repr_names_the_class_and_every_field():
    assert repr(Point(1, tags=["a"])) == "Point(x=1, y=0, tags=['a'])"
    assert repr(Key("n")) == "Key(name='n', depth=1)"


def test_a_record_is_mutable_and_unhashable():
    p = Point(1)
    p.y = 7
    assert p.y == 7
    with pytest.raises(TypeError):
        hash(p)
    with pytest.raises(TypeError):
        {p}  # noqa: B018


def test_a_value_is_immutable_and_hashable():
    k = Key("a", 2)
    with pytest.raises(AttributeError, match="Key is immutable"):
        k.name = "b"
    with pytest.raises(AttributeError):
        k.extra = 1
    assert k.name == "a"
    assert hash(k) == hash(Key("a", 2)) == hash(("a", 2))
    assert {Key("a", 2), Key("a", 2), Key("a")} == {Key("a", 2), Key("a", 1)}
    assert {Key("a"): 1}[Key("a", 1)] == 1
    assert Key("a") != Key("b") and Key("a", 1) == Key(depth=1, name="a")


def test_a_class_without_fields_still_gets_an_init():
    @record
    class Empty:
        pass

    assert Empty() == Empty() and repr(Empty()) == "Empty()"
    with pytest.raises(TypeError):
        Empty(1)


def test_declaring_a_record_compiles_nothing(monkeypatch):
    """Compiling each class's __init__ at import cost ~200 µs a class: 8 ms of the launch path's imports for its 42
    records. A class is declared without compiling; the few made often (a monorepo's thousands of masks) get their
    compiled __init__ once they are."""
    import builtins

    compiled = []
    real_compile, real_exec = builtins.compile, builtins.exec
    monkeypatch.setattr(builtins, "compile", lambda *a, **k: compiled.append(a) or real_compile(*a, **k))
    monkeypatch.setattr(builtins, "exec", lambda *a, **k: compiled.append(a) or real_exec(*a, **k))

    @record
    class Many:
        a: int
        b: str = "x"
        c: list = factory(list)

    assert compiled == []
    Many(1)
    assert compiled == []  # made once: no compile either


# Field layouts and calls, both the first calls of a class (bound without a compiled __init__) and the later
# ones (compiled): the same instances, the same TypeErrors.
_LAYOUT = st.lists(st.sampled_from(["plain", "default", "factory"]), max_size=5).map(
    lambda kinds: sorted(kinds, key=lambda k: k != "plain")  # a default before a field without one: Python refuses
)
_NAMES = ["f0", "f1", "f2", "f3", "f4", "zz"]


@settings(max_examples=300, deadline=None)
@given(
    kinds=_LAYOUT,
    nargs=st.integers(0, 6),
    keywords=st.lists(st.sampled_from(_NAMES), max_size=4, unique=True),
)
def test_the_first_calls_and_the_compiled_init_agree(kinds, nargs, keywords):
    ns: dict[str, object] = {"__annotations__": {f"f{i}": int for i in range(len(kinds))}}
    for i, kind in enumerate(kinds):
        if kind == "default":
            ns[f"f{i}"] = 10 + i
        elif kind == "factory":
            ns[f"f{i}"] = factory(list)
    cls = record(type("R", (), ns))
    args = list(range(nargs))
    kwargs = {k: 100 + n for n, k in enumerate(keywords)}

    def outcome():
        try:
            r = cls(*args, **kwargs)
        except TypeError:
            return "TypeError"
        return tuple(getattr(r, n) for n in cls._fields)

    results = [outcome() for _ in range(HOT + 3)]
    assert all(r == results[0] for r in results), results
    if results[0] != "TypeError":  # and each instance's factory default is its own
        a, b = cls(*args, **kwargs), cls(*args, **kwargs)
        for n, kind in zip(cls._fields, kinds, strict=True):
            if kind == "factory" and n not in kwargs and int(n[1:]) >= nargs:
                assert getattr(a, n) == [] and getattr(a, n) is not getattr(b, n)
