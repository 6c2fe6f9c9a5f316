"""Kernel requirements: what a ``[tool.kernels.dependencies]`` entry, a kernel's
``kernel-depends`` or a ``kernels add`` argument asks for.

An entry is a repo id and one of three forms: a PEP 440 range (``">=1.2,<2"``, selected
against ``vX.Y.Z`` tags), a major version (``1``: the ``v1`` branch), or an explicit
``{ revision = "..." }``. Invalid input is one :class:`PyprojectError` line that quotes it
(:func:`show_toml`). Reading and editing pyproject.toml itself is :mod:`kernel_deps.project.pyproject`.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import TYPE_CHECKING, Sequence

from kernel_deps.core.errors import InvalidRepoIdError, PyprojectError, UsageError
from kernel_deps.core.records import Record, replaceable

if TYPE_CHECKING:  # packaging is imported where a range is parsed: a major or a revision needs none of it
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

# The Hub's own rule for a namespaced repo id: org and name of letters, digits, '-', '_'
# and '.', not starting or ending with '-' or '.', no '--' or '..'.
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^{_PART}/{_PART}$")

TABLE = "[tool.kernels.dependencies]"
# A major version names the branch v<major>; more digits than this are a typo or an attack.
MAX_MAJOR_DIGITS = 9
_EXPECTED = 'expected a PEP 440 range like ">=1.2,<2", a major version like 1, or { revision = "..." }'
_EXPECTED_DEPENDS = 'expected {"repo-id": "org/name", "version": ">=1.2,<2"} or { ..., "revision": "..." }'
_EXPECTED_ARG = "expected ORG/NAME, ORG/NAME<specifier> (e.g. 'org/name>=1.2,<2') or ORG/NAME@REVISION"
# Compiled (by re's cache) only by `kernels add`, not at every start-up.
_ADD_ARG = r"(?s)^\s*(?P<id>[^\s<>=!~@]+)\s*(?:(?P<spec>[<>=!~].*)|@(?P<rev>.*))?$"
# The three patterns below are compiled (by re's cache) on first use: only a revision, or an
# error message, needs them.
# What git check-ref-format refuses, less its rarer corners: no spaces or control
# characters, none of ~^:?*[\, no '..', '@{' or '//', no leading '-', '/' or '.'.
_BAD_REVISION = r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|/\.|^[-/.]|[/.]$|\.lock$|^@$"
# Everything str.splitlines() breaks on: a message must stay one line whatever the input.
_LINE_BREAKS = r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]"
_BARE_KEY = r"[A-Za-z0-9_-]+"
_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"), ((list, tuple), "an array"),
    (dict, "a table"), ((datetime.date, datetime.time), "a date or time"),
)  # fmt: skip


def repo_id_reason(repo_id: object) -> str | None:
    """Why ``repo_id`` is not a valid ``org/name`` (the end of InvalidRepoIdError's sentence), or None."""
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or "--" in repo_id or ".." in repo_id:
        return "expected 'org/name' (letters, digits, '-', '_', '.'), e.g. 'kernels-community/activation'"
    if len(repo_id) > 96:
        return "longer than 96 characters"
    return None


def validate_repo_id(repo_id: str) -> str:
    """Return ``repo_id`` if it is a valid ``org/name``, else raise InvalidRepoIdError."""
    reason = repo_id_reason(repo_id)
    if reason is not None:
        raise InvalidRepoIdError(f"invalid kernel repo id {show_value(repo_id)}: {reason}")
    return repo_id


def org_of(repo_id: str) -> str:
    """The organization (namespace) publishing ``repo_id``."""
    return repo_id.partition("/")[0]


def publisher_allowance(repo_id: str, publishers: Sequence[str]) -> str | None:
    """The ``[tool.kernels.trust] publishers`` entry allowing ``repo_id`` (its repo id, else
    its organization), or None when none does."""
    if repo_id in publishers:
        return repo_id
    return org_of(repo_id) if org_of(repo_id) in publishers else None


@replaceable  # the Hub's view copies one with dataclasses.replace (a redirect's destination)
class KernelRequirement(Record):
    """A kernel repo and which of its versions are wanted: exactly one of three forms."""

    __slots__ = ("repo_id", "specifier", "major", "revision", "prereleases", "text")
    repo_id: str
    specifier: SpecifierSet | None
    major: int | None
    revision: str | None
    # Computed from the form given: whether the range names a pre-release, and the
    # requirement as pyproject.toml and the lock write it (``prereleases``, ``text``).

    def __init__(
        self, repo_id: str, specifier: SpecifierSet | None = None, major: int | None = None,
        revision: str | None = None,
    ) -> None:  # fmt: skip
        if [specifier, major, revision].count(None) != 2:
            raise ValueError(f"{repo_id}: give exactly one of specifier, major or revision")
        if specifier is not None and not str(specifier):
            raise ValueError(f"{repo_id}: an empty specifier allows every version; give a range")
        if specifier is not None:
            text, pre = str(specifier), bool(specifier.prereleases)
        else:
            text, pre = (str(major) if revision is None else f"revision={revision}"), False
        self._init(repo_id, specifier, major, revision, pre, text)

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


class InvalidEntry(Exception):
    """What is wrong with one entry (and whether to add the expected forms), before where it is."""

    def __init__(self, problem: str, *, hint: bool = True) -> None:
        super().__init__(problem)
        self.problem, self.hint = problem, hint


def parse_requirement(repo_id: str, value: object, *, source: str, line: int | None = None) -> KernelRequirement:
    """The requirement one ``[tool.kernels.dependencies]`` entry declares; PyprojectError if invalid."""
    try:
        return requirement_from_value(repo_id, value)
    except InvalidEntry as exc:
        raise entry_error(exc, repo_id, value, f"{source}:{line}" if line else source) from None


def parse_kernel_depends(entries: object, *, source: str) -> list[KernelRequirement]:
    """The requirements of a kernel's metadata.json ``kernel-depends`` list, in order."""
    if not isinstance(entries, list):
        raise pyproject_error(
            f"kernel-depends = {show_toml(entries)}: not a list",
            subject=source,
            hint=f"{_EXPECTED_DEPENDS} entries",
        )
    found: list[KernelRequirement] = []
    for index, entry in enumerate(entries):
        try:
            if not isinstance(entry, dict):
                raise InvalidEntry(f"{_kind(entry)} is not a dependency")
            if "repo-id" not in entry:
                raise InvalidEntry('"repo-id" is missing')
            found.append(requirement_from_value(entry["repo-id"], {k: v for k, v in entry.items() if k != "repo-id"}))
            if any(other.repo_id == found[-1].repo_id for other in found[:-1]):
                raise InvalidEntry(f"{found[-1].repo_id} is listed twice", hint=False)
        except InvalidEntry as exc:
            raise pyproject_error(
                f"kernel-depends[{index}] = {show_toml(entry)}: {exc.problem}",
                subject=source,
                hint=_EXPECTED_DEPENDS if exc.hint else None,
            ) from None
    return found


def parse_add_argument(arg: str) -> tuple[str, str | dict[str, str] | None]:
    """Split ``ORG/NAME``, ``ORG/NAME<specifier>`` or ``ORG/NAME@REVISION`` into repo id and value."""
    match = re.match(_ADD_ARG, arg)
    if match is None:
        raise UsageError(_one_line(f"invalid kernel requirement {show_toml(arg)}"), hint=_EXPECTED_ARG)
    repo_id = validate_repo_id(match["id"])
    value: str | dict[str, str] | None = match["spec"].strip() if match["spec"] is not None else None
    value = {"revision": match["rev"]} if match["rev"] is not None else value
    try:
        if value is not None:
            requirement_from_value(repo_id, value)
    except InvalidEntry as exc:
        raise UsageError(_one_line(f"invalid kernel requirement {show_toml(arg)}: {exc.problem}"),
                         hint=_EXPECTED_ARG if exc.hint else None) from None  # fmt: skip
    return repo_id, value


def requirement_from_value(repo_id: object, value: object) -> KernelRequirement:
    """The requirement ``repo_id = value`` declares, or InvalidEntry."""
    try:
        repo_id = validate_repo_id(repo_id)  # type: ignore[arg-type]
    except InvalidRepoIdError as exc:
        raise InvalidEntry(exc.reason, hint=False) from None
    if isinstance(value, dict):
        unknown = [key for key in value if key not in ("version", "revision")]
        if unknown:
            raise InvalidEntry(f"unknown key {show_toml(str(unknown[0]))}")
        if "version" in value and "revision" in value:
            raise InvalidEntry("give a version or a revision, not both")
        if "revision" in value:
            return KernelRequirement(repo_id, revision=_revision(value["revision"]))
        if "version" not in value:
            raise InvalidEntry("a version or a revision is needed")
        value = value["version"]
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidEntry(f"{_kind(value)} is not a version")
    if isinstance(value, int):
        if value < 0:
            raise InvalidEntry("a major version cannot be negative")
        if value >= 10**MAX_MAJOR_DIGITS:
            raise InvalidEntry(f"a major version of more than {MAX_MAJOR_DIGITS} digits is not a version")
        return KernelRequirement(repo_id, major=value)
    return KernelRequirement(repo_id, specifier=_specifier(value))


def _specifier(value: str) -> SpecifierSet:
    """A PEP 440 specifier set; a bare version ``1.2.0`` means ``==1.2.0``."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    text = value.strip()
    if not text:
        raise InvalidEntry("empty version specifier")
    if re.fullmatch(r"v?[0-9]{1,9}", text):
        major = int(text.lstrip("v"))
        hint = f'write {major} (no quotes) for the v{major} branch, or a range like ">={major},<{major + 1}"'
        raise InvalidEntry(f"ambiguous version; {hint} for its tags", hint=False)
    try:
        # packaging drops empty clauses (">=2,,<3"); whoever wrote one made a typo.
        if any(not clause.strip() for clause in text.split(",")):
            raise InvalidSpecifier(text)
        specifier = SpecifierSet(text if text[0] in "<>=!~" else f"=={Version(text)}")
        for clause in (clause for clause in specifier if clause.operator != "==="):
            Version(clause.version.removesuffix(".*"))  # one too long for int() fails here, not in allows()
        return specifier
    except ValueError:  # InvalidSpecifier and InvalidVersion are ValueErrors
        raise InvalidEntry("invalid version specifier") from None


def _revision(value: object) -> str:
    """A branch, tag or commit name, checked against git's rules for ref names."""
    if not isinstance(value, str):
        raise InvalidEntry(f"the revision is {_kind(value)}, not a string")
    if not value or re.search(_BAD_REVISION, value):
        raise InvalidEntry(f"invalid revision {show_toml(value)}; expected a branch, tag or 40-hex commit", hint=False)
    return value


def entry_error(exc: InvalidEntry, repo_id: object, value: object, where: str, more: str = "") -> PyprojectError:
    """The one-line error for a bad ``[tool.kernels.dependencies]`` entry."""
    reason = f"{TABLE} {show_toml(repo_id)} = {show_toml(value)}: {exc.problem}"
    if not exc.hint:
        return pyproject_error(f"{reason}{more}", subject=where)
    return pyproject_error(reason, subject=where, hint=f"{_EXPECTED}{more}")


def pyproject_error(reason: str | None = None, *, subject: object = None, hint: str | None = None) -> PyprojectError:
    """A PyprojectError whose fields are each one line whatever the input held."""
    def line(text: object) -> str | None:
        return None if text is None else _one_line(str(text))

    return PyprojectError(line(reason), subject=line(subject), hint=line(hint))


def _one_line(text: str) -> str:
    """``text`` with every line break escaped as a ``\\u`` escape of four hex digits."""
    return re.sub(_LINE_BREAKS, lambda match: f"\\u{ord(match[0]):04x}", text)


def show_toml(value: object, limit: int = 80) -> str:
    """``value`` written as TOML would write it, on one line, shortened past ``limit``."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:  # only JSON has it (kernel-depends): shown as written there
        text = "null"
    elif isinstance(value, int):
        text = _show_int(value, limit)
    elif isinstance(value, dict):
        keys = (k if isinstance(k, str) and re.fullmatch(_BARE_KEY, k) else show_toml(str(k)) for k in value)
        text = "{ " + ", ".join(f"{k} = {show_toml(v)}" for k, v in zip(keys, value.values())) + " }" if value else "{}"
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(show_toml(item) for item in value) + "]"
    else:
        text = str(value)
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show_value(value: object, limit: int = 80) -> str:
    """``value`` quoted for a message as Python writes it (``'org/name'``), ``null`` for JSON's
    null, shortened past ``limit``."""
    text = "null" if value is None else _show_int(value, limit) if isinstance(value, int) else _one_line(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _show_int(value: int, limit: int) -> str:
    """``value`` in decimal; a long one as its first digits and how many there are."""
    try:
        text = str(value)
    except ValueError:  # Python writes no integer of more than 4300 digits
        return "an integer of more than 4300 digits"
    digits = len(text.lstrip("-"))
    return text if len(text) <= min(limit, 40) else f"{text[:12]}... ({digits} digits)"


def _kind(value: object) -> str:
    """``value``'s TOML type for messages: "a float", "an array", ...; ``null`` for JSON's null."""
    if value is None:
        return "null"
    return next((name for types, name in _KINDS if isinstance(value, types)), f"a {type(value).__name__}")
