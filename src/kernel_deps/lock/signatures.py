"""Signatures and digests at lock time: each variant's ``metadata.json`` digest held against
the Hub's listing, its Sigstore bundle verified offline, its signer judged by the project's
policy and recorded in the lock (``signatures``), or the refusal naming each variant.

What the listing proves of a digest: the set of files (every covered file declared, none
declared missing) and, with ``sha256``, each LFS file's hash (the listing's LFS SHA-256);
a plain file's bytes are known only by their git blob SHA-1, so they are checked against
the digest by ``download`` and ``verify`` (:func:`digest_problems`), with every other file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from kernel_deps.core import digests, jsondoc
from kernel_deps.core.errors import DigestMismatchError, SignatureError, UsageError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import BUILD_DIR, LOCK_NAME, PYPROJECT_NAME
from kernel_deps.core.signers import SignaturePolicy, describe_signer
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantSigner

if TYPE_CHECKING:
    from kernel_deps.hub.view import KernelIndex
    from kernel_deps.lock.bundles import CertifiedSigner


class VariantRefusal(Record):
    """Why one variant of a locked kernel cannot be locked: ``kind`` and what was expected and found."""

    __slots__ = ("repo_id", "variant", "kind", "expected", "found")
    repo_id: str
    variant: str
    kind: str  # "invalid", "not-allowed", "unsigned", "digest"
    expected: str
    found: str

    def __init__(self, repo_id: str, variant: str, kind: str, expected: str, found: str) -> None:
        self._init(repo_id, variant, kind, expected, found)

    def describe(self) -> str:
        return f"{self.repo_id} build {self.variant}: expected {self.expected}; found {self.found}"


def variant_signer(
    repo_id: str, variant: str, metadata: bytes | None, bundle: bytes | None, policy: SignaturePolicy
) -> tuple[VariantSigner | None, VariantRefusal | None]:
    """The verified signer of one variant (None when it is unsigned and that is allowed), or why it is refused."""
    if bundle is None:
        if policy.require:
            where = f"[tool.kernels.trust] require-signatures = true in {PYPROJECT_NAME}"
            return None, VariantRefusal(repo_id, variant, "unsigned", f"a signed metadata.json ({where})",
                                        "no metadata.json.sigstore")  # fmt: skip
        return None, None
    if metadata is None:
        expected = "the metadata.json its bundle signs"
        return None, VariantRefusal(repo_id, variant, "invalid", expected, "no metadata.json")
    from kernel_deps.lock.bundles import BundleError, TrustedRootError, verify_bundle

    allowed = (policy.identities, policy.kernel_identities.get(repo_id, ()))
    try:
        certified = verify_bundle(metadata, bundle, policy.trusted_root, allowed)
    except TrustedRootError as exc:
        raise UsageError(f"{PYPROJECT_NAME}: [tool.kernels.trust] trusted-root: {exc}") from None
    except BundleError as exc:
        if not exc.not_allowed:
            root = policy.trusted_root or "Sigstore's public-good root"
            return None, VariantRefusal(repo_id, variant, "invalid", f"a valid signature under {root}",
                                        exc.reason)  # fmt: skip
        # Signed, by someone else: say who, by the facts of the certificate that failed the policy.
        certified = _unchecked_signer(metadata, bundle, policy)
        reason = policy.problem(repo_id, certified.issuer, certified.repository, certified.workflow, certified.ref)
        expected, _, found = (reason or exc.reason).partition("; found ")
        return None, VariantRefusal(repo_id, variant, "not-allowed", expected.removeprefix("expected "),
                                    f"a signature by {found or certified.identity} ({certified.identity})")  # fmt: skip
    signer = VariantSigner(
        issuer=certified.issuer, identity=certified.identity, repository=certified.repository,
        workflow=certified.workflow, ref=certified.ref, metadata_sha256=hashlib.sha256(metadata).hexdigest(),
    )  # fmt: skip
    return signer, None


def _unchecked_signer(metadata: bytes, bundle: bytes, policy: SignaturePolicy) -> CertifiedSigner:
    """Who signed a bundle whose signature is valid but whose signer the policy refused."""
    from kernel_deps.lock.bundles import verify_bundle

    return verify_bundle(metadata, bundle, policy.trusted_root)


def listing_digest_problems(
    repo_id: str, variant: str, metadata: Mapping[str, object], listed: Mapping[str, str | None]
) -> list[VariantRefusal]:
    """The digest of ``metadata`` against a listing (covered path -> its LFS SHA-256 hex, None for
    a plain file): files missing or undeclared, and LFS files whose hash differs."""
    try:
        digest = digests.parse_digest(metadata)
    except digests.InvalidDigest as exc:
        return [VariantRefusal(repo_id, variant, "digest", "a digest as kernel-builder writes it", str(exc))]
    if digest is None:
        return []
    known = {
        path: (digests.from_hex(lfs) if lfs is not None and digest.algorithm == "sha256" else None)
        for path, lfs in listed.items()
        if digests.is_covered(path)
    }
    return [_digest_refusal(repo_id, variant, m) for m in digests.compare(digest, known)]


def _digest_refusal(repo_id: str, variant: str, mismatch: digests.Mismatch) -> VariantRefusal:
    expected = f"{mismatch.path} = {mismatch.expected}"
    if not mismatch.expected:
        expected = f"no {mismatch.path} (not in the digest)"
    found = f"{mismatch.got}" if mismatch.got else "no such file"
    return VariantRefusal(repo_id, variant, "digest", expected, found)


def digest_problems(metadata_bytes: bytes, files: Mapping[str, bytes | Path]) -> list[digests.Mismatch]:
    """Every file of a variant (relative path -> its bytes or file) against the digest its
    ``metadata.json`` bytes declare; empty when there is none. ValueError when the digest is malformed."""
    try:
        parsed = jsondoc.loads(metadata_bytes)
    except jsondoc.JSONDocumentError as exc:
        raise ValueError(f"metadata.json cannot be read: {exc}") from None
    digest = digests.parse_digest(parsed) if isinstance(parsed, dict) else None
    if digest is None:
        return []
    found = {}
    for path, content in files.items():
        if digests.is_covered(path):
            data = content if isinstance(content, bytes) else Path(content).read_bytes()
            found[path] = digests.file_digest(digest.algorithm, data)
    return digests.compare(digest, found)


def sign_lock(lock: Lockfile, policy: SignaturePolicy, index: KernelIndex) -> Lockfile:
    """``lock`` with each signed variant's verified signer recorded, once every variant's digest
    holds against the listing; one SignatureError (or DigestMismatchError) naming every
    refused variant otherwise, and nothing written."""
    jobs = [(entry, variant) for entry in lock.kernels for variant in entry.variants]
    results = index.map_calls(lambda job: _judge_variant(job[0].repo_id, job[0].sha, job[1], policy, index), jobs)
    signers: dict[str, dict[str, VariantSigner]] = {}
    refused: list[VariantRefusal] = []
    for (entry, variant), (signer, problems) in zip(jobs, results):
        refused += problems
        if signer is not None:
            signers.setdefault(entry.repo_id, {})[variant] = signer
    if refused:
        raise refusal(refused)
    return Lockfile(kernels=tuple(replace(k, signatures=signers.get(k.repo_id, {})) for k in lock.kernels))


def candidate_refusal(index: KernelIndex, policy: SignaturePolicy, repo_id: str, commit: str) -> str | None:
    """Why the builds of ``repo_id`` at ``commit`` cannot be locked under ``policy`` (each
    variant's signature and digest), or None: what the resolver asks of a candidate."""
    variants = sorted(index.tree(repo_id, commit).files)
    for signer_and_problems in index.map_calls(lambda v: _judge_variant(repo_id, commit, v, policy, index), variants):
        if signer_and_problems[1]:
            return signer_and_problems[1][0].describe()
    return None


def _judge_variant(
    repo_id: str, commit: str, variant: str, policy: SignaturePolicy, index: KernelIndex
) -> tuple[VariantSigner | None, list[VariantRefusal]]:
    prefix = f"{BUILD_DIR}/{variant}/"
    files = {f.path[len(prefix):]: f for f in index.tree(repo_id, commit).files[variant]}
    meta_entry, bundle_entry = files.get(digests.METADATA_NAME), files.get(digests.BUNDLE_NAME)
    metadata = index.small_file(repo_id, commit, meta_entry) if meta_entry is not None else None
    bundle = index.small_file(repo_id, commit, bundle_entry) if bundle_entry is not None else None
    signer, refusal_ = variant_signer(repo_id, variant, metadata, bundle, policy)
    if refusal_ is not None:
        return None, [refusal_]
    problems: list[VariantRefusal] = []
    if meta_entry is not None:
        parsed = index.parsed_metadata(repo_id, commit, meta_entry)
        problems = listing_digest_problems(repo_id, variant, parsed, {p: f.lfs_sha256 for p, f in files.items()})
    return signer, problems


def refusal(refused: Sequence[VariantRefusal]) -> SignatureError | DigestMismatchError:
    """One line naming every refused variant, what was expected and what was found."""
    kind = DigestMismatchError if all(r.kind == "digest" for r in refused) else SignatureError
    one = len({(r.repo_id, r.variant) for r in refused}) == 1
    if kind is DigestMismatchError:
        what = "does not match its digest" if one else "do not match their digest"
    else:
        what = "is not signed as the project requires" if one else "are not signed as the project requires"
    parts = "; ".join(r.describe() for r in refused)
    hint = (
        "ask the kernel's owners to publish a build whose files match its metadata.json digest"
        if kind is DigestMismatchError
        else f"if you trust this signer, add it to [tool.kernels.trust] identities in {PYPROJECT_NAME}"
    )
    count = len({(r.repo_id, r.variant) for r in refused})
    return kind(f"{LOCK_NAME} not written: {count} build{'' if one else 's'} {what}: {parts}; {hint}")


def signer_line(signer: VariantSigner) -> str:
    """A recorded signer for text output."""
    return describe_signer(signer.issuer, signer.repository, signer.workflow, signer.ref)


def signer_json(signer: VariantSigner | None) -> dict | None:
    """A recorded signer for JSON output (tree, verify)."""
    return None if signer is None else signer.to_dict()


def check_cached_variant(
    kernel: LockedKernel, variant: str, folder: Path, paths: Iterable[str], policy: SignaturePolicy | None
) -> list[VariantRefusal]:
    """A cached variant (its files, already proven to be the locked bytes, under ``folder``)
    against the digest its ``metadata.json`` declares, and its bundle verified again, offline,
    under the policy's trusted root, to the signer the lock records (only given a ``policy``:
    the trusted root is the project's to name); every problem found."""
    paths = sorted(paths)
    meta_path = folder / digests.METADATA_NAME
    metadata = meta_path.read_bytes() if digests.METADATA_NAME in paths else None
    found: list[VariantRefusal] = []
    recorded = kernel.signatures.get(variant)
    if recorded is not None and policy is not None:
        bundle = (folder / digests.BUNDLE_NAME).read_bytes() if digests.BUNDLE_NAME in paths else None
        if bundle is None or metadata is None:
            missing = digests.BUNDLE_NAME if bundle is None else digests.METADATA_NAME
            return [VariantRefusal(kernel.repo_id, variant, "invalid", f"the signed build {LOCK_NAME} records",
                                   f"no {missing}")]  # fmt: skip
        signer, refused = variant_signer(kernel.repo_id, variant, metadata, bundle, policy)
        if refused is not None:
            found.append(refused)
        elif signer != recorded:
            found.append(VariantRefusal(kernel.repo_id, variant, "invalid", f"the signer {LOCK_NAME} records "
                                        f"({signer_line(recorded)})", f"a bundle signed by {signer_line(signer)}"))
    if metadata is not None:
        try:
            mismatches = digest_problems(metadata, {rel: folder / rel for rel in paths})
        except (ValueError, digests.InvalidDigest) as exc:
            return found + [VariantRefusal(kernel.repo_id, variant, "digest", "a digest as kernel-builder writes it",
                                           str(exc))]  # fmt: skip
        found += [_digest_refusal(kernel.repo_id, variant, m) for m in mismatches]
    return found
