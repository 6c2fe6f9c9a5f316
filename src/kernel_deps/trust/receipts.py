"""Verification receipts: a bundle verified once on this machine, remembered under a secret of the user's.

A receipt says "kernel-deps verified exactly these inputs here and the bundle proved this
signer". Its inputs (:func:`inputs_of`) are everything that could change what verification
concludes: this format's version (:data:`FORMAT`, raised whenever kernel-deps changes what
it asks of a bundle), the installed sigstore's version (the name of its ``.dist-info``
folder, read without importing it), the kernel and build, the SHA-256 of the
``metadata.json`` bytes and of the bundle bytes, the SHA-256 of the trusted root's content
and the allowed identities as applied. Only a verified signer is kept; a
refusal never is.

What binds a receipt is a key of 32 random bytes in
``${XDG_STATE_HOME:-~/.local/state}/kernel-deps/receipt-key``: a receipt is the file
``receipts/<HMAC-SHA256(key, inputs)>`` holding the signer and an HMAC over the inputs and
that signer, honoured only when both hold. The folder, the key file and the receipts folder
are used only when they are this user's (owned by the effective uid, not links, no group or
other permission bits); anything else, a key that cannot be made or a folder that cannot be
written, means no receipts (every bundle verified in full), never an error. Nothing here
imports sigstore, cryptography or pydantic; receipts are written through
:func:`kernel_deps.core.ownedfs.write_file`.

Receipts do not pile up: a receipt honoured has its modification time moved to now (at most
once a day), and the first receipt a process keeps removes those not honoured for
:data:`UNUSED_DAYS` days (regular files named as receipts are, through
:func:`kernel_deps.core.ownedfs.remove`; anything else in the folder stays). A receipt removed
costs one full verification the next time its inputs come back, which keeps a receipt again.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import importlib.util
import json
import os
import re
import stat
import time
from pathlib import Path

from kernel_deps.core import jsondoc
from kernel_deps.core.boundedread import PROJECT_FILE_LIMIT, read_bounded
from kernel_deps.core.errors import KernelDepsError
from kernel_deps.trust.signers import Identity, SignaturePolicy, VariantSigner

FORMAT = 1  # raise it with any change to what verify_bundle / variant_signer ask of a bundle
FOLDER = "kernel-deps"
KEY_NAME = "receipt-key"
RECEIPTS = "receipts"
KEY_BYTES = 32
MAX_RECEIPT_BYTES = 64 << 10
UNUSED_DAYS = 90  # a receipt not honoured for this long is removed when another is kept
_DAY = 24 * 3600
_RECEIPT_NAME = re.compile(r"[0-9a-f]{64}")  # what _name makes: anything else in the folder is not a receipt
_looked_through = False  # whether this process has removed unused receipts (once is enough)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_NAME_TAG = b"kernel-deps receipt name\0"
_CONTENT_TAG = b"kernel-deps receipt content\0"


def state_folder() -> Path | None:
    """``$XDG_STATE_HOME/kernel-deps`` (a relative or empty XDG_STATE_HOME is ignored, as the
    XDG spec says), else ``~/.local/state/kernel-deps``; None without a home."""
    state = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        state = os.path.join(home, ".local", "state")
    return Path(state) / FOLDER


def trusted_root_content(policy: SignaturePolicy) -> bytes | None:
    """The bytes of the trusted root ``policy`` verifies under (the project's file, or the
    public-good root sigstore ships, found without importing it); None when it cannot be read
    (verification then reports why)."""
    from kernel_deps.trust.bundles import TrustedRootError, public_good_root

    try:
        return read_bounded(policy.trusted_root or public_good_root(), PROJECT_FILE_LIMIT)
    except (OSError, TrustedRootError):
        return None


def inputs_of(
    repo_id: str, variant: str, metadata: bytes, bundle: bytes, policy: SignaturePolicy, root: bytes
) -> bytes | None:
    """The canonical inputs of verifying one build's bundle under ``policy`` and the trusted
    root content ``root``; None when the installed sigstore's version cannot be told (no receipts)."""
    verifier = sigstore_version()
    if verifier is None:
        return None
    document = {
        "format": FORMAT, "sigstore": verifier, "repo_id": repo_id, "variant": variant,
        "metadata_sha256": hashlib.sha256(metadata).hexdigest(), "bundle_sha256": hashlib.sha256(bundle).hexdigest(),
        "trusted_root_sha256": hashlib.sha256(root).hexdigest(),
        "identities": [_identity(i) for i in policy.identities],
        "kernel_identities": [_identity(i) for i in policy.kernel_identities.get(repo_id, ())],
    }  # fmt: skip
    return _canonical(document)


@functools.cache
def sigstore_version() -> str | None:
    """The version of the sigstore that would verify, from its ``sigstore-<version>.dist-info``
    folder beside the package (no import, one listing of that folder, once per process: the
    sigstore a process imports is the one it keeps); None when not found."""
    spec = importlib.util.find_spec("sigstore")
    if spec is None or not spec.submodule_search_locations:
        return None
    parent = os.path.dirname(os.path.abspath(next(iter(spec.submodule_search_locations))))
    try:
        names = sorted(n for n in os.listdir(parent) if n.startswith("sigstore-") and n.endswith(".dist-info"))
    except OSError:
        return None
    return " ".join(n[len("sigstore-"):-len(".dist-info")] for n in names) or None


