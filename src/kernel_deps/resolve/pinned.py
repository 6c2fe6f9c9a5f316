"""A Hugging Face ``kernels`` 0.17 lock used as it is: each pinned build hashed from the Hub's listing, in memory.

kernels 0.17 writes commits and no variant hashes (:mod:`kernel_deps.lock.formats`). To
fetch from such a lock without converting it, :func:`lock_of_pins` builds, in memory and
at exactly its commits, the lock ``kernels lock`` would convert it to: each variant's hash
from the Hub's listing at its commit (what a download then proves every file against,
as for any lock), each kernel's dependencies from its ``metadata.json`` ``kernel-depends``,
and each build's digest held and its bundle verified under the
project's policy (the default one without a project: :func:`kernel_deps.trust.signatures.sign_lock`),
as at lock time, and each kernel's publisher judged as ``kernels lock`` judges it
(allowed by the project's ``[tool.kernels.trust] publishers``, else trusted by the Hub;
:func:`kernel_deps.trust.publishers.judge_publishers`), its ``trusted_by`` recorded. Nothing
is resolved: a kernel the file pins at two commits, or a dependency it does not pin, is a
LockfileError saying to convert it. Nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernel_deps.core.errors import LockfileError
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock

if TYPE_CHECKING:
    from kernel_deps.hub.client import HubClient
    from kernel_deps.lock.read import LockRead
    from kernel_deps.trust.signers import SignaturePolicy

__all__ = ["lock_of_pins", "pins_only_note"]

_CONVERT = "run 'kernels lock' to convert it (its pins are kept)"


def pins_only_note(found: LockRead) -> str:
    """The one line a command says when it uses a kernels 0.17 lock as it is."""
    return (
        f"{found.source} was written by {found.written_by}: it pins commits but no variant hashes, so each build "
        f"is checked against the Hub's listing at its commit, its metadata.json digest and its signature where it "
        f"has one; {_CONVERT}"
    )


def lock_of_pins(
    found: LockRead, hub: HubClient, policy: SignaturePolicy | None, publishers: Sequence[str] = (),
    doing: str = "refusing to download",
) -> Lockfile:
    """The lock of ``found``'s pins (a kernels 0.17 lock), every build hashed from the Hub's listing
    at its commit; ``publishers`` the project's allowed ones (none: the Hub must trust each), and
    ``doing`` what the caller refuses to do, for an UntrustedPublisherError's start."""
    from kernel_deps.hub.index import KernelIndex
    from kernel_deps.trust.publishers import judge_publishers, refusal
    from kernel_deps.trust.signatures import sign_lock
    from kernel_deps.trust.signers import SignaturePolicy

    named = sorted({entry["dependency"]["repo-id"] for entry in json.loads(found.text)})
    twice = [repo_id for repo_id in named if repo_id not in found.pins]
    if twice:
        raise LockfileError(
            f"{found.source}: pins {', '.join(twice)} at more than one commit (kernels 0.17 lock), so no one build "
            f"can be fetched for it; {_CONVERT}"
        )
    # The Hub is asked, in the background, about each publisher the project does not allow.
    with hub.operation(), KernelIndex(hub, held=found.pins, publishers=tuple(publishers)) as index:
        entries = []
        for repo_id in named:
            pin = found.pins[repo_id]
            tree = index.tree(repo_id, pin.commit)
            asks: dict[str, set[str]] = {}
            for dep in index.dependencies(repo_id, pin.commit):
                if dep.repo_id not in found.pins:
                    raise LockfileError(
                        f"{found.source}: {repo_id} at {pin.commit[:12]} depends on {dep.repo_id}, which the lock "
                        f"does not pin (kernels 0.17 lock); {_CONVERT}"
                    )
                asks.setdefault(dep.repo_id, set()).add(dep.text)
            entries.append(
                LockedKernel(
                    repo_id=repo_id,
                    sha=pin.commit,
                    variants={variant: VariantLock(hash=tree.variant_hash(variant)) for variant in tree.files},
                    version=pin.version,
                    dependencies=tuple(sorted(asks)),
                    kernel_depends={dep: tuple(sorted(texts)) for dep, texts in sorted(asks.items())},
                )
            )
        # As `kernels lock` would convert it: its publishers judged, then its builds' digests and signatures.
        lock, untrusted = judge_publishers(Lockfile(kernels=tuple(entries)), publishers, index.publisher)
        if untrusted:
            raise refusal(untrusted, outcome=f"{doing} from {found.source} (a kernels 0.17 lock)")
        # No policy (a lock copied alone): the default one, as the download that follows holds it to.
        return sign_lock(lock, policy or SignaturePolicy(), index)
