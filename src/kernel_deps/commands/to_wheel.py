"""`kernels to-wheel` as a library function: the locked variants as wheels, for a package index.

For every locked kernel (transitive ones included) and each chosen variant (this
machine's, the builds serving ``--target`` names, or every one), the variant is made
present and verified exactly as ``kernels download`` does (:func:`download_lock`); then
one wheel is written from the verified files only, each file read once and checked
against the hash the variant check found for it. The wheel's name, version, tags and
``.dist-info/kernel_deps.json`` follow :mod:`kernel_deps.core.wheels`; the same lock gives
the same bytes. ``requirements.txt`` pins every wheel written by version and SHA-256 and finds them in its
own folder (``--find-links .``, which pip reads relative to the file), for
``pip install --no-deps --no-index -r DIR/requirements.txt`` from anywhere, or with
``--index-url`` in place of ``--no-index`` once the wheels are on an index; with several targets,
``requirements-<target>.txt`` does so per target. ``pylock.toml`` (``pylock.<target>.toml``)
locks the same wheels by the same hashes as PEP 751 has it (:mod:`kernel_deps.core.pylock`),
for pip and uv.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.core import pylock, wheelfolder
from kernel_deps.core.errors import (
    DownloadVerificationError,
    FileWriteError,
    KernelCacheReadError,
    UntrustedPublisherError,
    UsageError,
)
from kernel_deps.core.records import Record
from kernel_deps.core.settings import LOCK_NAME, PYPROJECT_NAME
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.targets import Target, serving_variant, targets_from_options
from kernel_deps.core.wheels import WheelSpec, build_wheel, shared_names, wheel_spec
from kernel_deps.fetch.project import check_choice, variants_chooser
from kernel_deps.fetch.run import download_lock
from kernel_deps.fetch.tasks import DownloadReport, Progress, VariantTask
from kernel_deps.lock.model import LockedKernel, Lockfile

if TYPE_CHECKING:
    from kernel_deps.trust.signers import SignaturePolicy
    from kernel_deps.hub.client import HubClient
    from kernel_deps.hub.index import KernelIndex

SCHEMA_VERSION = 4  # of docs/schemas/to-wheel.schema.json; see docs/ci.md
REQUIREMENTS_NAME = wheelfolder.REQUIREMENTS_NAME
# How --all-variants reads beside the other choices of variants to-wheel offers (it has no --variant).
_EVERY_WHEEL, _OPTIONS = "writes a wheel of every variant", ("--target", "--all-targets")


class WrittenWheel(Record):
    """One wheel written: the locked variant it holds, its file and its SHA-256."""

    __slots__ = ("spec", "path", "sha256", "size")
    spec: WheelSpec
    path: Path
    sha256: str
    size: int

    def __init__(self, spec: WheelSpec, path: Path, sha256: str, size: int) -> None:
        self._init(spec, path, sha256, size)

    def to_json(self) -> dict:
        return {
            "repo_id": self.spec.repo_id,
            "commit": self.spec.commit,
            "variant": self.spec.variant,
            "hash": self.spec.variant_hash,
            "name": self.spec.distribution,
            "version": self.spec.version,
            "tag": self.spec.tag,
            "requires": list(self.spec.requires),
            "file": self.path.name,
            "sha256": self.sha256,
            "bytes": self.size,
        }


class RequirementsFile(Record):
    """A requirements (or pylock) file written: for this machine (``target`` None) or one target."""

    __slots__ = ("path", "target", "wheels")
    path: Path
    target: str | None
    wheels: tuple[str, ...]  # the wheel files it pins

    def __init__(self, path: Path, target: str | None, wheels: tuple[str, ...]) -> None:
        self._init(path, target, wheels)

    def to_json(self) -> dict:
        return {"file": self.path.name, "target": self.target, "wheels": list(self.wheels)}


class ToWheelReport(Record):
    """What a to-wheel run wrote: every wheel, and the requirements files pinning them."""

    __slots__ = ("output", "source", "wheels", "requirements", "pylocks", "download", "warnings")
    output: Path
    source: str  # the lock's path, or "ORG/NAME@REVISION" for a kernel outside any project
    wheels: tuple[WrittenWheel, ...]
    requirements: tuple[RequirementsFile, ...]
    pylocks: tuple[RequirementsFile, ...]  # pylock.toml, or pylock.<target>.toml: the same wheels
    download: DownloadReport
    warnings: tuple[str, ...]  # the lock used as it is though it no longer agrees with pyproject.toml

    def __init__(
        self, output: Path, source: str, wheels: tuple[WrittenWheel, ...] = (),
        requirements: tuple[RequirementsFile, ...] = (), pylocks: tuple[RequirementsFile, ...] = (),
        download: DownloadReport | None = None, warnings: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self._init(output, source, wheels, requirements, pylocks,
                   DownloadReport() if download is None else download, warnings)  # fmt: skip

    def to_json(self) -> dict:
        """The report as docs/schemas/to-wheel.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": not self.warnings,
            "source": self.source,
            "output": str(self.output),
            "downloaded": len(self.download.fetched),
            "wheels": [wheel.to_json() for wheel in self.wheels],
            "requirements": [requirements.to_json() for requirements in self.requirements],
            "pylock": [lock.to_json() for lock in self.pylocks],
            "warnings": list(self.warnings),
        }


