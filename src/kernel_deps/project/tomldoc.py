"""pyproject.toml as tomlkit's document: parsed naming the error's line, a table found (or made), the line of a key.

Reading uses it only for an error's line, or where tomllib is not there (Python 3.10);
editing (:mod:`kernel_deps.project.toml_edit`) for every edit, since tomlkit keeps
comments and layout. tomlkit is imported inside the functions.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from kernel_deps.core.spec import TABLE, pyproject_error, show_toml

if TYPE_CHECKING:
    from tomlkit.toml_document import TOMLDocument


def parse_toml(text: str, source: str) -> TOMLDocument:
    """``text`` parsed by tomlkit, or PyprojectError with tomlkit's line and column."""
    import tomlkit
    from tomlkit.exceptions import ParseError, TOMLKitError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise pyproject_error(f"invalid TOML: {exc}", subject=f"{source}:{exc.line}") from None
    except TOMLKitError as exc:
        raise pyproject_error(f"invalid TOML: {exc}", subject=source) from None


def find_table(doc: TOMLDocument, text: str, source: str, *, create: bool, path: tuple[str, ...]) -> Any:
    """The table at ``path`` (made when ``create``), or None."""
    import tomlkit
    from tomlkit.items import InlineTable

    node: Any = doc
    for depth, key in enumerate(path):
        if key not in node:
            if not create:
                return None
            inline = isinstance(node, InlineTable)
            node[key] = tomlkit.inline_table() if inline else tomlkit.table(is_super_table=depth < 2)
        if not isinstance(node[key], dict):
            line = line_of(text, path[: depth + 1], None)
            shown = show_toml(node[key].unwrap() if hasattr(node[key], "unwrap") else node[key])
            where = f"{source}:{line}" if line else source
            raise pyproject_error(
                f"{'.'.join(path[:depth + 1])} = {shown}: expected a table like {TABLE}",
                subject=where,
            )
        node = node[key]
    return node


def line_of(text: str, path: tuple[str, ...], value: object) -> int | None:
    """The line of ``text`` that defines ``path``, or None when it cannot be told for sure."""
    candidates = [path]
    while isinstance(value, dict) and value:  # a [a."b/c"] table: where its first key is set
        key = next(iter(value))
        candidates.append((*candidates[-1], str(key)))
        value = value[key]
    for finder in (_line_by_substitution, _line_of_header):
        for candidate in candidates:
            line = finder(text, candidate)
            if line is not None:
                return line
    return None


def _line_by_substitution(text: str, path: tuple[str, ...]) -> int | None:
    """Replace ``path``'s value by a marker and see where it lands, if nothing else moved."""
    import tomlkit

    marker = f'"kernel-deps-{uuid.uuid4().hex}"'
    try:
        root = tomlkit.parse(text)
        node: Any = root
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = marker[1:-1]
        out = root.as_string()
    except Exception:  # a line number is a courtesy; never fail the real error over it
        return None
    start = out.find(marker)
    tail = out[start + len(marker) :]
    if start < 0 or not text.startswith(out[:start]) or not text.endswith(tail):
        return None
    return out.count("\n", 0, start) + 1 if start + len(tail) <= len(text) else None


def _line_of_header(text: str, path: tuple[str, ...]) -> int | None:
    """The line of a ``[a.b]`` or ``[[a.b]]`` header naming ``path``, written the usual way."""
    import tomlkit

    dotted = ".".join(tomlkit.key(key).as_string() for key in path)
    header = re.compile(rf"[ \t]*\[\[?[ \t]*{re.escape(dotted)}[ \t]*\]")
    return next((n for n, line in enumerate(text.split("\n"), 1) if header.match(line)), None)
