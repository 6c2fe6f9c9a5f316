"""Kernel requirements: ``[tool.kernels.dependencies]`` in pyproject.toml, read and edited.

An entry is a repo id and one of three forms: a PEP 440 range (``">=1.2,<2"``, selected
against ``vX.Y.Z`` tags), a major version (``1``: the ``v1`` branch), or an explicit
``{ revision = "..." }``. Editing goes through tomlkit so comments and layout survive.
"""

from __future__ import annotations

import datetime
import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from tomlkit.exceptions import ParseError, TOMLKitError
from tomlkit.items import InlineTable
from tomlkit.toml_document import TOMLDocument

from kernel_deps import atomicfile
from kernel_deps.errors import InvalidRepoIdError, PyprojectError, UsageError
from kernel_deps.settings import EDIT_JOURNAL_NAME, PYPROJECT_NAME

# The Hub's own rule for a namespaced repo id: org and name of letters, digits, '-', '_'
# and '.', not starting or ending with '-' or '.', no '--' or '..'.
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^{_PART}/{_PART}$")

TABLE = "[tool.kernels.dependencies]"
_PATH = ("tool", "kernels", "dependencies")
_EXPECTED = 'expected a PEP 440 range like ">=1.2,<2", a major version like 1, or { revision = "..." }'
_EXPECTED_DEPENDS = 'expected {"repo-id": "org/name", "version": ">=1.2,<2"} or { ..., "revision": "..." }'
_EXPECTED_ARG = "expected ORG/NAME, ORG/NAME<specifier> (e.g. 'org/name>=1.2,<2') or ORG/NAME@REVISION"
_ADD_ARG = re.compile(r"^\s*(?P<id>[^\s<>=!~@]+)\s*(?:(?P<spec>[<>=!~].*)|@(?P<rev>.*))?$", re.S)
# What git check-ref-format refuses, less its rarer corners: no spaces or control
# characters, none of ~^:?*[\, no '..', '@{' or '//', no leading '-', '/' or '.'.
_BAD_REVISION = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|/\.|^[-/.]|[/.]$|\.lock$|^@$")
# Everything str.splitlines() breaks on: a message must stay one line whatever the input.
_LINE_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"), ((list, tuple), "an array"),
    (dict, "a table"), ((datetime.date, datetime.time), "a date or time"),
)  # fmt: skip


def validate_repo_id(repo_id: str) -> str:
    """Return ``repo_id`` if it is a valid ``org/name``, else raise InvalidRepoIdError."""
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or "--" in repo_id or ".." in repo_id:
        raise InvalidRepoIdError(
            f"invalid kernel repo id {repo_id!r}: expected 'org/name' "
            "(letters, digits, '-', '_', '.'), e.g. 'kernels-community/activation'"
        )
    if len(repo_id) > 96:
        raise InvalidRepoIdError(f"invalid kernel repo id {repo_id!r}: longer than 96 characters")
    return repo_id


@dataclass(frozen=True, slots=True)
class KernelRequirement:
    """A kernel repo and which of its versions are wanted: exactly one of three forms."""

    repo_id: str
    specifier: SpecifierSet | None = None
    major: int | None = None
    revision: str | None = None
    prereleases: bool = field(init=False)
    text: str = field(init=False)

    def __post_init__(self) -> None:
        if [self.specifier, self.major, self.revision].count(None) != 2:
            raise ValueError(f"{self.repo_id}: give exactly one of specifier, major or revision")
        if self.specifier is not None and not str(self.specifier):
            raise ValueError(f"{self.repo_id}: an empty specifier allows every version; give a range")
        if self.specifier is not None:
            text, pre = str(self.specifier), bool(self.specifier.prereleases)
        else:
            text, pre = (str(self.major) if self.revision is None else f"revision={self.revision}"), False
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "prereleases", pre)

    def describe(self) -> str:
        """The requirement for messages, e.g. ``org/name 1 (branch v1)``."""
        if self.major is not None:
            return f"{self.repo_id} {self.major} (branch v{self.major})"
        return f"{self.repo_id} {self.text}"

    def allows(self, version: Version) -> bool:
        """Whether ``version`` is wanted; pre-releases only when the range names one, as pip."""
        if self.specifier is not None:
            return self.specifier.contains(version, prereleases=self.prereleases)
        if self.major is not None:
            return version.major == self.major and not version.is_prerelease
        raise ValueError(f"{self.describe()} pins a revision, not a version range")


class _Invalid(Exception):
    """What is wrong with one entry (and whether to add the expected forms), before where it is."""

    def __init__(self, problem: str, *, hint: bool = True) -> None:
        super().__init__(problem)
        self.problem, self.hint = problem, hint


