"""kernel_deps.resolve.resolver on small catalogues held in memory, one case file each.

As resolvelib's own functional tests do, each file of ``tests/unit/resolve/resolver_cases/`` lists a
catalogue (kernels, their versions, the refs naming them, their kernel-depends and
builds), what the project requests, optionally a prior lock's pins and deployment
targets, and what must come out: the version ``resolved`` for every kernel, or the
causes of the conflict, or the error. The real resolver runs
(:func:`kernel_deps.resolve.resolver.resolve`), on :class:`tests.fixtures.memory_index.CatalogueIndex`
in place of the Hub: no Hub, no files, well under a second a case. The tests against the
local Hub (``tests/test_resolver_*.py``, ``tests/functional/lock/test_lock.py``) check the same promises
through ``kernels lock``.

A case file's keys:

- ``about``: what the case shows, one line;
- ``requested``: repo id -> requirement, as ``[tool.kernels.dependencies]`` writes it;
- ``catalogue``: repo id -> version -> release: ``depends`` (repo id -> requirement, as
  metadata.json's kernel-depends), ``tags`` (default ``["v<version>"]``), ``branches``,
  ``variants`` (default ``["torch-universal"]``) and ``commit`` (default made up);
- ``locked``: repo id -> version, the prior lock's pins (each named by the release's first
  tag, else its first branch), and ``upgrade``: the repo ids whose pin is released, as
  ``kernels lock --upgrade-package`` releases it;
- ``targets``: deployment target names, as ``[tool.kernels] targets``;
- then one of ``resolved`` (repo id -> version, every kernel locked and no other),
  ``conflicted`` (the causes, ``<requirement> (from <who asked>)``, in any order) or
  ``error`` (how the message starts); with ``resolved``, optionally ``recorded`` (repo id ->
  the tag or branch name the lock records), ``dependencies`` (repo id -> the kernels its
  pin requires) and ``held_back`` (repo id -> version -> the targets it misses).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kernel_deps.core.errors import KernelDepsError, ResolutionError
from kernel_deps.core.spec import parse_requirement
from kernel_deps.core.targets import parse_target
from kernel_deps.lock.entries import LockedPin
from kernel_deps.resolve.candidates import version_name
from kernel_deps.resolve.resolver import resolve
from tests.fixtures.memory_index import CatalogueIndex, Release, commit_of

CASES = sorted((Path(__file__).parent / "resolver_cases").glob("*.toml"))
CASE_KEYS = {"about", "requested", "catalogue", "locked", "upgrade", "targets", "resolved", "conflicted", "error",
             "recorded", "dependencies", "held_back"}  # fmt: skip
OUTCOMES = {"resolved", "conflicted", "error"}
RELEASE_KEYS = {"depends", "tags", "branches", "variants", "commit"}


def read_case(path: Path) -> dict:
    """The case file, its keys checked: a misspelt key fails the case instead of being ignored."""
    case = tomllib.loads(path.read_text(encoding="utf-8"))
    assert set(case) <= CASE_KEYS, f"{path.name}: unknown keys {sorted(set(case) - CASE_KEYS)}"
    assert len(set(case) & OUTCOMES) == 1, f"{path.name}: give exactly one of {sorted(OUTCOMES)}"
    assert case.get("about") and case.get("requested"), f"{path.name}: 'about' and 'requested' are needed"
    for repo_id, versions in case["catalogue"].items():
        for version, release in versions.items():
            unknown = set(release) - RELEASE_KEYS
            assert not unknown, f"{path.name}: catalogue.{repo_id}.{version}: unknown keys {sorted(unknown)}"
    return case


def catalogue_of(case: dict) -> dict[str, dict[str, Release]]:
    return {
        repo_id: {
            version: Release(
                depends=tuple(release.get("depends", {}).items()),
                tags=tuple(release["tags"]) if "tags" in release else None,
                branches=tuple(release.get("branches", ())),
                variants=tuple(release.get("variants", Release.variants)),
                commit=release.get("commit"),
            )
            for version, release in versions.items()
        }
        for repo_id, versions in case["catalogue"].items()
    }


def pin_of(index: CatalogueIndex, repo_id: str, version: str) -> LockedPin:
    """The prior lock's pin of ``version``, named as the lock names it: its first tag, else its
    first branch. A version the catalogue lacks is a commit the Hub no longer has."""
    release = index.catalogue.get(repo_id, {}).get(version)
    if release is None:
        return LockedPin(commit_of(repo_id, version), f"v{version}")
    names = [f"v{version}"] if release.tags is None else [*release.tags, *release.branches]
    return LockedPin(index.commit(repo_id, version), names[0] if names else None)


def conflict_causes(error: ResolutionError) -> list[str]:
    """The causes a conflict names, one per line: ``<requirement> (from <who asked>)``."""
    lines = error.message.splitlines()
    assert lines[0] == "cannot find versions that satisfy every requirement:", error.message
    return [line.strip() for line in lines[1:] if line.startswith("  ") and not line.startswith("  versions of ")]


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_resolver_case(path: Path) -> None:
    case = read_case(path)
    index = CatalogueIndex(catalogue_of(case))
    requested = [parse_requirement(repo_id, value, source=path.name) for repo_id, value in case["requested"].items()]
    pins = {repo_id: pin_of(index, repo_id, version) for repo_id, version in case.get("locked", {}).items()}
    for repo_id in case.get("upgrade", ()):
        assert pins.pop(repo_id, None) is not None, f"{path.name}: upgrade names {repo_id}, which is not locked"
    targets = tuple(parse_target(name) for name in case.get("targets", ()))

    try:
        resolution = resolve(requested, index, pins=pins, targets=targets)
    except ResolutionError as exc:
        if "conflicted" in case:
            assert sorted(conflict_causes(exc)) == sorted(case["conflicted"])
            return
        assert "error" in case, f"{path.name}: expected a resolution, got:\n{exc.message}"
        assert exc.message.startswith(case["error"]), exc.message
        return
    except KernelDepsError as exc:
        assert "error" in case, f"{path.name}: expected no error, got {type(exc).__name__}: {exc.message}"
        assert exc.message.startswith(case["error"]), exc.message
        return
    assert "resolved" in case, f"{path.name}: expected a conflict or an error, got {resolution.pins}"

    versions = {repo_id: index.by_commit[candidate.commit][1] for repo_id, candidate in resolution.pins.items()}
    assert versions == case["resolved"]
    for repo_id, name in case.get("recorded", {}).items():
        pin = pins.get(repo_id)
        candidate = resolution.pins[repo_id]
        recorded = pin.version if pin is not None and pin.commit == candidate.commit else None
        assert version_name(candidate, resolution.requirements[repo_id], recorded) == name, repo_id
    for repo_id, dependencies in case.get("dependencies", {}).items():
        assert list(resolution.dependencies[repo_id]) == dependencies, repo_id
    held_back = {
        repo_id: {index.by_commit[candidate.commit][1]: list(missed) for candidate, missed in passed}
        for repo_id, passed in resolution.held_back.items()
    }
    assert held_back == case.get("held_back", {})
