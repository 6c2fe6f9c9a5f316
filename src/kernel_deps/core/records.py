"""Plain read-only records, for the ones every command builds at start-up.

``@dataclass(frozen=True, slots=True)`` writes each class's methods as source and runs it
(about half a millisecond a class, paid at import by every command that imports the
module); a :class:`Record` subclass writes its own ``__init__`` and takes the rest from
here, defined once: equality and hash by value (the fields in ``__slots__`` order), a
dataclass-like ``repr``, no assignment after ``__init__`` (which sets its fields with
:meth:`Record._init`), and pickling and copying. Those that callers copy with
``dataclasses.replace`` are declared dataclasses by :func:`replaceable`, still without a
method written, and registered as such only when ``dataclasses`` first asks. A record's
mapping is a :class:`FrozenMap`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any


class Record:
    """A read-only record whose fields are its ``__slots__``, set once by the subclass's ``__init__``."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The fields are written twice, as annotations (what readers and type checkers see)
        # and as __slots__ (what is stored, in _init's order, computed ones last): a class
        # whose annotations are not the first of its __slots__, in order, is refused when made.
        super().__init_subclass__(**kwargs)
        named, stored = tuple(cls.__dict__.get("__annotations__", ())), cls.__dict__.get("__slots__", ())
        if named != tuple(stored)[: len(named)]:
            raise TypeError(f"{cls.__qualname__}: its annotations must name its first __slots__, in order")

    def _init(self, *values: Any) -> None:
        """Set the fields, in ``__slots__`` order (what a subclass's ``__init__`` calls)."""
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{self.__class__.__qualname__}({fields})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a read-only {self.__class__.__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a read-only {self.__class__.__name__}")

    def __getstate__(self) -> tuple[Any, ...]:
        return self._values()

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._init(*state)

    def to_dict(self) -> dict[str, Any]:
        """The fields by name, in order (as ``dataclasses.asdict`` gives them for plain values)."""
        return {name: getattr(self, name) for name in self.__slots__}


class FrozenMap(Mapping[str, Any]):
    """A read-only, hashable, picklable mapping (``MappingProxyType`` is neither)."""

    __slots__ = ("_data",)

    def __init__(self, items: Iterable[tuple[str, Any]]) -> None:
        self._data = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __repr__(self) -> str:
        return repr(self._data)


def replaceable(cls: type[Record]) -> type[Record]:
    """``cls``, a :class:`Record` whose annotations name its first ``__slots__`` in order,
    declared a frozen dataclass for those that copy it with ``dataclasses.replace`` (and
    ``fields``, ``asdict``, ``is_dataclass``): the annotated slots are its fields, and no method
    is written and run for it, as ``@dataclass(frozen=True)`` would (its ``__init__`` is its
    own, the rest :class:`Record`'s). Slots after the annotated ones are values ``__init__``
    computes from the fields (``replace`` computes them again). Assigning a field raises
    ``dataclasses.FrozenInstanceError``, as a frozen dataclass does.

    The fields are registered when ``dataclasses`` first asks for them (``__dataclass_fields__``,
    which every function of it reads first), so a command that copies no record imports neither
    ``dataclasses`` nor ``copy``."""

    def __setattr__(self: Record, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self: Record, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    cls.__setattr__ = __setattr__  # type: ignore[method-assign]
    cls.__delattr__ = __delattr__  # type: ignore[method-assign]
    # What @dataclass sets for pattern matching, set now: the fields, in order.
    cls.__match_args__ = tuple(cls.__dict__.get("__annotations__", ()))
    cls.__dataclass_fields__ = _Fields(cls)  # type: ignore[attr-defined]
    return cls


class _Fields:
    """A :func:`replaceable` record's ``__dataclass_fields__`` until first read: then the class is
    declared a dataclass (which sets the real ones in its place) and those are returned."""

    __slots__ = ("cls",)

    def __init__(self, cls: type[Record]) -> None:
        self.cls = cls

    def __get__(self, instance: object, owner: type | None = None) -> dict[str, Any]:
        from dataclasses import dataclass

        cls = self.cls
        if cls.__dict__.get("__dataclass_fields__") is self:  # declared once (twice at once is harmless)
            dataclass(init=False, repr=False, eq=False)(cls)
        return cls.__dict__["__dataclass_fields__"]