def parse_requirement(repo_id: str, value: object, *, source: str, line: int | None = None) -> KernelRequirement:
    """The requirement one ``[tool.kernels.dependencies]`` entry declares; PyprojectError if invalid."""
    try:
        return _requirement(repo_id, value)
    except _Invalid as exc:
        raise _entry_error(exc, repo_id, value, f"{source}:{line}" if line else source) from None


def parse_kernel_depends(entries: object, *, source: str) -> list[KernelRequirement]:
    """The requirements of a kernel's metadata.json ``kernel-depends`` list, in order."""
    if not isinstance(entries, list):
        raise _error(f"{source}: kernel-depends = {_show(entries)}: not a list; {_EXPECTED_DEPENDS} entries")
    found: list[KernelRequirement] = []
    for index, entry in enumerate(entries):
        try:
            if not isinstance(entry, dict):
                raise _Invalid(f"{_kind(entry)} is not a dependency")
            if "repo-id" not in entry:
                raise _Invalid('"repo-id" is missing')
            found.append(_requirement(entry["repo-id"], {k: v for k, v in entry.items() if k != "repo-id"}))
            if any(other.repo_id == found[-1].repo_id for other in found[:-1]):
                raise _Invalid(f"{found[-1].repo_id} is listed twice", hint=False)
        except _Invalid as exc:
            hint = f"; {_EXPECTED_DEPENDS}" if exc.hint else ""
            raise _error(f"{source}: kernel-depends[{index}] = {_show(entry)}: {exc.problem}{hint}") from None
    return found


def read_pyproject_text(project_dir: Path) -> str:
    """The text of ``<project_dir>/pyproject.toml``, exactly as stored."""
    text = _read_pyproject(Path(project_dir), missing_ok=False)
    assert text is not None
    return text


def read_kernels_table(
    project_dir: Path, *, missing_ok: bool = False
) -> tuple[dict[str, Any] | None, list[KernelRequirement] | None]:
    """``[tool.kernels]`` of the project as plain data, and its requirements, from one read and parse.

    Either is None when its table is absent (both when there is no pyproject.toml and
    ``missing_ok``); the requirements are those :func:`read_requirements` returns.
    """
    source = str(Path(project_dir) / PYPROJECT_NAME)
    text = _read_pyproject(Path(project_dir), missing_ok=missing_ok)
    if text is None:
        return None, None
    return _kernels_table(text, source)


def requirements_from_text(text: str, *, source: str) -> list[KernelRequirement]:
    """:func:`read_requirements` of pyproject.toml text not yet written to ``source``."""
    _, requirements = _kernels_table(text, source)
    if requirements is None:
        raise _no_table(source)
    return requirements


def _kernels_table(text: str, source: str) -> tuple[dict[str, Any] | None, list[KernelRequirement] | None]:
    doc = _parse_toml(text, source)
    kernels = _find_table(doc, text, source, create=False, path=_PATH[:2])
    if kernels is None:
        return None, None
    table = _find_table(doc, text, source, create=False)
    return kernels.unwrap(), None if table is None else _requirements(table.unwrap(), text, source)


def read_requirements(project_dir: Path) -> list[KernelRequirement]:
    """Every requirement in ``[tool.kernels.dependencies]`` of the project, sorted by repo id."""
    _, requirements = read_kernels_table(project_dir)
    if requirements is None:
        raise _no_table(Path(project_dir) / PYPROJECT_NAME)
    return requirements


def _no_table(source: object) -> PyprojectError:
    return PyprojectError(
        f"{source}: no {TABLE} table; declare the kernels the project uses there, "
        "e.g. with 'kernels add kernels-community/activation'"
    )


def _read_pyproject(project_dir: Path, *, missing_ok: bool) -> str | None:
    path = project_dir / PYPROJECT_NAME
    # A `kernels add` / `remove` killed after committing its change: finish it first.
    atomicfile.finish_pending(project_dir / EDIT_JOURNAL_NAME)
    try:
        return path.read_bytes().decode("utf-8")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        if missing_ok:
            return None
        raise PyprojectError(f"no pyproject.toml in {project_dir}") from None
    except OSError as exc:
        raise PyprojectError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise PyprojectError(f"{path}: not valid UTF-8 (byte {exc.start})") from None