def wheels_from_project(
    project_dir: Path,
    output: Path,
    *,
    all_variants: bool = False,
    targets: Sequence[str] = (),
    all_targets: bool = False,
    hub: HubClient | None = None,
    progress: Progress | None = None,
    wheel_url: str | None = None,
) -> ToWheelReport:
    """Wheels of what ``<project_dir>/kernels.lock`` pins, into ``output``: this machine's
    variant of each kernel unless told otherwise, as ``kernels download`` chooses them."""
    from kernel_deps.lock.freshness import judge_for_use, read_rules
    from kernel_deps.lock.read import read_lock

    check_choice(all_variants, (), targets, all_targets, does=_EVERY_WHEEL, options=_OPTIONS)
    lock_file = Path(project_dir) / LOCK_NAME
    rules = read_rules(Path(project_dir))  # once: its targets and what it asks of the lock
    found = read_lock(lock_file, purpose="use")
    # As download judges it, before anything is fetched or written.
    warning = judge_for_use(found, rules, str(lock_file), "refusing to write wheels")
    declared = rules.targets if rules is not None else ()
    chosen = targets_from_options(targets, all_targets, declared, Path(project_dir) / PYPROJECT_NAME)
    return write_wheels(found.lock, Path(output), source=str(lock_file), all_variants=all_variants, targets=chosen,
                        hub=hub, progress=progress, wheel_url=wheel_url,
                        policy=rules.policy if rules is not None else None,
                        warnings=(warning,) if warning else ())  # fmt: skip


def wheels_from_kernel(
    argument: str,
    output: Path,
    *,
    trusted: Sequence[str] = (),
    all_variants: bool = False,
    targets: Sequence[str] = (),
    hub: HubClient | None = None,
    progress: Progress | None = None,
    wheel_url: str | None = None,
) -> ToWheelReport:
    """Wheels of one kernel outside any project (``ORG/NAME@REVISION``, its kernel
    dependencies included), locked in memory as ``kernels lock`` would; each kernel must
    be from a publisher the Hub trusts or one of ``trusted`` (organizations or repo ids)."""
    from kernel_deps.core.spec import parse_add_argument, requirement_from_value

    repo_id, value = parse_add_argument(argument)
    if not isinstance(value, dict):
        raise UsageError(
            f"{argument}: name the revision to build wheels of, as ORG/NAME@REVISION (a tag, branch or commit), "
            "or pass a project folder that has a kernels.lock"
        )
    check_choice(all_variants, (), targets, False, does=_EVERY_WHEEL, options=_OPTIONS)
    chosen = targets_from_options(targets, False, (), "the command line")
    requirement = requirement_from_value(repo_id, value)
    wheelfolder.check_output(Path(output), wheelfolder.output_names(chosen, all_variants))
    pylock.check_wheel_url(wheel_url)
    lock = _lock_one(requirement, tuple(trusted), hub)
    return write_wheels(lock, Path(output), source=argument, all_variants=all_variants, targets=chosen,
                        hub=hub, progress=progress, wheel_url=wheel_url)  # fmt: skip


