"""records.py: the plain data classes of the launch path (`record`, `value`, `factory`)."""

from __future__ import annotations

import pytest

from ai_sandbox.records import factory, record, value


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
