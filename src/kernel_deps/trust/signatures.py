"""Signatures and digests at lock time: each variant's ``metadata.json`` digest held against
the Hub's listing, its Sigstore bundle verified offline, its signer judged by the project's
policy and recorded in the lock (``signatures``), or the refusal naming each variant.

What the listing proves of a digest: the set of files (every covered file declared, none
declared missing) and, with ``sha256``, each LFS file's hash (the listing's LFS SHA-256);
a plain file's bytes are known only by their git blob SHA-1, so they are checked against
the digest by ``download`` and ``verify`` (:func:`digest_problems`), with every other file.

After locking, :func:`check_cached_variant` holds a variant's files to their digest and
their bundle to the signer the lock records: ``download`` before it places what it fetched
(and for what it finds cached), ``verify``, and the loader on every first load. A refusal
is a record (:class:`VariantRefusal`); each caller renders it with its own outcome and the
place its policy is written (:func:`refusal`, :class:`PolicyPlace`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from kernel_deps.core import jsondoc
from kernel_deps.core.errors import DigestMismatchError, SignatureError, UsageError
from kernel_deps.core.hashing import is_hashed_path, sha256_hex
from kernel_deps.core.records import Record
from kernel_deps.core.settings import BUILD_DIR, LOCK_NAME, PYPROJECT_NAME
from kernel_deps.trust import digests
from kernel_deps.trust.signers import SignaturePolicy, VariantSigner, describe_signer

if TYPE_CHECKING:
    from kernel_deps.hub.index import KernelIndex
    from kernel_deps.lock.model import LockedKernel, Lockfile
    from kernel_deps.trust.bundles import CertifiedSigner


class PolicyPlace(Record):
    """Where the signature policy a judgement used is written, as messages name it: the
    project's ``[tool.kernels.trust]``, a ``get_kernel`` caller's ``signature_policy``, or
    nowhere (a lock with no pyproject.toml beside it: Sigstore's public-good root)."""

    __slots__ = ("identities", "require", "trusted_root", "where", "requirer")
    identities: str  # the list of allowed signers
    require: str  # the setting that makes every build need a signature
    trusted_root: str  # the setting naming the trusted root
    where: str  # appended to a setting in a hint: " in pyproject.toml"
    requirer: str  # who requires the signatures: "the project"

    def __init__(self, identities: str, require: str, trusted_root: str, where: str, requirer: str) -> None:
        self._init(identities, require, trusted_root, where, requirer)

    def allowed_list(self, rule: str | None, repo_id: str) -> str:
        """The list a refused signer is not on: the policy's identities, or the kernel's own."""
        return f"{repo_id}'s identities" if rule == "kernel-identities" else self.identities


PROJECT_POLICY = PolicyPlace(
    "[tool.kernels.trust] identities", "[tool.kernels.trust] require-signatures = true",
    "[tool.kernels.trust] trusted-root", f" in {PYPROJECT_NAME}", "the project",
)  # fmt: skip
CALLER_POLICY = PolicyPlace(
    "signature_policy's identities", "signature_policy's require=True", "signature_policy's trusted_root", "",
    "signature_policy",
)  # fmt: skip
NO_PROJECT_POLICY = PolicyPlace(
    "[tool.kernels.trust] identities", "[tool.kernels.trust] require-signatures = true",
    "[tool.kernels.trust] trusted-root", f" of a {PYPROJECT_NAME} beside {LOCK_NAME} (there is none)", LOCK_NAME,
)  # fmt: skip


class VariantRefusal(Record):
    """Why one variant of a locked kernel is refused: ``kind`` and what was expected and found.

    Kinds: ``"unsigned"`` (no bundle while signatures are required), ``"invalid"`` (a bundle
    that does not verify under the trusted root), ``"not-allowed"`` (signed by someone the
    policy's ``rule`` list, ``"identities"`` or ``"kernel-identities"``, does not name),
    ``"signer-mismatch"`` (not the signer the lock records), ``"digest"`` (``path`` does not
    match the metadata.json digest; no ``path``: the digest itself is malformed). The words
    naming where the policy is written come from the caller, as a :class:`PolicyPlace`."""

    __slots__ = ("repo_id", "variant", "kind", "expected", "found", "path", "rule")
    repo_id: str
    variant: str
    kind: str
    expected: str
    found: str
    path: str | None
    rule: str | None

    def __init__(self, repo_id: str, variant: str, kind: str, expected: str, found: str, path: str | None = None,
                 rule: str | None = None) -> None:  # fmt: skip
        self._init(repo_id, variant, kind, expected, found, path, rule)

    def describe(self, place: PolicyPlace = PROJECT_POLICY) -> str:
        expected = self.expected
        if self.kind == "unsigned":
            expected = f"{expected} ({place.require}{place.where})"
        elif self.kind == "not-allowed":
            expected = f"a signer of {place.allowed_list(self.rule, self.repo_id)}: {expected}"
        return f"{self.repo_id} build {self.variant}: expected {expected}; found {self.found}"

    def hint(self, place: PolicyPlace = PROJECT_POLICY) -> str:
        """What to do about this refusal, in the caller's words."""
        if self.kind == "digest":
            return "ask the kernel's owners to publish a build whose files match its metadata.json digest"
        if self.kind == "not-allowed":
            return f"if you trust this signer, add it to {place.allowed_list(self.rule, self.repo_id)}{place.where}"
        if self.kind == "unsigned":
            return f"choose a version whose builds are signed, or drop {place.require}{place.where}"
        if self.kind == "signer-mismatch":
            return (f"{LOCK_NAME} records a signer this build does not prove: restore {LOCK_NAME} from version "
                    f"control, or run 'kernels lock --upgrade-package {self.repo_id}' and review the signer it records")
        return (f"if the kernel is signed under a Sigstore of its own, name its trusted root in "
                f"{place.trusted_root}{place.where}; otherwise ask the kernel's owners to sign the build again")


def variant_signer(
    repo_id: str, variant: str, metadata: bytes | None, bundle: bytes | None, policy: SignaturePolicy
) -> tuple[VariantSigner | None, VariantRefusal | None]:
    """The verified signer of one variant (None when it is unsigned and that is allowed), or why it is refused."""
    if bundle is None:
        if policy.require:
            return None, VariantRefusal(repo_id, variant, "unsigned", "a signed metadata.json",
                                        "no metadata.json.sigstore")  # fmt: skip
        return None, None
    if metadata is None:
        expected = "the metadata.json its bundle signs"
        return None, VariantRefusal(repo_id, variant, "invalid", expected, "no metadata.json")
    from kernel_deps.trust import receipts

    # A receipt of this very verification (the same bytes, root, policy and verifier) stands
    # for it: no sigstore import. The root's bytes read here are the ones verified under.
    root = receipts.trusted_root_content(policy)
    inputs = receipts.inputs_of(repo_id, variant, metadata, bundle, policy, root) if root is not None else None
    held = receipts.recall(inputs) if inputs is not None else None
    if held is not None and held.metadata_sha256 == sha256_hex(metadata):
        return held, None
    from kernel_deps.trust.bundles import BundleError, TrustedRootError
    from kernel_deps.trust.worker import verify

    allowed = (policy.identities, policy.kernel_identities.get(repo_id, ()))
    try:
        certified = verify(metadata, bundle, policy.trusted_root, allowed, root)
    except TrustedRootError as exc:
        raise UsageError(f"[tool.kernels.trust] trusted-root: {exc}", subject=PYPROJECT_NAME) from None
    except BundleError as exc:
        if not exc.not_allowed:
            root = policy.trusted_root or "Sigstore's public-good root"
            return None, VariantRefusal(repo_id, variant, "invalid", f"a valid signature under {root}",
                                        exc.reason)  # fmt: skip
        # Signed, by someone else: say who, by the facts of the certificate that failed the policy.
        certified = _unchecked_signer(metadata, bundle, policy, root)
        facts = (certified.issuer, certified.repository, certified.workflow, certified.ref)
        rule, identities = policy.refused_by(repo_id, *facts) or ("identities", policy.identities)
        expected = " or ".join(i.describe() for i in identities) or exc.reason
        found = f"a signature by {describe_signer(*facts)} ({certified.identity})"
        return None, VariantRefusal(repo_id, variant, "not-allowed", expected, found, rule=rule)
    signer = VariantSigner(
        issuer=certified.issuer, identity=certified.identity, repository=certified.repository,
        workflow=certified.workflow, ref=certified.ref, metadata_sha256=sha256_hex(metadata),
    )  # fmt: skip
    if inputs is not None:
        receipts.record(inputs, signer)  # only a verified signer is ever kept
    return signer, None


def receipt_held(repo_id: str, variant: str, folder: Path, policy: SignaturePolicy) -> bool:
    """Whether the build cached in ``folder`` has a receipt under ``policy``, read before its
    files are proven: only to tell whether sigstore will be needed (the check after the proof
    reads the bytes again and decides)."""
    from kernel_deps.trust import receipts
    from kernel_deps.trust.bundles import MAX_BUNDLE_BYTES
    from kernel_deps.core.boundedread import read_bounded

    root = receipts.trusted_root_content(policy)
    try:
        metadata = read_bounded(folder / digests.METADATA_NAME, MAX_BUNDLE_BYTES)
        bundle = read_bounded(folder / digests.BUNDLE_NAME, MAX_BUNDLE_BYTES)
    except OSError:
        return False
    inputs = receipts.inputs_of(repo_id, variant, metadata, bundle, policy, root) if root is not None else None
    return inputs is not None and receipts.recall(inputs) is not None


def _unchecked_signer(metadata: bytes, bundle: bytes, policy: SignaturePolicy, root: bytes | None) -> CertifiedSigner:
    """Who signed a bundle whose signature is valid but whose signer the policy refused."""
    from kernel_deps.trust.worker import verify

    return verify(metadata, bundle, policy.trusted_root, root_content=root)


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
    return VariantRefusal(repo_id, variant, "digest", expected, found, path=mismatch.path)


def digest_problems(
    metadata_bytes: bytes, files: Mapping[str, bytes | Path], known: Mapping[str, str | None] | None = None,
    kept: Callable[[str], bool] | None = None,
) -> list[digests.Mismatch]:
    """Every file of a variant (relative path -> its bytes or file) against the digest its
    ``metadata.json`` bytes declare; empty when there is none. ``known`` gives a file's content
    hash already proven from its bytes (an LFS file's SHA-256 hex), which a SHA-256 digest
    takes without reading the file again; ``kept`` which paths ``files`` can hold at all
    (:func:`kernel_deps.trust.digests.compare`). ValueError when the digest is malformed."""
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
            proven = (known or {}).get(path)
            if digest.algorithm == "sha256" and proven is not None and len(proven) == 64:
                found[path] = digests.from_hex(proven)
                continue
            data = content if isinstance(content, bytes) else Path(content).read_bytes()
            found[path] = digests.file_digest(digest.algorithm, data)
    return digests.compare(digest, found, kept)


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
    from dataclasses import replace  # at lock time only

    return replace(lock, kernels=tuple(replace(k, signatures=signers.get(k.repo_id, {})) for k in lock.kernels))


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


def refusal(
    refused: Sequence[VariantRefusal], outcome: str = f"{LOCK_NAME} not written", place: PolicyPlace = PROJECT_POLICY
) -> SignatureError | DigestMismatchError:
    """One line naming every refused variant, what was expected and found, and what to do;
    ``outcome`` is the caller's own (what it did not do), ``place`` where its policy is written.
    The error carries the records as ``refused``."""
    digest_only = all(r.kind == "digest" for r in refused)
    kind = DigestMismatchError if digest_only else SignatureError
    count = len({(r.repo_id, r.variant) for r in refused})
    one = count == 1
    if digest_only:
        what = "does not match its digest" if one else "do not match their digest"
    elif all(r.kind == "signer-mismatch" for r in refused):
        what = f"{'is' if one else 'are'} not signed as {LOCK_NAME} records"
    else:
        what = f"{'is' if one else 'are'} not signed as {place.requirer} requires"
    parts = "; ".join(r.describe(place) for r in refused)
    hints = "; ".join(dict.fromkeys(r.hint(place) for r in refused))
    return kind(f"{outcome}: {count} build{'' if one else 's'} {what}: {parts}; {hints}", refused)


def signer_line(signer: VariantSigner) -> str:
    """A recorded signer for text output."""
    return describe_signer(signer.issuer, signer.repository, signer.workflow, signer.ref)


def signer_json(signer: VariantSigner | None) -> dict | None:
    """A recorded signer for JSON output (tree, verify)."""
    return None if signer is None else signer.to_dict()


def check_cached_variant(
    kernel: LockedKernel, variant: str, folder: Path, files: Mapping[str, str | None] | Iterable[str],
    policy: SignaturePolicy | None = None,
) -> list[VariantRefusal]:
    """A variant's files under ``folder`` (already proven to be the locked bytes; a mapping gives
    each file's proven content hash) against the digest its ``metadata.json`` declares and, when
    the lock records its signer, its bundle verified offline under ``policy`` (None: the default
    policy, Sigstore's public-good root) to exactly that signer; every problem found. What
    ``kernels download`` admits into the cache, ``verify`` reports and the loader imports."""
    policy = policy if policy is not None else SignaturePolicy()
    known: dict[str, str | None] = dict(files) if isinstance(files, Mapping) else dict.fromkeys(files)
    paths = sorted(known)
    metadata = (folder / digests.METADATA_NAME).read_bytes() if digests.METADATA_NAME in known else None
    found: list[VariantRefusal] = []
    recorded = kernel.signatures.get(variant)
    if recorded is not None:
        bundle = (folder / digests.BUNDLE_NAME).read_bytes() if digests.BUNDLE_NAME in known else None
        expected = f"the signer {LOCK_NAME} records ({signer_line(recorded)})"
        if bundle is None or metadata is None:
            missing = digests.BUNDLE_NAME if bundle is None else digests.METADATA_NAME
            return [VariantRefusal(kernel.repo_id, variant, "signer-mismatch", expected, f"no {missing}")]
        signer, refused = variant_signer(kernel.repo_id, variant, metadata, bundle, policy)
        if refused is not None:
            found.append(refused)
        elif signer != recorded:
            assert signer is not None
            found.append(VariantRefusal(kernel.repo_id, variant, "signer-mismatch", expected,
                                        f"a bundle signed by {_signed_by(signer, recorded)}"))  # fmt: skip
    if metadata is not None:
        try:
            # A file named ``.pyc`` is in the digest but not in the lock's hash: never cached nor imported.
            mismatches = digest_problems(metadata, {rel: folder / rel for rel in paths}, known, is_hashed_path)
        except (ValueError, digests.InvalidDigest) as exc:
            return found + [VariantRefusal(kernel.repo_id, variant, "digest", "a digest as kernel-builder writes it",
                                           str(exc))]  # fmt: skip
        found += [_digest_refusal(kernel.repo_id, variant, m) for m in mismatches]
    return found


def _signed_by(signer: VariantSigner, recorded: VariantSigner) -> str:
    """The signer a bundle proves, and what else differs from the lock's record."""
    line = signer_line(signer)
    if line == signer_line(recorded) and signer.metadata_sha256 != recorded.metadata_sha256:
        return f"{line}, over a metadata.json of SHA-256 {signer.metadata_sha256} ({LOCK_NAME}: {recorded.metadata_sha256})"
    if line == signer_line(recorded):
        return f"{line} (identity {signer.identity}; {LOCK_NAME}: {recorded.identity})"
    return line
