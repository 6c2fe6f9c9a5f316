"""A resolution session: requirements -> a lock held in memory, every build hashed, judged and signed.

The one way ``kernels lock``, ``get_kernel`` and ``kernels to-wheel ORG/NAME@REVISION``
resolve (:func:`resolve_in_memory`): one time budget, one view of the Hub
(:class:`kernel_deps.hub.index.KernelIndex`), the resolver's pins
(:func:`kernel_deps.resolve.resolver.resolve`), the lock assembled from them
(:func:`build_lockfile`), publishers judged by the caller, signatures by the policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from kernel_deps.core.errors import UsageError
from kernel_deps.core.settings import KERNEL_STATUS_NAME, PYPROJECT_NAME
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.core.spec import KernelRequirement
from kernel_deps.core.targets import Target
from kernel_deps.lock.entries import LockedPin
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock
from kernel_deps.trust.signatures import candidate_refusal, sign_lock
from kernel_deps.resolve.notes import LockNote, resolution_notes
from kernel_deps.resolve.candidates import version_name
from kernel_deps.resolve.explain import PROJECT, Requester
from kernel_deps.resolve.resolver import KernelProvider, Resolution, resolve

if TYPE_CHECKING:  # imported when resolving: verify and outdated read locks without the Hub client
    from kernel_deps.hub.client import HubClient
    from kernel_deps.hub.index import KernelIndex
    from kernel_deps.trust.publishers import PublisherTrust


def resolve_in_memory(
    hub: HubClient,
    requirements: Sequence[KernelRequirement],
    *,
    publishers: Sequence[str] | None,
    judge: Callable[[Lockfile, KernelIndex], Lockfile],
    policy: SignaturePolicy | None,
    pins: Mapping[str, LockedPin] | None = None,
    targets: Sequence[Target] = (),
    requester: Requester = PROJECT,
    follow_redirects: bool = False,
    expect_signed: bool = False,
) -> tuple[Lockfile, list[LockNote]]:
    """A lock of ``requirements`` and their kernel dependencies, held in memory: the one way
    `kernels lock`, ``get_kernel`` and `kernels to-wheel ORG/NAME@REVISION` resolve.

    Pins are kept and targets served (:func:`resolve`); every variant is hashed; ``judge``
    (the lock, the index -> the lock with each entry's trust recorded, or an error raised
    for a kernel it refuses) decides publishers, the Hub being asked in the background
    about each organization ``publishers`` does not allow (None: about none); then, unless
    ``policy`` is None, each build's digest is checked and its signature verified under
    ``policy`` (:func:`sign_lock`). With ``follow_redirects``, a requirement whose repo
    redirects (``kernel-status.toml``) is locked at its destination. One time budget for
    all of it. Signatures are made ready to verify (sigstore imported) in the background
    from the start when ``policy`` requires them or ``expect_signed`` (a prior lock records
    signers), else once the first signed build is met. Also returns the notes `kernels
    lock` prints (redirects followed, kernels held back, folders skipped)."""
    from kernel_deps.hub.index import KernelIndex

    pins = dict(pins or {})
    prepare = _preparer(policy) if policy is not None else None
    # Pins hold: a redirect added upstream since the lock was made moves a pinned repo only
    # once --upgrade releases its pin.
    ahead = _verdicts_ahead(policy) if policy is not None else None
    with hub.operation(), KernelIndex(hub, held=pins, publishers=publishers, on_signed=prepare, on_bundle=ahead,
                                         early=not targets) as index:  # with targets, a pick waits for its listing
        if policy is not None and (policy.require or expect_signed):
            index.met_signed()  # while the first requests are under way
        signed = None
        if targets and policy is not None:
            signed = lambda repo_id, commit: candidate_refusal(index, policy, repo_id, commit)  # noqa: E731
        provider = KernelProvider(index, pins, targets, signed)
        followed = list(requirements)
        if follow_redirects:
            # Each kernel's likely pick is fetched while redirects are looked for, so its
            # files follow its own listing rather than wait for every kernel's.
            index.prefetch(requirements, provider.likely_pick, unless_redirected=True)
            followed = index.follow_redirects(requirements)
        redirected_from = _redirected_from(requirements, followed)
        resolution = resolve(followed, index, provider=provider, requester=requester)
        lock = build_lockfile(resolution, followed, index, pins=pins, redirected_from=redirected_from)
        lock = judge(lock, index)
        if policy is not None:
            lock = sign_lock(lock, policy, index)
        notes = [
            LockNote("redirect-followed", source, redirects=(source, *(hop.destination for hop in hops)))
            for source, hops in sorted(index.redirects_followed.items())
        ]
        notes += resolution_notes(resolution, lock, index)
    return lock, notes


def _preparer(policy: SignaturePolicy) -> Callable[[], None]:
    """What the index runs once it meets a signed variant: sigstore imported and the verifier
    built, in the worker process when the command allows one (:mod:`kernel_deps.trust.worker`), else here."""

    def prepare() -> None:
        from kernel_deps.trust import worker
        from kernel_deps.trust.bundles import prepare as prepare_verifier

        if not worker.start(policy.trusted_root):
            prepare_verifier(policy.trusted_root)

    return prepare


def _verdicts_ahead(policy: SignaturePolicy) -> Callable[[str, str, bytes, bytes], None]:
    """What the index runs with each signed build it reads: the bundle sent to the verifier
    process, if one runs, as :func:`kernel_deps.trust.signatures.sign_lock` will ask for it."""

    root: list[bytes | None] = []  # the trusted root's bytes, read once, when the first bundle is sent

    def ahead(repo_id: str, variant: str, metadata: bytes, bundle: bytes) -> None:
        from kernel_deps.trust import receipts, worker

        if worker.running():
            root[:] = root or [receipts.trusted_root_content(policy)]
            allowed = (policy.identities, policy.kernel_identities.get(repo_id, ()))
            worker.ahead(metadata, bundle, policy.trusted_root, allowed, root[0])

    return ahead


def hub_trusts(index: KernelIndex, org: str) -> PublisherTrust:
    """Whether the Hub trusts ``org`` as a kernel publisher, and what it said (for judge_publishers)."""
    return index.publisher(org)


def _redirected_from(requirements: Sequence[KernelRequirement], followed: Sequence[KernelRequirement]) -> dict[str, tuple[str, ...]]:
    """Destination -> the repo ids pyproject.toml names that redirect to it; UsageError when
    pyproject.toml also names the destination itself (two requirements for one entry)."""
    named = {req.repo_id for req in requirements}
    found: dict[str, list[str]] = {}
    for before, after in zip(requirements, followed):
        if before.repo_id == after.repo_id:
            continue
        if after.repo_id in named or after.repo_id in found:
            other = after.repo_id if after.repo_id in named else found[after.repo_id][0]
            raise UsageError(
                f"{before.repo_id} redirects to {after.repo_id} ({KERNEL_STATUS_NAME}), which "
                f"[tool.kernels.dependencies] also asks for as {other}",
                subject=PYPROJECT_NAME,
                hint=f"keep one entry, for {after.repo_id}",
            )
        found[after.repo_id] = [before.repo_id]
    return {destination: tuple(sources) for destination, sources in found.items()}


def build_lockfile(
    resolution: Resolution,
    requirements: Sequence[KernelRequirement],
    index: KernelIndex,
    *,
    pins: Mapping[str, LockedPin] | None = None,
    redirected_from: Mapping[str, tuple[str, ...]] | None = None,
) -> Lockfile:
    """Hash every variant of every resolved commit and assemble the lock entries; a kept
    pin keeps the tag or branch name it was locked under; each entry records what its
    kernel-depends require of each dependency (the union over its variants, as resolved);
    ``redirected_from`` names, per destination, the repos pyproject.toml asks for that
    redirect to it."""
    direct = {req.repo_id: req for req in requirements}
    pins = pins or {}
    entries = []
    for repo_id, candidate in sorted(resolution.pins.items()):
        tree = index.tree(repo_id, candidate.commit)
        variants = {variant: VariantLock(hash=tree.variant_hash(variant)) for variant in tree.files}
        requirement = direct.get(repo_id)
        pin = pins.get(repo_id)
        recorded = pin.version if pin is not None and pin.commit == candidate.commit else None
        dependencies = resolution.dependencies.get(repo_id, ())
        asks: dict[str, set[str]] = {dep: set() for dep in dependencies}
        for dep in index.dependencies(repo_id, candidate.commit):  # read while resolving: no request
            if dep.repo_id in asks:
                asks[dep.repo_id].add(dep.text)
        entries.append(
            LockedKernel(
                repo_id=repo_id,
                sha=candidate.commit,
                variants=variants,
                version=version_name(candidate, resolution.requirements.get(repo_id, ()), recorded),
                requirement=requirement.text if requirement else None,
                dependencies=dependencies,
                kernel_depends={dep: tuple(texts) for dep, texts in asks.items()},
                redirected_from=(redirected_from or {}).get(repo_id, ()),
            )
        )
    return Lockfile(kernels=tuple(entries))
