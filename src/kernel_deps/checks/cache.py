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
from kernel_deps.lock.model import LockedKernel, Lockfile

_FILE_MESSAGES = {
    "modified": "{path} was modified",
    "missing": "{path} is missing",
    "extra": "{path} was added; it is not part of the locked variant",
    "not-a-file": "{path} is not a regular file (a broken link or a link to a folder)",
    "outside-cache": "{path} links outside the cache (to {got}); the loader refuses it, run 'kernels download' to replace it",
    "hash-mismatch": "the cached files hash to a different value than kernels.lock records",
}
FILE_KINDS = frozenset(_FILE_MESSAGES)  # a cached variant's files differ: a fresh download repairs them
# An installed kernel wheel (kernels to-wheel) differs from the lock: reinstalling it repairs it.
WHEEL_KINDS = frozenset({f"wheel-{kind}" for kind in _FILE_MESSAGES} | {"wheel-record", "wheel-not-locked"})


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
            message = f"{check.repo_id} {check.variant}: cannot read the cached copy ({exc.strerror or exc})"
            problems.append(Problem("unreadable", check.repo_id, check.variant, None, message))
            continue
        for refused in found:
            kind = "digest-mismatch" if refused.kind == "digest" else "signature-invalid"
            path = refused.expected.partition(" = ")[0] if refused.kind == "digest" else None
            problems.append(Problem(kind, check.repo_id, check.variant, path, refused.describe(), refused.expected,
                                    refused.found))  # fmt: skip
    return problems


# -- lock <-> cache ---------------------------------------------------------------------


def check_cache(lock: Lockfile, *, cache_root: Path | None = None) -> tuple[list[Problem], list[cache.VariantCheck]]:
    """Recompute every locked variant present in the cache; name each file that differs.

    Variants are checked at once (their files share the hashing threads, when they are large
    enough to pay for threads); the problems and results come in lock order, exactly as
    checking one variant after another gives.
    """
    hash_threads()  # a malformed KERNELS_HASH_THREADS is bad input, whatever is cached
    tasks = [(kernel, name, locked.hash) for kernel in lock.kernels for name, locked in kernel.variants.items()]
    outcomes = cache.check_variants([(kernel.repo_id, kernel.sha, name, expected) for kernel, name, expected in tasks],
                                    root=cache_root)  # fmt: skip
    by_variant = {(id(kernel), name): outcome for (kernel, name, _), outcome in zip(tasks, outcomes)}

    problems: list[Problem] = []
    checked: list[cache.VariantCheck] = []
    for kernel in lock.kernels:
        for name in kernel.variants:
            where = f"{kernel.repo_id} {name}"
            result = by_variant[(id(kernel), name)]
            if isinstance(result, OSError):
                message = f"{where}: cannot read the cached copy ({result.strerror or result}); check its permissions"
                problems.append(Problem("unreadable", kernel.repo_id, name, None, message))
                continue
            if not result.present:
                continue
            checked.append(result)
            for found in result.problems:
                message = f"{where}: " + _FILE_MESSAGES[found.kind].format(path=found.path, got=found.got)
                path = None if found.kind == "hash-mismatch" else found.path
                problems.append(Problem(found.kind, kernel.repo_id, name, path, message, found.expected, found.got))
        problems += _unlocked_variants(kernel, cache_root)
    return problems, checked


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
                message = f"{kernel.repo_id}: {wheel.label}: kernel_deps.json {wheel.problem}; the loader skips it"
                problems.append(Problem("wheel-record", kernel.repo_id, None, str(wheel.folder), message))
                continue
            where = f"{kernel.repo_id} {wheel.variant}: {wheel.label}"
            if wheel.commit != kernel.sha or wheel.variant not in kernel.variants:
                message = (f"{where} holds commit {wheel.commit[:12]}, not a variant kernels.lock pins at "
                           f"{kernel.sha[:12]}; install the wheels 'kernels to-wheel' writes from this "
                           "lock")  # fmt: skip
                problems.append(Problem("wheel-not-locked", kernel.repo_id, wheel.variant, str(wheel.folder), message,
                                        kernel.sha, wheel.commit))  # fmt: skip
                continue
            try:
                result = check_installed(wheel, kernel.variants[wheel.variant].hash)
            except OSError as exc:
                message = f"{where}: cannot read it ({exc.strerror or exc}); check its permissions"
                problems.append(Problem("unreadable", kernel.repo_id, wheel.variant, str(wheel.folder), message))
                continue
            checked.append(result)
            for found in result.problems:
                text = _FILE_MESSAGES[found.kind].format(path=found.path, got=found.got)
                if found.kind == "hash-mismatch":
                    text = "its kernel_deps.json records files that hash to a different value than kernels.lock records"
                reinstall = "pip install --force-reinstall --require-hashes -r requirements.txt"
                message = f"{where}: {text}; reinstall it ({reinstall})"
                problems.append(Problem(f"wheel-{found.kind}", kernel.repo_id, wheel.variant, found.path, message,
                                        found.expected, found.got))  # fmt: skip
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
        Problem("unlocked-variant", kernel.repo_id, name, None,
                f"{kernel.repo_id} {name}: in the cache at the locked commit {kernel.sha[:12]}, but kernels.lock "
                f"does not list it; delete {build / name}")
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
            locked = ", ".join(kernel.variants) or "none"
            message = (f"{kernel.repo_id}: kernels.lock has no variant for this machine ({system.describe()}); "
                       f"locked: {locked}")  # fmt: skip
            problems.append(Problem("no-variant", kernel.repo_id, None, None, message))
            continue
        if (kernel.repo_id, name) not in present:
            folder = cache.variant_dir(cache.repo_dir(kernel.repo_id, root=cache_root), kernel.sha, name)
            message = f"{kernel.repo_id} {name}: this machine's variant is not in the cache ({folder})"
            problems.append(Problem("not-cached", kernel.repo_id, name, None, f"{message}; run 'kernels download'"))
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
                locked = ", ".join(kernel.variants) or "none"
                message = (f"{kernel.repo_id}: kernels.lock has no variant for the target {target.name}; "
                           f"locked: {locked}")  # fmt: skip
                problems.append(Problem("no-variant", kernel.repo_id, None, None, message, target.name, None))
            elif (kernel.repo_id, name) not in present:
                folder = cache.variant_dir(cache.repo_dir(kernel.repo_id, root=cache_root), kernel.sha, name)
                message = (f"{kernel.repo_id} {name}: the variant for the target {target.name} is not in the cache "
                           f"({folder}); run 'kernels download --target {target.name}'")  # fmt: skip
                problems.append(Problem("target-not-cached", kernel.repo_id, name, None, message, target.name, None))
    return problems
