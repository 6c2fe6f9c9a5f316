"""The lock against what is on this machine, offline: the cache file by file, installed kernel wheels,
each cached build's digest and recorded signer, and the variants this machine or a target needs.

Every problem is collected as a record (:class:`kernel_deps.lock.freshness.Problem`), none is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kernel_deps.cache import store as cache
from kernel_deps.core.settings import BUILD_DIR, hash_threads
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.core.system import SystemInfo
from kernel_deps.core.targets import Target, serving_variant
from kernel_deps.core.variants import NoMatchingVariantError, select_variant
from kernel_deps.lock.freshness import Problem
from kernel_deps.lock.problem_text import FILE_TEXT
from kernel_deps.lock.model import LockedKernel, Lockfile

FILE_KINDS = frozenset(FILE_TEXT)  # a cached variant's files differ: a fresh download repairs them
# An installed kernel wheel (kernels to-wheel) differs from the lock: reinstalling it repairs it.
WHEEL_KINDS = frozenset({f"wheel-{kind}" for kind in FILE_TEXT} | {"wheel-record", "wheel-not-locked"})


def check_signed_cache(lock: Lockfile, checked: Sequence[cache.VariantCheck], policy: SignaturePolicy) -> list[Problem]:
    """Each cached variant that holds the locked bytes against its metadata.json digest and,
    when the lock records its signer, its bundle verified again offline; no network."""
    from kernel_deps.trust.signatures import check_cached_variant

    problems = []
    for check in (c for c in checked if c.ok):
        kernel = lock.get(check.repo_id)
        assert kernel is not None
        try:
            found = check_cached_variant(kernel, check.variant, check.path, check.files, policy)
        except OSError as exc:
            problems.append(Problem("unreadable", check.repo_id, check.variant, None, detail=str(exc.strerror or exc),
                                    during="signature-check"))  # fmt: skip
            continue
        for refused in found:
            kind = "digest-mismatch" if refused.kind == "digest" else "signature-invalid"
            path = refused.expected.partition(" = ")[0] if refused.kind == "digest" else None
            problems.append(Problem(kind, check.repo_id, check.variant, path, refused.expected, refused.found,
                                    detail=refused.describe()))  # fmt: skip
    return problems


# -- lock <-> cache ---------------------------------------------------------------------


def check_cache(lock: Lockfile, *, cache_root: Path | None = None) -> tuple[list[Problem], list[cache.VariantCheck]]:
    """Recompute every locked variant present in the cache; name each file that differs.

    Variants are checked at once (their files share the hashing threads, when they are large
    enough to pay for threads); the problems and results come in lock order, exactly as
    checking one variant after another gives.
    """
    problems, checked, _ = check_cache_tiers(lock, cache_root=cache_root)
    return problems, checked


def check_cache_tiers(
    lock: Lockfile, *, cache_root: Path | None = None, shared: bool = True
) -> tuple[list[Problem], list[cache.VariantCheck], dict[tuple[str, str], tuple[str, Path]]]:
    """:func:`check_cache`, and the cache tier each checked variant was found in, by (repo id,
    variant): ``("shared", folder)`` for a ``KERNELS_CACHE_SHARED`` folder, ``("writable",
    root)`` for the writable cache. Without ``shared``, the cache ``cache_root`` alone is
    checked (a folder ``--into`` built, which must hold every variant itself)."""
    hash_threads()  # a malformed KERNELS_HASH_THREADS is bad input, whatever is cached
    tasks = [(kernel, name, locked.hash) for kernel in lock.kernels for name, locked in kernel.variants.items()]
    # A variant a shared cache (KERNELS_CACHE_SHARED) holds intact counts as cached, as the loader uses it.
    outcomes = cache.check_in_tiers(
        [(kernel.repo_id, kernel.sha, name, expected) for kernel, name, expected in tasks], root=cache_root,
        shared=shared)  # fmt: skip
    by_variant = {(id(kernel), name): outcome for (kernel, name, _), (outcome, _) in zip(tasks, outcomes)}
    writable = cache_root or cache.cache_root()
    tiers = {(kernel.repo_id, name): ("writable" if root == writable else "shared", root)
             for (kernel, name, _), (_, root) in zip(tasks, outcomes)}  # fmt: skip

    problems: list[Problem] = []
    checked: list[cache.VariantCheck] = []
    for kernel in lock.kernels:
        for name in kernel.variants:
            result = by_variant[(id(kernel), name)]
            if isinstance(result, OSError):
                detail = str(result.strerror or result)
                problems.append(Problem("unreadable", kernel.repo_id, name, None, detail=detail))
                continue
            if not result.present:
                continue
            checked.append(result)
            for found in result.problems:
                path = None if found.kind == "hash-mismatch" else found.path
                problems.append(Problem(found.kind, kernel.repo_id, name, path, found.expected, found.got))
        problems += _unlocked_variants(kernel, cache_root)
    present = {(c.repo_id, c.variant) for c in checked}
    return problems, checked, {key: root for key, root in tiers.items() if key in present}


def check_wheels(lock: Lockfile) -> tuple[list[Problem], list[cache.VariantCheck]]:
    """Every installed kernel wheel of a locked kernel (``kernels to-wheel``), checked file by
    file against the lock as the loader checks it; one that holds no locked commit and variant
    is a problem too, since the loader passes it over."""
    from kernel_deps.cache.installed import check_installed, dist_info_names, installed_wheels

    problems: list[Problem] = []
    checked: list[cache.VariantCheck] = []
    on_path = dist_info_names()  # sys.path listed once for every kernel
    for kernel in lock.kernels:
        for wheel in installed_wheels(kernel.repo_id, on_path=on_path):
            if wheel.problem is not None:
                problems.append(Problem("wheel-record", kernel.repo_id, None, str(wheel.folder), wheel=wheel.label,
                                        detail=wheel.problem))  # fmt: skip
                continue
            if wheel.commit != kernel.sha or wheel.variant not in kernel.variants:
                problems.append(Problem("wheel-not-locked", kernel.repo_id, wheel.variant, str(wheel.folder), kernel.sha,
                                        wheel.commit, wheel=wheel.label))  # fmt: skip
                continue
            try:
                result = check_installed(wheel, kernel.variants[wheel.variant].hash)
            except OSError as exc:
                problems.append(Problem("unreadable", kernel.repo_id, wheel.variant, str(wheel.folder),
                                        detail=str(exc.strerror or exc), wheel=wheel.label))  # fmt: skip
                continue
            checked.append(result)
            for found in result.problems:
                problems.append(Problem(f"wheel-{found.kind}", kernel.repo_id, wheel.variant, found.path,
                                        found.expected, found.got, wheel=wheel.label))  # fmt: skip
    return problems, checked


def _unlocked_variants(kernel: LockedKernel, root: Path | None) -> list[Problem]:
    """Variant folders in the cache at the locked commit that the lock does not list."""
    repo = cache.find_repo_dir(kernel.repo_id, root)
    build = repo / "snapshots" / kernel.sha / BUILD_DIR if repo else None
    try:
        names = sorted(p.name for p in build.iterdir() if p.is_dir()) if build and build.is_dir() else []
    except OSError:
        return []  # an unreadable snapshot folder shows up as unreadable variants above
    return [
        Problem("unlocked-variant", kernel.repo_id, name, None, commit=kernel.sha, folder=str(build / name))
        for name in names if name not in kernel.variants
    ]  # fmt: skip


def check_this_machine(
    lock: Lockfile, present: set[tuple[str, str]], system: SystemInfo, cache_root: Path | None = None
) -> list[Problem]:
    """For each kernel, this machine's best locked variant must be among the ``present`` ones."""
    problems: list[Problem] = []
    for kernel in lock.kernels:
        try:
            name = select_variant(kernel.repo_id, kernel.variants, system)
        except NoMatchingVariantError:
            problems.append(Problem("no-variant", kernel.repo_id, None, None, variants=tuple(kernel.variants),
                                    machine=system.describe()))  # fmt: skip
            continue
        if (kernel.repo_id, name) not in present:
            folder = cache.variant_dir(cache.repo_dir(kernel.repo_id, root=cache_root), kernel.sha, name)
            problems.append(Problem("not-cached", kernel.repo_id, name, None, folder=str(folder)))
    return problems


def check_targets_cached(
    lock: Lockfile, present: set[tuple[str, str]], targets: Sequence[Target], cache_root: Path | None = None
) -> list[Problem]:
    """For each kernel and target, the locked build serving that target must be among the ``present`` ones."""
    problems: list[Problem] = []
    for target in targets:
        for kernel in lock.kernels:
            name = serving_variant(target, kernel.variants)
            if name is None:
                problems.append(Problem("no-variant", kernel.repo_id, None, None, target.name, None,
                                        variants=tuple(kernel.variants)))  # fmt: skip
            elif (kernel.repo_id, name) not in present:
                folder = cache.variant_dir(cache.repo_dir(kernel.repo_id, root=cache_root), kernel.sha, name)
                problems.append(Problem("target-not-cached", kernel.repo_id, name, None, target.name, None,
                                        folder=str(folder)))  # fmt: skip
    return problems
