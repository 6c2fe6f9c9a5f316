"""A record's fields checked as they are read from JSON: the error naming the bad key.

A record owns the rules about its values and raises a :class:`FieldError` naming the key
(``.variants.x.hash``); a parse adds the path above it (:meth:`FieldError.within`), so a
message ends like ``in '[1].variants.x.hash'``, as pylock's do. A bad value is quoted
briefly, whatever its size or depth (:data:`brief`). :func:`check_object` and
:func:`optional` hold what only JSON can get wrong: an entry that is not an object,
unknown or missing keys, ``null`` for an absent key.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


class _Brief(reprlib.Repr):
    """Quotes bad values briefly, whatever their size or depth; JSON's null, true and false as written."""

    def repr1(self, x: Any, level: int) -> str:
        if x is None or isinstance(x, bool):
            return json.dumps(x)
        return super().repr1(x, level)


brief = _Brief()
brief.maxstring = brief.maxother = 80
brief.maxlist = brief.maxdict = 4
brief.maxlevel = 2


class FieldError(ValueError):
    """A value breaks a rule; ``key`` is its path inside the record (``.variants.x.hash``)."""

    def __init__(self, key: str, detail: str, expected: str, *, where: str | None = None) -> None:
        self.key, self.detail, self.expected = key, detail, expected
        self.where = where or (f"'{key.lstrip('.')}'" if key else "the record")
        super().__init__(f"{detail} in {self.where}; {expected}")

    def within(self, prefix: str) -> FieldError:
        """The same error, its path below ``prefix`` (``[1]``, ``.variants.x``)."""
        return FieldError(prefix + self.key, self.detail, self.expected)


def invalid(key: str, what: str, value: object, expected: str) -> FieldError:
    """``invalid <what> <value, briefly> in '<key>'; <expected>``."""
    return FieldError(key, f"invalid {what} {brief.repr(value)}", expected)


def step(name: str) -> str:
    """One step of a dotted path: ``.name``, or ``['odd name']`` quoted when not plain."""
    return f".{name}" if _PLAIN_NAME.fullmatch(name) and len(name) <= 80 else f"[{brief.repr(name)}]"


def check_object(obj: Any, key: str, allowed: Sequence[str], required: Sequence[str]) -> dict[str, Any]:
    """``obj`` if it is a JSON object with only ``allowed`` keys and all ``required`` ones."""
    if not isinstance(obj, dict):
        raise invalid(key, "value", obj, f"expected an object with {', '.join(allowed)}")
    for name in obj:
        if name not in allowed:
            expected = f"expected only {', '.join(allowed)}"
            raise FieldError(f"{key}{step(name)}", f"unknown key {brief.repr(name)}", expected)
    for name in required:
        if name not in obj:
            raise FieldError(key, f"missing key {name!r}", f"expected {', '.join(required)}")
    return obj


def optional(entry: dict[str, Any], key: str, kind: str = "a string") -> Any:
    """``entry[key]``, None when absent; JSON ``null`` is refused (absent is written by leaving it out)."""
    if key in entry and entry[key] is None:
        raise invalid(f".{key}", key, None, f"expected {kind}, or no key at all")
    return entry.get(key)


def per_name(raw: Any, key: str, parse: Callable[[Any], Any]) -> Any:
    """Each value of the object ``raw`` parsed, an error named under ``.<key>.<name>``; a
    non-object as it is, for the record to refuse naming the key."""
    if not isinstance(raw, dict):
        return raw
    parsed: dict[str, Any] = {}
    for name, value in raw.items():
        try:
            parsed[name] = parse(value)
        except FieldError as exc:
            raise exc.within(f".{key}{step(name)}") from None
    return parsed
