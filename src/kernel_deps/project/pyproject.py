"""pyproject.toml read: ``[tool.kernels]`` with its line numbers, for errors.

Reading parses the file once (the standard library's tomllib where it is there and the
file is valid TOML; tomlkit otherwise, which names the error) and returns the
``[tool.kernels]`` table and the requirements of ``[tool.kernels.dependencies]``
(:mod:`kernel_deps.core.spec` judges each entry); an invalid entry is named with its file
and line (found, for an error only, by :mod:`kernel_deps.project.tomldoc`); the targets,
publishers and signature policy are judged from the same table. Editing is
:mod:`kernel_deps.project.toml_edit`; a command reads the file once into a
:class:`kernel_deps.project.record.Project`. Reading never applies the journal of an
interrupted ``kernels add`` / ``kernels remove``: with one beside the file, it is a
PendingEditError (:mod:`kernel_deps.project.edit`; a command that writes finishes the
journal first, under the project's edit lock).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernel_deps.core.boundedread import PROJECT_FILE_LIMIT, read_bounded
from kernel_deps.core.errors import InvalidRepoIdError, PyprojectError
from kernel_deps.core.settings import PYPROJECT_NAME
from kernel_deps.trust.signers import GITHUB_ISSUER, Identity, SignaturePolicy
from kernel_deps.core.spec import (
    TABLE,
    InvalidEntry,
    KernelRequirement,
    entry_error,
    pyproject_error,
    requirement_from_value,
    show_toml,
    validate_repo_id,
)
from kernel_deps.core.targets import InvalidTargetName, Target, parse_targets
from kernel_deps.project.edit import refuse_pending_edit

DEPENDENCIES_PATH = ("tool", "kernels", "dependencies")  # where [tool.kernels.dependencies] sits
_TARGETS_PATH = ("tool", "kernels", "targets")
_TRUST_PATH = ("tool", "kernels", "trust")
TRUST_EXAMPLE = 'publishers = ["my-org", "other-org/one-kernel"]'
_TRUST_KEYS = ("publishers", "trusted-root", "require-signatures", "identities")
IDENTITY_EXAMPLE = '{ repository = "org/name", workflow = ".github/workflows/build.yml", ref = "refs/heads/main" }'
_IDENTITY_KEYS = ("repository", "workflow", "ref", "issuer")


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
    _, table, requirements = read_kernels_source(project_dir, missing_ok=missing_ok)
    return table, requirements


def read_kernels_source(
    project_dir: Path, *, missing_ok: bool = False
) -> tuple[str | None, dict[str, Any] | None, list[KernelRequirement] | None]:
    """:func:`read_kernels_table`'s answer with the text it parsed, for naming lines in
    errors about the table's other keys (``targets``, ``trust``); all None when there is
    no pyproject.toml and ``missing_ok``."""
    source = str(Path(project_dir) / PYPROJECT_NAME)
    text = _read_pyproject(Path(project_dir), missing_ok=missing_ok)
    if text is None:
        return None, None, None
    return (text, *kernels_table_from_text(text, source=source))


def requirements_from_text(text: str, *, source: str) -> list[KernelRequirement]:
    """:func:`read_requirements` of pyproject.toml text not yet written to ``source``."""
    _, requirements = kernels_table_from_text(text, source=source)
    if requirements is None:
        raise missing_table_error(source)
    return requirements


def kernels_table_from_text(text: str, *, source: str) -> tuple[dict[str, Any] | None, list[KernelRequirement] | None]:
    """``[tool.kernels]`` of pyproject.toml text read from ``source`` as plain data, and its requirements."""
    plain = _plain_kernels_table(text)
    if plain is not None:
        kernels, table = plain
        return kernels, None if table is None else _requirements(table, text, source)
    from kernel_deps.project.tomldoc import find_table, parse_toml  # the error's line, or Python 3.10

    doc = parse_toml(text, source)
    kernels = find_table(doc, text, source, create=False, path=DEPENDENCIES_PATH[:2])
    if kernels is None:
        return None, None
    table = find_table(doc, text, source, create=False, path=DEPENDENCIES_PATH)
    return kernels.unwrap(), None if table is None else _requirements(table.unwrap(), text, source)


def read_project(project_dir: Path) -> tuple[list[KernelRequirement], tuple[Target, ...]]:
    """The project's requirements and its declared deployment targets, from one read and parse."""
    source = str(Path(project_dir) / PYPROJECT_NAME)
    text = _read_pyproject(Path(project_dir), missing_ok=False)
    assert text is not None
    return project_from_text(text, source=source)


