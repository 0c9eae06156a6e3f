"""Plain data classes for the launch path, without `dataclasses`: it imports `inspect` and generates code
per class, ~15 ms before an agent can start. Only what ai-sandbox uses: positional or keyword fields in
annotation order, defaults, `Factory` for a fresh list or dict, equality, a repr; `value` adds hashing
and immutability."""

from __future__ import annotations

_MISSING = object()


class Factory:
    """A default made anew for each instance (like dataclasses' default_factory)."""

    __slots__ = ("make",)

    def __init__(self, make) -> None:  # noqa: ANN001
        self.make = make


def record(cls: type) -> type:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    for n, d in defaults.items():
        if isinstance(d, Factory):
            delattr(cls, n)

    # One generated __init__ per class (as dataclasses does, without importing inspect): a generic one
    # costs ~5 µs a call, and a monorepo's launch builds tens of thousands of records.
    params, body, ns = [], [], {"_set": object.__setattr__}
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
    exec(f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or " pass"), ns)  # noqa: S102
    __init__ = ns["__init__"]

    def __repr__(self) -> str:  # noqa: N807
        return f"{cls.__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def __eq__(self, other: object) -> bool:  # noqa: N807
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    cls.__init__ = __init__
    cls.__repr__ = __repr__
    cls.__eq__ = __eq__
    cls.__hash__ = None
    cls._fields = names
    return cls


def value(cls: type) -> type:
    """A record that cannot change and can be hashed (a set member, a dict key)."""
    record(cls)

    def __setattr__(self, name: str, v: object) -> None:  # noqa: N807
        raise AttributeError(f"{cls.__name__} is immutable")

    def __hash__(self) -> int:  # noqa: N807
        return hash(tuple(getattr(self, n) for n in cls._fields))

    cls.__setattr__ = __setattr__
    cls.__hash__ = __hash__
    return cls