def _requirements(table: dict[str, Any], text: str, source: str) -> list[KernelRequirement]:
    """The requirements of a ``[tool.kernels.dependencies]`` table of ``text``, sorted by repo id."""
    found: list[KernelRequirement] = []
    bad: list[tuple[_Invalid, str, object]] = []
    for repo_id, value in table.items():
        try:
            found.append(_requirement(repo_id, value))
        except _Invalid as exc:
            bad.append((exc, repo_id, value))
    if bad:  # name the first in the file, count the rest
        exc, repo_id, value = bad[0]
        line = _line_of(text, (*_PATH, repo_id), value)
        more = f" (and {len(bad) - 1} more invalid {'entry' if len(bad) == 2 else 'entries'})" if bad[1:] else ""
        raise _entry_error(exc, repo_id, value, f"{source}:{line}" if line else source, more)
    return sorted(found, key=lambda requirement: requirement.repo_id)


def add_requirement(text: str, repo_id: str, value: str | int | dict[str, Any], *, source: str) -> str:
    """``text`` with ``repo_id`` set to ``value`` in ``[tool.kernels.dependencies]``; the rest unchanged."""
    parse_requirement(repo_id, value, source=source)
    base = text if not text or text.endswith("\n") else text + "\n"
    doc = _parse_toml(base, source)
    _find_table(doc, base, source, create=True)[repo_id] = _toml_value(value)
    return _keep_newlines(text, doc.as_string())


def remove_requirement(text: str, repo_id: str, *, source: str) -> str:
    """``text`` without ``repo_id``'s entry in ``[tool.kernels.dependencies]``; the rest unchanged."""
    doc = _parse_toml(text, source)
    table = _find_table(doc, text, source, create=False)
    if table is None or repo_id not in table:
        present = ", ".join(_show(key) for key in table) if table else "none"
        raise _error(f"{source}: {TABLE} has no entry {_show(repo_id)} to remove (entries: {present})")
    del table[repo_id]
    return _keep_newlines(text, doc.as_string())


def parse_add_argument(arg: str) -> tuple[str, str | dict[str, str] | None]:
    """Split ``ORG/NAME``, ``ORG/NAME<specifier>`` or ``ORG/NAME@REVISION`` into repo id and value."""
    match = _ADD_ARG.match(arg)
    if match is None:
        raise UsageError(_one_line(f"invalid kernel requirement {_show(arg)}; {_EXPECTED_ARG}"))
    repo_id = validate_repo_id(match["id"])
    value: str | dict[str, str] | None = match["spec"].strip() if match["spec"] is not None else None
    value = {"revision": match["rev"]} if match["rev"] is not None else value
    try:
        if value is not None:
            _requirement(repo_id, value)
    except _Invalid as exc:
        hint = f"; {_EXPECTED_ARG}" if exc.hint else ""
        raise UsageError(_one_line(f"invalid kernel requirement {_show(arg)}: {exc.problem}{hint}")) from None
    return repo_id, value


def _requirement(repo_id: object, value: object) -> KernelRequirement:
    """The requirement ``repo_id = value`` declares, or _Invalid."""
    try:
        repo_id = validate_repo_id(repo_id)  # type: ignore[arg-type]
    except InvalidRepoIdError as exc:
        raise _Invalid(exc.message, hint=False) from None
    if isinstance(value, dict):
        unknown = [key for key in value if key not in ("version", "revision")]
        if unknown:
            raise _Invalid(f"unknown key {_show(str(unknown[0]))}")
        if "version" in value and "revision" in value:
            raise _Invalid("give a version or a revision, not both")
        if "revision" in value:
            return KernelRequirement(repo_id, revision=_revision(value["revision"]))
        if "version" not in value:
            raise _Invalid("a version or a revision is needed")
        value = value["version"]
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _Invalid(f"{_kind(value)} is not a version")
    if isinstance(value, int):
        if value < 0:
            raise _Invalid("a major version cannot be negative")
        return KernelRequirement(repo_id, major=value)
    return KernelRequirement(repo_id, specifier=_specifier(value))


def _specifier(value: str) -> SpecifierSet:
    """A PEP 440 specifier set; a bare version ``1.2.0`` means ``==1.2.0``."""
    text = value.strip()
    if not text:
        raise _Invalid("empty version specifier")
    if re.fullmatch(r"v?[0-9]{1,9}", text):
        major = int(text.lstrip("v"))
        hint = f'write {major} (no quotes) for the v{major} branch, or a range like ">={major},<{major + 1}"'
        raise _Invalid(f"ambiguous version; {hint} for its tags", hint=False)
    try:
        # packaging drops empty clauses (">=2,,<3"); whoever wrote one made a typo.
        if any(not clause.strip() for clause in text.split(",")):
            raise InvalidSpecifier(text)
        specifier = SpecifierSet(text if text[0] in "<>=!~" else f"=={Version(text)}")
        for clause in (clause for clause in specifier if clause.operator != "==="):
            Version(clause.version.removesuffix(".*"))  # one too long for int() fails here, not in allows()
        return specifier
    except ValueError:  # InvalidSpecifier and InvalidVersion are ValueErrors
        raise _Invalid("invalid version specifier") from None