def project_from_text(text: str, *, source: str) -> tuple[list[KernelRequirement], tuple[Target, ...]]:
    """:func:`read_project` of pyproject.toml text not yet written to ``source``."""
    kernels, requirements = kernels_table_from_text(text, source=source)
    if requirements is None:
        raise missing_table_error(source)
    return requirements, targets_from_table(kernels, text, source)


def read_targets(project_dir: Path) -> tuple[Target, ...]:
    """The deployment targets ``[tool.kernels] targets`` declares; empty when none are
    (with or without a ``[tool.kernels.dependencies]`` table)."""
    text = _read_pyproject(Path(project_dir), missing_ok=False)
    assert text is not None
    return targets_from_text(text, source=str(Path(project_dir) / PYPROJECT_NAME))


def targets_from_text(text: str, *, source: str) -> tuple[Target, ...]:
    """:func:`read_targets` of pyproject.toml text read from ``source``."""
    kernels, _ = kernels_table_from_text(text, source=source)
    return targets_from_table(kernels, text, source)


def targets_from_table(kernels: dict[str, Any] | None, text: str, source: str) -> tuple[Target, ...]:
    """``targets`` of a ``[tool.kernels]`` table of ``text``; PyprojectError naming the line and item."""
    if kernels is None or "targets" not in kernels:
        return ()
    value = kernels["targets"]
    if not isinstance(value, list):
        raise pyproject_error(
            f'tool.kernels.targets = {show_toml(value)}: expected a list of build names, like '
            'targets = ["torch213-cxx11-cu130-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux"]',
            subject=_at(text, source, _TARGETS_PATH),
        )
    try:
        return parse_targets(value)
    except InvalidTargetName as exc:
        raise pyproject_error(f"tool.kernels.targets{exc}", subject=_at(text, source, _TARGETS_PATH)) from None


def read_trust(project_dir: Path) -> tuple[str, ...]:
    """The publishers ``[tool.kernels.trust] publishers`` allows: organizations and repo ids,
    as written; empty when none are."""
    text = _read_pyproject(Path(project_dir), missing_ok=False)
    assert text is not None
    source = str(Path(project_dir) / PYPROJECT_NAME)
    kernels, _ = kernels_table_from_text(text, source=source)
    return trust_from_table(kernels, text, source)


def trust_from_table(kernels: dict[str, Any] | None, text: str, source: str) -> tuple[str, ...]:
    """``[tool.kernels.trust] publishers`` of a ``[tool.kernels]`` table of ``text``, each an
    organization (``my-org``) or one repo id (``org/name``); PyprojectError naming the line."""
    if kernels is None or "trust" not in kernels:
        return ()
    table = kernels["trust"]
    if not isinstance(table, dict):
        raise pyproject_error(
            f"tool.kernels.trust = {show_toml(table)}: expected a table like "
            f"[tool.kernels.trust] {TRUST_EXAMPLE}",
            subject=_at(text, source, _TRUST_PATH),
        )
    unknown = sorted(key for key in table if key not in _TRUST_KEYS)
    if unknown:
        raise pyproject_error(
            f"tool.kernels.trust has an unknown key {show_toml(unknown[0])}",
            subject=_at(text, source, _TRUST_PATH),
            hint=f"expected only {', '.join(_TRUST_KEYS)}, like {TRUST_EXAMPLE}",
        )
    value = table.get("publishers", [])
    if not isinstance(value, list):
        raise pyproject_error(
            f"tool.kernels.trust.publishers = {show_toml(value)}: expected a list like "
            f"{TRUST_EXAMPLE}",
            subject=_where(text, source, "publishers", value),
        )
    for item in value:
        if not _is_publisher(item):
            raise pyproject_error(
                f"tool.kernels.trust.publishers: {show_toml(item)} is neither an organization nor a "
                "repo id (org/name)",
                subject=_where(text, source, "publishers", value),
                hint=f"expected a list like {TRUST_EXAMPLE}",
            )
    return tuple(value)


