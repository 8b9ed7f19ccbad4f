"""Value classes without `dataclasses`.

`dataclasses` imports `inspect` and generates each class's methods with
`exec`; on the lint path that cost about 50 ms of start-up, several times
ruff's whole run on a file. A class here lists its fields in `_fields`,
declares `__slots__` and writes its own `__init__`; `Plain` adds a readable
repr and field-wise equality, `Frozen` also a hash. Slotted instances pickle
with the default protocol, so the facts cache keeps working.
"""

from __future__ import annotations


class Plain:
    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _compared: tuple[str, ...] | None = None  # the fields equality (and hashing) use; None = all

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = self._fields if self._compared is None else self._compared
        return all(getattr(self, n) == getattr(other, n) for n in names)

    __hash__ = None  # mutable: like a dataclass with eq and no frozen


def by_fields(self) -> tuple:
    """A `__reduce__` for a class whose `__init__` takes its `_fields` in order: a third smaller
    and faster to pickle than the default slot state (facts cross processes and sit in the cache)."""
    return (self.__class__, tuple([getattr(self, n) for n in self._fields]))


class Frozen(Plain):
    """Not enforced read-only (that would slow every construction), but treated as such: hashable."""

    __slots__ = ()

    def __hash__(self) -> int:
        names = self._fields if self._compared is None else self._compared
        return hash(tuple(getattr(self, n) for n in names))


class _Unknown:
    """A value that cannot be known statically. A singleton that survives pickling."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (_Unknown, ())

    def __repr__(self):
        return "UNKNOWN"

    def __bool__(self):
        raise TypeError("UNKNOWN has no truth value; test `is UNKNOWN` first")


UNKNOWN = _Unknown()


class cached_property:  # noqa: N801  (named as the functools original it stands in for)
    """`functools.cached_property`, without importing functools (and collections) on lint's start-up."""

    def __init__(self, func):
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        # The instance's own attribute shadows this (non-data) descriptor from now on.
        value = instance.__dict__[self.name] = self.func(instance)
        return value


def memoized(func):
    """`functools.lru_cache(maxsize=None)` for positional arguments, without importing functools.

    As lru_cache's, the wrapper keeps the plain function as `__wrapped__` and has `cache_clear`.
    """
    cache: dict = {}

    def wrapper(*args):
        try:
            return cache[args]
        except KeyError:
            value = cache[args] = func(*args)
            return value

    wrapper.__wrapped__ = func
    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = func.__name__, func.__qualname__, func.__doc__
    wrapper.cache_clear = cache.clear
    return wrapper