def write_wheels(
    lock: Lockfile,
    output: Path,
    *,
    source: str,
    all_variants: bool = False,
    targets: Sequence[Target] = (),
    system: SystemInfo | None = None,
    hub: HubClient | None = None,
    progress: Progress | None = None,
    policy: SignaturePolicy | None = None,
    wheel_url: str | None = None,
    warnings: tuple[str, ...] = (),
) -> ToWheelReport:
    """Download and verify the chosen variants of every kernel of ``lock`` as ``kernels download``
    does (:func:`download_lock`: digests, and each recorded signer under ``policy``'s trusted root,
    None: Sigstore's public-good root), then write their wheels, requirements files and pylock
    files into ``output`` (the wheels named there by path, or as published under ``wheel_url``);
    nothing is written when a variant is refused. ``warnings`` are the caller's, reported as they are."""
    wheelfolder.check_output(output, wheelfolder.output_names(targets, all_variants))  # before anything is fetched
    pylock.check_wheel_url(wheel_url)
    system = None if (all_variants or targets) else (system or detect_system())
    variants_for = variants_chooser(all_variants=all_variants, targets=targets, system=system)
    _refuse_shared_names(lock, variants_for)
    download = download_lock(lock, variants_for=variants_for, hub=hub, progress=progress, policy=policy)
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or exc
        raise FileWriteError(f"{output}: cannot create the folder ({reason}); pass another -o DIR") from None
    wheelfolder.check_output(output, wheelfolder.output_names(targets, all_variants))  # again: nothing changed it meanwhile
    versions = {kernel.repo_id: kernel.version for kernel in lock.kernels}
    prepared = [_prepare_wheel(outcome.task, versions, download.cache_root) for outcome in download.outcomes]
    for _, spec, _ in prepared:  # every wheel's place checked before the first is written
        wheelfolder.check_wheel_path(output, output / spec.filename)
    written: dict[tuple[str, str], WrittenWheel] = {}
    for task, spec, check in prepared:
        wheel = _write_wheel(task, spec, check, output)
        written[(wheel.spec.repo_id, wheel.spec.variant)] = wheel
    sets: list[tuple[str | None, list[WrittenWheel]]] = []
    if targets:
        for target in targets:
            serving = [written[(k.repo_id, serving_variant(target, k.variants) or "")] for k in lock.kernels]
            sets.append((target.name, serving))
    elif not all_variants:
        sets.append((None, [written[(k.repo_id, v)] for k in lock.kernels for v in variants_for(k)]))
    requirements, pylocks = [], []
    machines = {target.name: target.system for target in targets}
    signers = {(k.repo_id, variant): signer for k in lock.kernels for variant, signer in k.signatures.items()}
    for target, wheels in sets:
        name = REQUIREMENTS_NAME if len(sets) == 1 else f"requirements-{target}.txt"
        wheelfolder.write_output(output, name, requirements_text(wheels, target, name).encode("utf-8"))
        requirements.append(RequirementsFile(output / name, target, tuple(w.path.name for w in wheels)))
        name = pylock.pylock_name(target if len(sets) > 1 else None)
        text = pylock.kernel_pylock([(w.spec, w.sha256, w.size) for w in wheels], signers, name=name,
                                    first_line=wheelfolder.header_line(target), machine=machines.get(target, system),
                                    wheel_url=wheel_url)  # fmt: skip
        wheelfolder.write_output(output, name, text.encode("utf-8"))
        pylocks.append(RequirementsFile(output / name, target, tuple(w.path.name for w in wheels)))
    return ToWheelReport(output, source, tuple(written.values()), tuple(requirements), tuple(pylocks), download,
                         warnings)  # fmt: skip


def requirements_text(wheels: Sequence[WrittenWheel], target: str | None, name: str = REQUIREMENTS_NAME) -> str:
    """A pip requirements file pinning each wheel by version and SHA-256, sorted by name, the
    wheels found beside it: pip reads a relative ``--find-links`` from the file's folder."""
    lines = [
        wheelfolder.header_line(target),  # how a later run knows the file for its own
        f"# The wheels beside this file: pip install --no-deps --no-index -r {name}",
        f"# The same wheels on an index: pip install --no-deps --index-url URL -r {name}",
        "# (torch comes from your own index or image; each wheel is checked against its hash)",
        "--find-links .",
    ]
    for wheel in sorted(wheels, key=lambda w: w.spec.distribution):
        lines.append(f"{wheel.spec.distribution}=={wheel.spec.version} \\\n    --hash=sha256:{wheel.sha256}")
    return "\n".join(lines) + "\n"