def recall(inputs: bytes) -> VariantSigner | None:
    """The signer a receipt for ``inputs`` records, when one is there and both its MACs hold under this user's key."""
    folder = state_folder()
    key = _key(folder, create=False) if folder is not None else None
    if key is None or not _private_folder(folder / RECEIPTS, create=False):
        return None
    path = folder / RECEIPTS / _name(key, inputs)
    data = _read_private(path, MAX_RECEIPT_BYTES, owned=False)
    if data is None:
        return None
    try:
        receipt = jsondoc.loads(data, no_duplicate_keys=True)
    except jsondoc.JSONDocumentError:
        return None
    if not isinstance(receipt, dict) or set(receipt) != {"format", "signer", "mac"} or receipt["format"] != FORMAT:
        return None
    signer, mac = receipt["signer"], receipt["mac"]
    if not isinstance(signer, dict) or not isinstance(mac, str):
        return None
    if not hmac.compare_digest(mac, _content_mac(key, inputs, signer)):
        return None
    try:
        held = VariantSigner.from_dict(signer)
    except ValueError:
        return None
    _mark_used(path)
    return held


def record(inputs: bytes, signer: VariantSigner) -> None:
    """Keep a receipt that ``inputs`` verified to ``signer``; nothing when receipts cannot be kept here."""
    folder = state_folder()
    key = _key(folder, create=True) if folder is not None else None
    if key is None or not _private_folder(folder / RECEIPTS, create=True):
        return
    from kernel_deps.core import ownedfs  # only a miss writes: a hit imports nothing it does not read with

    content = signer.to_dict()
    data = _canonical({"format": FORMAT, "signer": content, "mac": _content_mac(key, inputs, content)})
    try:
        ownedfs.write_file(folder.parent, folder / RECEIPTS / _name(key, inputs), data, mode=0o600)
    except (OSError, KernelDepsError):
        return  # a full disk or a folder swapped for a link: the next run verifies in full again
    _remove_unused(folder)


def _mark_used(path: Path) -> None:
    """Move the modification time of the receipt ``path`` (never through a link) to now when it
    is a day old or more: the age :func:`_remove_unused` judges by. Nothing where a link's own
    times cannot be set (then a receipt lives UNUSED_DAYS from when it was made, and is made again)."""
    if os.utime not in os.supports_follow_symlinks:
        return
    try:
        if os.lstat(path).st_mtime <= time.time() - _DAY:
            os.utime(path, follow_symlinks=False)
    except OSError:
        pass  # a read-only state folder: the receipt may be removed after UNUSED_DAYS, and made again


def _remove_unused(folder: Path) -> None:
    """Remove the receipts of ``folder`` not honoured for :data:`UNUSED_DAYS` days: regular
    files named as receipts, each removed as itself (a link, a folder or another name stays).
    Once per process: a lock keeping sixty receipts looks through the folder once."""
    global _looked_through
    if _looked_through:
        return
    _looked_through = True
    from kernel_deps.core import ownedfs

    receipts = folder / RECEIPTS
    unused_since = time.time() - UNUSED_DAYS * _DAY
    try:
        with os.scandir(receipts) as entries:
            old = [entry.name for entry in entries if _RECEIPT_NAME.fullmatch(entry.name)
                   and entry.is_file(follow_symlinks=False)
                   and entry.stat(follow_symlinks=False).st_mtime < unused_since]  # fmt: skip
    except OSError:
        return
    for name in old:
        try:
            ownedfs.remove(folder.parent, receipts / name)
        except (OSError, KernelDepsError):
            pass  # gone already (another process pruned it), or the folder swapped for a link


def _key(folder: Path, *, create: bool) -> bytes | None:
    """This user's receipt key, made (once, whoever races) when ``create``; None when the
    folder or the key is not this user's alone, or cannot be made."""
    if not _private_folder(folder, create=create):
        return None
    path = folder / KEY_NAME
    key = _read_private(path, KEY_BYTES, owned=True)
    if key is None and create and not os.path.lexists(path):
        from kernel_deps.core import ownedfs

        try:
            ownedfs.write_file(folder.parent, path, os.urandom(KEY_BYTES), mode=0o600, exclusive=True)
        except FileExistsError:
            pass  # another process made it first: its key is everyone's
        except (OSError, KernelDepsError):
            return None
        key = _read_private(path, KEY_BYTES, owned=True)
    return key if key is not None and len(key) == KEY_BYTES else None


def _private_folder(path: Path, *, create: bool) -> bool:
    """Whether ``path`` is a folder of this user's alone (made so when ``create`` and absent)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return False
        try:
            os.makedirs(path.parent, mode=0o700, exist_ok=True)
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
        try:
            info = os.lstat(path)
        except OSError:
            return False
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and _owned_alone(info)


def _read_private(path: Path, limit: int, *, owned: bool) -> bytes | None:
    """The bytes of the regular file ``path`` (never through a link, never waiting on a FIFO),
    at most ``limit``; with ``owned``, only when it is this user's alone. None otherwise."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit or (owned and not _owned_alone(info)):
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def _owned_alone(info: os.stat_result) -> bool:
    """Owned by this process's effective user, no group or other bits (no such test on Windows: no receipts)."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid is not None and info.st_uid == geteuid() and not info.st_mode & 0o077


def _name(key: bytes, inputs: bytes) -> str:
    return hmac.new(key, _NAME_TAG + inputs, hashlib.sha256).hexdigest()


def _content_mac(key: bytes, inputs: bytes, signer: dict) -> str:
    return hmac.new(key, _CONTENT_TAG + inputs + b"\0" + _canonical(signer), hashlib.sha256).hexdigest()


def _identity(identity: Identity) -> list[str]:
    return [identity.issuer, identity.repository, identity.workflow, identity.ref]


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")
