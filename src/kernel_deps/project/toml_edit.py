"""pyproject.toml edited in place through tomlkit: an entry of ``[tool.kernels.dependencies]`` set or removed.

Comments, layout and line endings survive; ``kernels add`` and ``kernels remove`` write the
result together with the relocked lock (:mod:`kernel_deps.commands.edit`).
"""

from __future__ import annotations

from typing import Any

from kernel_deps.core.spec import TABLE, parse_requirement, pyproject_error, show_toml
from kernel_deps.project.pyproject import DEPENDENCIES_PATH
from kernel_deps.project.tomldoc import find_table, parse_toml


def add_requirement(text: str, repo_id: str, value: str | int | dict[str, Any], *, source: str) -> str:
    """``text`` with ``repo_id`` set to ``value`` in ``[tool.kernels.dependencies]``; the rest unchanged."""
    parse_requirement(repo_id, value, source=source)
    base = text if not text or text.endswith("\n") else text + "\n"
    doc = parse_toml(base, source)
    find_table(doc, base, source, create=True, path=DEPENDENCIES_PATH)[repo_id] = _toml_value(value)
    return _keep_newlines(text, doc.as_string())


def has_requirement(text: str, repo_id: str, *, source: str) -> bool:
    """Whether ``[tool.kernels.dependencies]`` of ``text`` has an entry for ``repo_id``."""
    table = find_table(parse_toml(text, source), text, source, create=False, path=DEPENDENCIES_PATH)
    return table is not None and repo_id in table


def remove_requirement(text: str, repo_id: str, *, source: str) -> str:
    """``text`` without ``repo_id``'s entry in ``[tool.kernels.dependencies]``; the rest unchanged."""
    doc = parse_toml(text, source)
    table = find_table(doc, text, source, create=False, path=DEPENDENCIES_PATH)
    if table is None or repo_id not in table:
        present = ", ".join(show_toml(key) for key in table) if table else "none"
        raise pyproject_error(
            f"{TABLE} has no entry {show_toml(repo_id)} to remove (entries: {present})",
            subject=source,
        )
    del table[repo_id]
    return _keep_newlines(text, doc.as_string())


def _toml_value(value: str | int | dict[str, Any]) -> Any:
    """A tomlkit item for ``value``; tables are inline, spaced as people write them."""
    import tomlkit

    if not isinstance(value, dict):
        return value
    body = ", ".join(f"{key} = {tomlkit.item(item).as_string()}" for key, item in value.items())
    return tomlkit.parse(f"v = {{ {body} }}\n")["v"]


def _keep_newlines(original: str, out: str) -> str:
    """``out`` with every line ending in CRLF when every line of ``original`` did."""
    crlf = "\r\n" in original and original.count("\r\n") == original.count("\n")
    return out.replace("\r\n", "\n").replace("\n", "\r\n") if crlf else out