def _revision(value: object) -> str:
    """A branch, tag or commit name, checked against git's rules for ref names."""
    if not isinstance(value, str):
        raise _Invalid(f"the revision is {_kind(value)}, not a string")
    if not value or _BAD_REVISION.search(value):
        raise _Invalid(f"invalid revision {_show(value)}; expected a branch, tag or 40-hex commit", hint=False)
    return value


def _parse_toml(text: str, source: str) -> TOMLDocument:
    """``text`` parsed by tomlkit, or PyprojectError with tomlkit's line and column."""
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise _error(f"{source}:{exc.line}: invalid TOML: {exc}") from None
    except TOMLKitError as exc:
        raise _error(f"{source}: invalid TOML: {exc}") from None


def _find_table(doc: TOMLDocument, text: str, source: str, *, create: bool, path: tuple[str, ...] = _PATH) -> Any:
    """The ``[tool.kernels.dependencies]`` container, or the one at ``path`` (made when ``create``), or None."""
    node: Any = doc
    for depth, key in enumerate(path):
        if key not in node:
            if not create:
                return None
            inline = isinstance(node, InlineTable)
            node[key] = tomlkit.inline_table() if inline else tomlkit.table(is_super_table=depth < 2)
        if not isinstance(node[key], dict):
            line = _line_of(text, path[: depth + 1], None)
            shown = _show(node[key].unwrap() if hasattr(node[key], "unwrap") else node[key])
            where = f"{source}:{line}" if line else source
            raise _error(f"{where}: {'.'.join(path[: depth + 1])} = {shown}: expected a table like {TABLE}")
        node = node[key]
    return node


def _toml_value(value: str | int | dict[str, Any]) -> Any:
    """A tomlkit item for ``value``; tables are inline, spaced as people write them."""
    if not isinstance(value, dict):
        return value
    body = ", ".join(f"{key} = {tomlkit.item(item).as_string()}" for key, item in value.items())
    return tomlkit.parse(f"v = {{ {body} }}\n")["v"]


def _line_of(text: str, path: tuple[str, ...], value: object) -> int | None:
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
    dotted = ".".join(tomlkit.key(key).as_string() for key in path)
    header = re.compile(rf"[ \t]*\[\[?[ \t]*{re.escape(dotted)}[ \t]*\]")
    return next((n for n, line in enumerate(text.split("\n"), 1) if header.match(line)), None)


def _keep_newlines(original: str, out: str) -> str:
    """``out`` with every line ending in CRLF when every line of ``original`` did."""
    crlf = "\r\n" in original and original.count("\r\n") == original.count("\n")
    return out.replace("\r\n", "\n").replace("\n", "\r\n") if crlf else out


def _entry_error(exc: _Invalid, repo_id: object, value: object, where: str, more: str = "") -> PyprojectError:
    """The one-line error for a bad ``[tool.kernels.dependencies]`` entry."""
    hint = f"; {_EXPECTED}" if exc.hint else ""
    return _error(f"{where}: {TABLE} {_show(repo_id)} = {_show(value)}: {exc.problem}{hint}{more}")


def _error(message: str) -> PyprojectError:
    """A PyprojectError whose message is one line whatever the input held."""
    return PyprojectError(_one_line(message))


def _one_line(text: str) -> str:
    """``text`` with every line break escaped as a ``\\u`` escape of four hex digits."""
    return _LINE_BREAKS.sub(lambda match: f"\\u{ord(match[0]):04x}", text)


def _show(value: object, limit: int = 80) -> str:
    """``value`` written as TOML would write it, on one line, shortened past ``limit``."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, dict):
        keys = (k if isinstance(k, str) and _BARE_KEY.fullmatch(k) else _show(str(k)) for k in value)
        text = "{ " + ", ".join(f"{k} = {_show(v)}" for k, v in zip(keys, value.values())) + " }" if value else "{}"
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(_show(item) for item in value) + "]"
    else:
        text = str(value)
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(value: object) -> str:
    """``value``'s TOML type for messages: "a float", "an array", ..."""
    return next((name for types, name in _KINDS if isinstance(value, types)), f"a {type(value).__name__}")
