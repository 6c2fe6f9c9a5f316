"""The one parse of every JSON document that comes from outside.

Hub files (``metadata.json``, listings), the lock, the edit journal and the cache's
manifests are read by kernel-deps but written by someone else, so each goes through
:func:`loads`. It accepts only what a reasonable document of ours or the Hub's holds and
turns every way JSON or Python's own limits can fail into one :class:`JSONDocumentError`
whose message is a short reason (``"nested more than 64 deep"``). The caller adds which
kernel, commit and file it was, as for any other bad value.

Refused, besides invalid JSON: text that is not UTF-8; nesting deeper than
:data:`MAX_DEPTH`; an integer of more than :data:`MAX_INT_DIGITS` digits (Python refuses
4,300 with a traceback, and nothing we read needs more than a size); ``NaN`` and
``Infinity``, which are not JSON; duplicate keys when the caller asks.

This module imports only the standard library: every other module may use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "JSONDocumentError", "loads"]

MAX_DEPTH = 64
MAX_INT_DIGITS = 40


class JSONDocumentError(ValueError):
    """A JSON document kernel-deps cannot use; the message is the reason, without the source."""


def loads(data: bytes | str, *, no_duplicate_keys: bool = False) -> Any:
    """The value of the JSON document ``data``; JSONDocumentError saying why it cannot be one."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONDocumentError(f"not UTF-8 text (byte {exc.start})") from None
    hook: Callable[[list[tuple[str, Any]]], dict] | None = _unique_keys if no_duplicate_keys else None
    try:
        value = json.loads(data, parse_int=_parse_int, parse_constant=_refuse_constant, object_pairs_hook=hook)
    except JSONDocumentError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONDocumentError(f"not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise JSONDocumentError(f"nested more than {MAX_DEPTH} deep") from None
    except ValueError as exc:  # Python's own limits, should one be reached another way
        raise JSONDocumentError(f"cannot be read ({exc})") from None
    _check_depth(value)
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONDocumentError(f"holds an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _refuse_constant(name: str) -> Any:
    raise JSONDocumentError(f"holds {name}, which is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise JSONDocumentError(f"has the key {key[:80]!r} twice in one object")
        result[key] = value
    return result


def _check_depth(value: Any) -> None:
    """JSONDocumentError when ``value`` nests containers deeper than MAX_DEPTH (no recursion)."""
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        level = [
            child
            for item in level
            if isinstance(item, (dict, list))
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return
    raise JSONDocumentError(f"nested more than {MAX_DEPTH} deep")