def read_signature_policy(project_dir: Path) -> SignaturePolicy:
    """What ``[tool.kernels.trust]`` (and each kernel's own ``identities``) asks of signatures."""
    text = _read_pyproject(Path(project_dir), missing_ok=False)
    assert text is not None
    source = str(Path(project_dir) / PYPROJECT_NAME)
    kernels, _ = kernels_table_from_text(text, source=source)
    return signature_policy_from_table(kernels, text, source, Path(project_dir))


def signature_policy_from_table(
    kernels: dict[str, Any] | None, text: str, source: str, project_dir: Path
) -> SignaturePolicy:
    """The signature policy of a ``[tool.kernels]`` table of ``text``; PyprojectError naming the line and key."""
    trust_from_table(kernels, text, source)  # the table's shape and its unknown keys
    table = (kernels or {}).get("trust", {})
    root = table.get("trusted-root")
    if root is not None and (not isinstance(root, str) or not root.strip() or "\0" in root):
        raise pyproject_error(
            f'tool.kernels.trust.trusted-root = {show_toml(root)}: expected the path of a '
            'Sigstore trusted root JSON file, like trusted-root = "sigstore/trusted_root.json"',
            subject=_where(text, source, "trusted-root", root),
        )
    require = table.get("require-signatures", False)
    if not isinstance(require, bool):
        raise pyproject_error(
            f"tool.kernels.trust.require-signatures = {show_toml(require)}: expected true or "
            "false",
            subject=_where(text, source, "require-signatures", require),
        )
    identities = _identities(table.get("identities", []), text, source, (*_TRUST_PATH, "identities"),
                             "tool.kernels.trust.identities")  # fmt: skip
    narrowed: dict[str, tuple[Identity, ...]] = {}
    for repo_id, value in ((kernels or {}).get("dependencies") or {}).items():
        if isinstance(value, dict) and "identities" in value:
            path = (*DEPENDENCIES_PATH, repo_id, "identities")
            name = f"{TABLE} {show_toml(repo_id)}.identities"
            narrowed[repo_id] = _identities(value["identities"], text, source, path, name)
            if not narrowed[repo_id]:
                line = _line_of(text, path, value["identities"])
                raise pyproject_error(
                    f"{TABLE} {show_toml(repo_id)}.identities is empty",
                    subject=f"{source}:{line or '?'}",
                    hint=(
                        f"list the signers allowed for this kernel, like identities = [{IDENTITY_EXAMPLE}], "
                        "or leave the key out"
                    ),
                )
    trusted_root = (Path(project_dir) / root) if root is not None else None
    return SignaturePolicy(
        trusted_root=trusted_root, require=require, identities=identities, kernel_identities=narrowed
    )


def _at(text: str, source: str, path: tuple[str, ...], value: object = None) -> str:
    """``source:line`` of ``path`` in ``text``, or ``source`` when the line cannot be told.
    Asked only for an error: finding the line parses the text again with tomlkit."""
    from kernel_deps.project.tomldoc import line_of

    line = line_of(text, path, value)
    return f"{source}:{line}" if line else source


def _where(text: str, source: str, key: str, value: object) -> str:
    from kernel_deps.project.tomldoc import line_of

    line = line_of(text, (*_TRUST_PATH, key), value) or line_of(text, _TRUST_PATH, None)
    return f"{source}:{line}" if line else source


def _identities(value: object, text: str, source: str, path: tuple[str, ...], name: str) -> tuple[Identity, ...]:
    """A list of identity tables; PyprojectError naming the item and what is wrong."""
    if not isinstance(value, list):
        raise pyproject_error(
            f"{name} = {show_toml(value)}: expected a list like [{IDENTITY_EXAMPLE}]",
            subject=_at(text, source, path, value),
        )
    found = []
    for index, item in enumerate(value):
        problem = None
        if not isinstance(item, dict):
            problem = "not a table"
        elif unknown := [key for key in item if key not in _IDENTITY_KEYS]:
            problem = f"unknown key {show_toml(str(unknown[0]))}"
        elif missing := [key for key in _IDENTITY_KEYS[:3] if key not in item]:
            problem = f"{missing[0]} is missing"
        elif bad := [key for key, v in item.items() if not isinstance(v, str) or not v.strip()]:
            problem = f"{bad[0]} is not a non-empty string"
        elif not _is_publisher(item["repository"]) or "/" not in item["repository"]:
            problem = f"repository {show_toml(item['repository'])} is not a repository (org/name)"
        if problem:
            raise pyproject_error(
                f"{name}[{index}] = {show_toml(item)}: {problem}",
                subject=_at(text, source, path, value),
                hint=f"expected a table like {IDENTITY_EXAMPLE}",
            )
        found.append(Identity(item["repository"], item["workflow"], item["ref"], item.get("issuer", GITHUB_ISSUER)))
    return tuple(found)