def _prepare_wheel(
    task: VariantTask, versions: dict[str, str | None], root: Path | None
) -> tuple[VariantTask, WheelSpec, cache.VariantCheck]:
    """The wheel of one variant, as named and described, and the check of its cached files."""
    kernel = task.kernel
    expected = kernel.variants[task.variant].hash
    check = cache.check_variant(kernel.repo_id, kernel.sha, task.variant, expected, root=root)
    if not check.ok:
        raise DownloadVerificationError(
            f"{task.label}: the cached variant no longer matches kernels.lock ({check.path}); "
            "run 'kernels download' to repair the cache, then run this command again"
        )
    dependencies = {dep: versions.get(dep) for dep in kernel.dependencies}
    spec = wheel_spec(kernel.repo_id, kernel.sha, kernel.version, task.variant, expected, sorted(check.files),
                      dependencies)  # fmt: skip
    return task, spec, check


def _write_wheel(task: VariantTask, spec: WheelSpec, check: cache.VariantCheck, output: Path) -> WrittenWheel:
    """Build one wheel from the variant's verified files in the cache; each file is hashed
    again from the very bytes the wheel takes."""
    data: dict[str, bytes] = {}
    for rel, content_hash in sorted(check.files.items()):
        path = check.path.joinpath(*rel.split("/"))
        try:
            data[rel] = path.read_bytes()
        except OSError as exc:
            raise KernelCacheReadError(f"{task.label}: cannot read {path} ({exc.strerror or exc})") from None
        if cache.content_hash_of_bytes(data[rel], cache.hash_kind(content_hash)) != content_hash:
            raise DownloadVerificationError(
                f"{task.label}: {rel} changed in the cache while its wheel was written ({path}); "
                "run 'kernels download' to repair the cache, then run this command again"
            )
    archive = build_wheel(spec, data, dict(check.files))
    wheelfolder.write_output(output, spec.filename, archive)
    return WrittenWheel(spec, output / spec.filename, hashlib.sha256(archive).hexdigest(), len(archive))


def _refuse_shared_names(lock: Lockfile, variants_for: Callable[[LockedKernel], list[str]]) -> None:
    """UsageError, before a byte is fetched or written, when two of the wheels would share a
    file, distribution or package name (one would overwrite the other, on disk or in
    site-packages), naming both."""
    clashes = shared_names((k.repo_id, k.sha, k.version, v) for k in lock.kernels for v in variants_for(k))
    if clashes:
        more = f" (and {len(clashes) - 1} more)" if clashes[1:] else ""
        raise UsageError(f"no wheels written: {clashes[0]}{more}; choose the builds with --target")


def _lock_one(requirement, trusted: tuple[str, ...], hub: HubClient | None) -> Lockfile:
    """A lock of one requirement and its kernel dependencies, held in memory."""
    from kernel_deps.resolve.session import hub_trusts, resolve_in_memory
    from kernel_deps.trust.signers import SignaturePolicy
    from kernel_deps.hub.client import HubClient
    from kernel_deps.trust.publishers import judge_publishers, publisher_trust_text
    from kernel_deps.resolve.explain import Requester

    requester = Requester(
        "the command line",
        "pass another ORG/NAME@REVISION",
        "pass a revision that pins fewer kernels",
    )

    def judge(lock: Lockfile, index: KernelIndex) -> Lockfile:
        judged, untrusted = judge_publishers(lock, trusted, lambda org: hub_trusts(index, org))
        if untrusted:
            names = ", ".join(u.repo_id for u in untrusted)
            raise UntrustedPublisherError(
                f"no wheels written: {names} is not from a publisher the Hub trusts "
                f"({publisher_trust_text(untrusted[0].hub_answer)}); pass --trust ORG (or --trust ORG/NAME) if you "
                "trust it"
            )
        return judged

    # As kernels lock with no [tool.kernels.trust] policy: digests checked, each signed
    # build's signature verified under Sigstore's public-good root and its signer recorded.
    lock, _ = resolve_in_memory(hub or HubClient(), [requirement], publishers=trusted, judge=judge,
                                policy=SignaturePolicy(), requester=requester)  # fmt: skip
    return lock
