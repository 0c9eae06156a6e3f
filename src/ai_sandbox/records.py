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


@dataclass_transform()
def record(cls: type[T]) -> type[T]:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    for n, d in defaults.items():
        if isinstance(d, Factory):
            delattr(cls, n)

    # One generated __init__ per class (as dataclasses does, without importing inspect): a generic one
    # costs ~5 µs a call, and a monorepo's launch builds tens of thousands of records.
    params: list[str] = []
    body: list[str] = []
    ns: dict[str, Any] = {"_set": object.__setattr__}
    for n in names:
        if n in defaults and isinstance(defaults[n], Factory):
            ns[f"_f_{n}"] = defaults[n].make
            params.append(f"{n}=_MISSING")
            body.append(f" _set(self, {n!r}, _f_{n}() if {n} is _MISSING else {n})")
        else:
            if n in defaults:
                ns[f"_d_{n}"] = defaults[n]
                params.append(f"{n}=_d_{n}")
            else:
                params.append(n)
            body.append(f" _set(self, {n!r}, {n})")
    ns["_MISSING"] = _MISSING
    exec(f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or " pass"), ns)

    def __repr__(self: object) -> str:
        return f"{cls.__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def __eq__(self: object, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    attrs = {"__init__": ns["__init__"], "__repr__": __repr__, "__eq__": __eq__, "__hash__": None, "_fields": names}
    for name, v in attrs.items():
        setattr(cls, name, v)
    return cls


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