def _is_publisher(item: object) -> bool:
    """Whether ``item`` names an organization or one repo id (the Hub's rule for each part)."""
    if not isinstance(item, str):
        return False
    try:
        validate_repo_id(item if "/" in item else f"{item}/x")
    except InvalidRepoIdError:
        return False
    return True


def read_requirements(project_dir: Path) -> list[KernelRequirement]:
    """Every requirement in ``[tool.kernels.dependencies]`` of the project, sorted by repo id."""
    _, requirements = read_kernels_table(project_dir)
    if requirements is None:
        raise missing_table_error(Path(project_dir) / PYPROJECT_NAME)
    return requirements


def missing_table_error(source: object) -> PyprojectError:
    """The error of a project whose pyproject.toml has no ``[tool.kernels.dependencies]`` table."""
    return PyprojectError(
        f"no {TABLE} table",
        subject=source,
        hint=(
            "declare the kernels the project uses there, e.g. with 'kernels add "
            "kernels-community/activation'"
        ),
    )


def _read_pyproject(project_dir: Path, *, missing_ok: bool) -> str | None:
    path = project_dir / PYPROJECT_NAME
    # A pending edit is finished only by a command that writes, before it reads (kernel_deps.project.edit).
    refuse_pending_edit(path)
    try:
        # A regular file (through links) of at most PROJECT_FILE_LIMIT, else one line: a link
        # to /dev/zero or a FIFO in a checkout is never read or waited on.
        return read_bounded(path, PROJECT_FILE_LIMIT).decode("utf-8")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        if missing_ok:
            return None
        raise PyprojectError(f"no pyproject.toml in {project_dir}") from None
    except OSError as exc:
        raise PyprojectError(f"cannot read: {exc.strerror}", subject=path) from None
    except UnicodeDecodeError as exc:
        raise PyprojectError(f"not valid UTF-8 (byte {exc.start})", subject=path) from None


def _requirements(table: dict[str, Any], text: str, source: str) -> list[KernelRequirement]:
    """The requirements of a ``[tool.kernels.dependencies]`` table of ``text``, sorted by repo id."""
    found: list[KernelRequirement] = []
    bad: list[tuple[InvalidEntry, str, object]] = []
    for repo_id, value in table.items():
        if isinstance(value, dict) and "identities" in value:  # the signature policy's (signature_policy_from_table)
            value = {key: item for key, item in value.items() if key != "identities"}
        try:
            found.append(requirement_from_value(repo_id, value))
        except InvalidEntry as exc:
            bad.append((exc, repo_id, value))
    if bad:  # name the first in the file, count the rest
        exc, repo_id, value = bad[0]
        line = _line_of(text, (*DEPENDENCIES_PATH, repo_id), value)
        more = f" (and {len(bad) - 1} more invalid {'entry' if len(bad) == 2 else 'entries'})" if bad[1:] else ""
        raise entry_error(exc, repo_id, value, f"{source}:{line}" if line else source, more)
    return sorted(found, key=lambda requirement: requirement.repo_id)


def _plain_kernels_table(text: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None] | None:
    """``[tool.kernels]`` and its ``dependencies`` as plain data, read by the standard library's
    tomllib (Python 3.11+), which starts in a fraction of tomlkit's import time; None when the
    text is not valid TOML, or either is there but not a table, so that tomlkit's parse names
    the error as it always has. Reading needs no formatting kept; editing goes through tomlkit."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return None
    try:
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return None
    tool = doc.get("tool")
    kernels = tool.get("kernels") if isinstance(tool, dict) else None
    if tool is not None and not isinstance(tool, dict) or kernels is not None and not isinstance(kernels, dict):
        return None
    if kernels is None:
        return None, None
    table = kernels.get("dependencies")
    if table is not None and not isinstance(table, dict):
        return None
    return kernels, table


def _line_of(text: str, path: tuple[str, ...], value: object) -> int | None:
    """The line of ``text`` that defines ``path`` (asked only for an error)."""
    from kernel_deps.project.tomldoc import line_of

    return line_of(text, path, value)
