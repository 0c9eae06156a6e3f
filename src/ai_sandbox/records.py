"""Plain data classes for the launch path, without `dataclasses`: it imports `inspect` and generates code
per class, ~15 ms before an agent can start. Only what ai-sandbox uses: positional or keyword fields in
annotation order, defaults, `Factory` for a fresh list or dict, equality, a repr; `value` adds hashing
and immutability."""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # typing is not imported at run time (the launch-path import test checks it)
if TYPE_CHECKING:
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**kwargs):  # what mypy reads as typing's: records are dataclasses to it
        return lambda f: f


_MISSING = object()


class Factory:
    """A default made anew for each instance (like dataclasses' default_factory)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], object]) -> None:
        self.make = make


def factory(make: Callable[[], T]) -> T:
    """A field's default made anew for each instance; typed as the value it makes, as mypy expects of
    dataclass_transform field defaults."""
    return Factory(make)  # type: ignore[return-value]


# Calls of a class's __init__ answered by a generic one (~3 µs each) before its own is compiled (~200 µs, once).
# Compiling every class's at import cost 8 ms of the launch path's imports; most of its 42 records are made a few
# times, and the few made by the thousand (a monorepo's masks and entries) are compiled on the way.
HOT = 16


@dataclass_transform()
def record(cls: type[T]) -> type[T]:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    for n, d in defaults.items():
        if isinstance(d, Factory):
            delattr(cls, n)
    bind = _binder(cls.__name__, names, defaults)
    calls = 0

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        nonlocal calls
        calls += 1
        if calls <= HOT:
            bind(self, args, kwargs)
            return
        own = _compiled(names, defaults)
        type.__setattr__(cls, "__init__", own)
        own(self, *args, **kwargs)

    def __repr__(self: object) -> str:
        return f"{cls.__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def __eq__(self: object, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    attrs = {"__init__": __init__, "__repr__": __repr__, "__eq__": __eq__, "__hash__": None, "_fields": names}
    for name, v in attrs.items():
        setattr(cls, name, v)
    return cls


def _binder(
    name: str, names: tuple[str, ...], defaults: dict[str, object]
) -> Callable[[object, tuple[object, ...], dict[str, object]], None]:
    """Fields from a call's arguments as a compiled __init__ would take them, with the same TypeErrors."""
    known = frozenset(names)

    def bind(self: object, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        if len(args) > len(names):
            raise TypeError(f"{name}() takes {len(names)} positional arguments but {len(args)} were given")
        given = dict(zip(names, args, strict=False))  # fewer arguments than fields: the rest from defaults
        for k, v in kwargs.items():
            if k not in known:
                raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")
            if k in given:
                raise TypeError(f"{name}() got multiple values for argument {k!r}")
            given[k] = v
        missing = [n for n in names if n not in given and n not in defaults]
        if missing:
            raise TypeError(f"{name}() missing required arguments: {', '.join(map(repr, missing))}")
        for n in names:
            if n in given:
                v = given[n]
            else:
                d = defaults[n]
                v = d.make() if isinstance(d, Factory) else d
            _set(self, n, v)

    return bind


_set = object.__setattr__


def _compiled(names: tuple[str, ...], defaults: dict[str, object]) -> Callable[..., None]:
    """The class's own __init__, generated as dataclasses does (without importing inspect): ~0.8 µs a call against
    the binder's ~3, which a monorepo's launch pays tens of thousands of times."""
    params: list[str] = []
    body: list[str] = []
    ns: dict[str, Any] = {"_set": _set, "_MISSING": _MISSING}
    for n in names:
        d = defaults.get(n, _MISSING)
        if isinstance(d, Factory):
            ns[f"_f_{n}"] = d.make
            params.append(f"{n}=_MISSING")
            body.append(f" _set(self, {n!r}, _f_{n}() if {n} is _MISSING else {n})")
        else:
            if d is not _MISSING:
                ns[f"_d_{n}"] = d
                params.append(f"{n}=_d_{n}")
            else:
                params.append(n)
            body.append(f" _set(self, {n!r}, {n})")
    exec(f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or " pass"), ns)
    init: Callable[..., None] = ns["__init__"]
    return init


@dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    """A record that cannot change and can be hashed (a set member, a dict key)."""
    record(cls)
    names: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]

    def __setattr__(self: object, name: str, v: object) -> None:
        raise AttributeError(f"{cls.__name__} is immutable")

    def __hash__(self: object) -> int:
        return hash(tuple(getattr(self, n) for n in names))

    cls.__setattr__ = __setattr__  # type: ignore[method-assign]
    cls.__hash__ = __hash__  # type: ignore[method-assign]
    return cls
