"""Deployment targets: the machines a project ships to, and which build serves each.

A project declares ``[tool.kernels] targets = [...]``; each target is written as the name
an exact torch build for that machine would have (``torch213-cxx11-cu130-x86_64-linux``,
``torch213-cpu-aarch64-darwin``). The build that serves a target is the one the loader
would pick on that machine (:func:`kernel_deps.core.variants.select_variant`, the order of the
Hugging Face ``kernels`` library): so a stable-ABI build, a ``torch-<backend>`` build or
``torch-universal`` serves a target as well as an exact build does.

Pure: no I/O. The resolver asks :func:`missing_targets` of each candidate's variants,
``kernels lock --check`` and ``kernels verify`` ask :func:`check_targets` of the lock,
``kernels download --target`` and ``kernels tree`` ask :func:`serving_variant`.
"""

from __future__ import annotations

import json
from typing import Iterable, Sequence

from kernel_deps.core.errors import UsageError, render
from kernel_deps.core.records import Record
from kernel_deps.core.system import SystemInfo
from kernel_deps.core.variants import InvalidVariantError, parse_variant, rank_variants, system_for_variant

TARGET_EXAMPLE = "torch213-cxx11-cu130-x86_64-linux"


class InvalidTargetName(ValueError):
    """A target name that names no machine; the message says why and what to write."""


class Target(Record):
    """One deployment target: its name as written, and the machine it describes."""

    __slots__ = ("name", "system")
    name: str
    system: SystemInfo

    def __init__(self, name: str, system: SystemInfo) -> None:
        self._init(name, system)

    def __str__(self) -> str:
        return self.name


def parse_target(name: object) -> Target:
    """The target ``name`` describes; InvalidTargetName (a ValueError) saying why not."""
    if not isinstance(name, str):
        raise InvalidTargetName(f"expected a string naming an exact build, like \"{TARGET_EXAMPLE}\"")
    variant = parse_variant(name)
    if variant is None:
        raise InvalidTargetName(f"not a build variant name; write the exact build name, like \"{TARGET_EXAMPLE}\"")
    if variant.noarch or variant.framework != "torch" or variant.torch_version is None:
        raise InvalidTargetName(
            "names no single machine (a target needs a torch version, backend, arch and os); "
            f"write the exact build name, like \"{TARGET_EXAMPLE}\""
        )
    try:
        system = system_for_variant(name)
    except InvalidVariantError as exc:
        raise InvalidTargetName(render(exc.subject, exc.reason, exc.hint)) from None
    return Target(name, system)


def parse_targets(names: Sequence[object]) -> tuple[Target, ...]:
    """Every target of a list, in order; InvalidTargetName naming the first bad item's index."""
    found: list[Target] = []
    seen: set[str] = set()
    for position, name in enumerate(names):
        try:
            target = parse_target(name)
        except InvalidTargetName as exc:
            raise InvalidTargetName(f"[{position}] = {_shown(name)}: {exc}") from None
        if target.name in seen:
            raise InvalidTargetName(f"[{position}] = {_shown(name)}: listed twice; remove one")
        seen.add(target.name)
        found.append(target)
    return tuple(found)


def targets_from_options(
    names: Sequence[str], all_targets: bool, declared: Sequence[Target], source: object
) -> tuple[Target, ...]:
    """The targets ``--target NAME`` (repeatable, any exact build name) or ``--all-targets``
    (the ``declared`` ones, from ``source``) ask for; UsageError on a bad name or none declared."""
    if all_targets and names:
        raise UsageError("--all-targets already takes every declared target; drop --target")
    if all_targets:
        if not declared:
            raise UsageError(
                f"--all-targets: {source} declares no targets; add [tool.kernels] "
                f'targets = ["{TARGET_EXAMPLE}", ...] or pass --target NAME'
            )
        return tuple(declared)
    found: list[Target] = []
    for name in dict.fromkeys(names):
        try:
            found.append(parse_target(name))
        except InvalidTargetName as exc:
            raise UsageError(exc, subject=f"--target {name}") from None
    return tuple(found)


def serving_variant(target: Target, variants: Iterable[str]) -> str | None:
    """The build of ``variants`` the loader would take on ``target``, or None."""
    ranked, _ = rank_variants(variants, target.system)
    return ranked[0] if ranked else None


def missing_targets(targets: Sequence[Target], variants: Iterable[str]) -> list[Target]:
    """The targets that none of ``variants`` serves, in declared order."""
    names = list(variants)
    return [target for target in targets if serving_variant(target, names) is None]


def describe_missing(missing: Sequence[Target]) -> str:
    """``no build for A`` / ``no build for A, B``."""
    return "no build for " + ", ".join(t.name for t in missing)


def _shown(value: object) -> str:
    shown = json.dumps(value) if isinstance(value, str) else repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def variants_for_targets(repo_id: str, names: Iterable[str], targets: Sequence[Target], *, locked_as: str) -> list[str]:
    """The variant of a locked kernel (``names``, locked as ``locked_as``: its version or
    short commit) that serves each target (the loader's pick there); TargetNotServedError
    naming the kernel and the target when the lock has none for it."""
    from kernel_deps.core.errors import TargetNotServedError

    names = list(names)
    chosen: set[str] = set()
    for target in targets:
        name = serving_variant(target, names)
        if name is None:
            locked = ", ".join(sorted(names)) or "none"
            raise TargetNotServedError(
                f"{repo_id} {locked_as} has no build for it (locked: {locked})",
                subject=f"--target {target.name}",
                hint=(
                    "declare it in [tool.kernels] targets and run 'kernels lock' to pick a version that "
                    "has one"
                ),
            )
        chosen.add(name)
    return sorted(chosen)
