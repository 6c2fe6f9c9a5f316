"""Kernel wheels as a PEP 751 lock file (``pylock.toml``): its packages, the text, its check, and a merge.

``kernels to-wheel`` writes, beside ``requirements.txt``, a ``pylock.toml`` naming the same
wheels by the same SHA-256 (docs/wheels.md). Each kernel wheel is one ``[[packages]]``
entry (:func:`kernel_package`), its keys in the order the specification lists them:

- ``name``, ``version``: the wheel's distribution name and version (:mod:`kernel_deps.core.wheels`);
- ``marker``: ``sys_platform`` and ``platform_machine`` of the build's os and arch, as
  Python spells them on that os (none for a noarch build): the wheel installs nowhere
  else, and in a lock that also holds other platforms' packages it is skipped there;
- ``requires-python``: from the wheel's Python tag (``cp39-abi3`` -> ``>=3.9``);
- ``wheels``: one, with its file ``name``, its ``path`` relative to the lock file (or its
  ``url``), ``size`` and ``hashes``;
- ``attestation-identities``: who signed the build's ``metadata.json``, as the lock records
  the signer (verified when locked), in the form of PyPI's publisher objects that the
  specification takes: ``kind = "GitHub"`` with ``repository``, ``workflow`` (the file
  name under ``.github/workflows/``) and ``ref``; another issuer's certificate as
  ``kind`` = its issuer, with ``identity``;
- ``[packages.tool.kernel-deps]``: ``repo-id``, ``commit``, ``variant``, ``variant-hash``.

:func:`pylock_text` writes the document (``lock-version = "1.0"``, ``created-by =
"kernel-deps"``, ``environments`` when the file is for one machine) in one fixed layout,
so the same wheels give the same bytes. :func:`parse_pylock` reads and checks one, with
``packaging.pylock`` when the installed packaging has it (26.x does). :func:`merge_pylock`
appends kernel packages to a lock another tool wrote, below a marker line, keeping every
byte above it. Pure: no file is read or written here. Imports ``core.errors``,
``core.variants``; ``core.wheels`` and ``core.system`` for typing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from kernel_deps.core.errors import UsageError
from kernel_deps.core.variants import parse_variant

if TYPE_CHECKING:
    from kernel_deps.core.system import SystemInfo
    from kernel_deps.core.wheels import WheelSpec

PYLOCK_NAME = "pylock.toml"
LOCK_VERSION = "1.0"
CREATED_BY = "kernel-deps"
TOOL = "kernel-deps"  # the key of [packages.tool.kernel-deps]
# The line above the packages kernels export --format pylock adds to another tool's lock:
# what is above it is theirs, kept byte for byte; what is below it, the next export replaces.
MERGE_MARKER = (
    "# Kernel wheels added by kernels export --format pylock (kernel-deps); "
    "the next export replaces everything below this line."
)
# The OIDC issuer of GitHub Actions, whose certificates name a Trusted Publisher of kind "GitHub".
_GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
_WORKFLOWS = ".github/workflows/"
# platform.machine() as Python reports it, per os, for each arch in variant spelling.
_MACHINES = {
    "linux": {"x86_64": "x86_64", "aarch64": "aarch64"},
    "darwin": {"x86_64": "x86_64", "aarch64": "arm64"},
    "windows": {"x86_64": "AMD64", "amd64": "AMD64", "aarch64": "ARM64"},
}
_SYS_PLATFORMS = {"linux": "linux", "darwin": "darwin", "windows": "win32"}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class PylockError(ValueError):
    """A pylock document that is not valid TOML, not a valid PEP 751 lock, or cannot be merged."""


class Signer(Protocol):
    """A build's recorded signer, as ``kernels.lock`` holds it (``lock.model.VariantSigner``)."""

    issuer: str
    identity: str
    repository: str | None
    workflow: str | None
    ref: str | None


def pylock_name(target: str | None) -> str:
    """``pylock.toml``, or ``pylock.<target>.toml`` (the specification's naming) for one of several targets."""
    return PYLOCK_NAME if target is None else f"pylock.{target}.toml"


def environment_marker(arch: str | None, os: str | None) -> str | None:
    """The marker of a machine: ``sys_platform == 'linux' and platform_machine == 'x86_64'``;
    only ``sys_platform`` for an arch whose Python spelling is not known; None without an os."""
    platform = _SYS_PLATFORMS.get(os or "")
    if platform is None:
        return None
    machine = _MACHINES[os or ""].get(arch or "")
    marker = f"sys_platform == '{platform}'"
    return f"{marker} and platform_machine == '{machine}'" if machine else marker


def variant_marker(variant: str) -> str | None:
    """The marker of the machines a build runs on (None for a noarch build)."""
    parsed = parse_variant(variant)
    if parsed is None or parsed.noarch:
        return None
    return environment_marker(parsed.arch, parsed.os)


def requires_python(python_tag: str, abi_tag: str) -> str:
    """What a wheel's Python tag asks: ``cp39``+``abi3`` -> ``>=3.9``, ``cp312`` -> ``==3.12.*``, ``py3`` -> ``>=3``."""
    match = re.fullmatch(r"cp3(\d+)", python_tag)
    if match is None:
        return ">=3"
    return f">=3.{match[1]}" if abi_tag == "abi3" else f"==3.{match[1]}.*"


def attestation_identity(signer: Signer) -> dict[str, str]:
    """The signer as a ``[[packages.attestation-identities]]`` table (see the module's rules)."""
    if signer.issuer == _GITHUB_ISSUER and signer.repository and signer.workflow and signer.ref:
        workflow = signer.workflow
        if workflow.startswith(_WORKFLOWS) and "/" not in workflow[len(_WORKFLOWS):]:
            workflow = workflow[len(_WORKFLOWS):]  # PyPI's publisher names the workflow by its file name
        return {"kind": "GitHub", "repository": signer.repository, "workflow": workflow, "ref": signer.ref}
    return {"kind": signer.issuer, "identity": signer.identity}


def check_wheel_url(base: str | None) -> None:
    """UsageError unless ``base`` (``--wheel-url``) is None or an http(s):// or file:// URL."""
    if base is not None and not base.startswith(("https://", "http://", "file://")):
        raise UsageError(
            "expected the http(s):// or file:// URL the wheels are published under",
            subject=f"--wheel-url {base}",
        )


def _wheel_url(base: str, filename: str) -> str:
    """Where a wheel published under ``base`` is: ``base/<file name, percent-encoded>``."""
    return base.rstrip("/") + "/" + quote(filename, safe="")


def kernel_package(spec: WheelSpec, sha256: str, size: int, *, path: str | None = None, url: str | None = None,
                   signer: Signer | None = None) -> dict[str, Any]:  # fmt: skip
    """One kernel wheel's ``[[packages]]`` table: at ``path`` (relative to the lock file, ``/``
    separated) or ``url``, signed by ``signer`` (None: the lock records no signer)."""
    if (path is None) == (url is None):
        raise ValueError("a kernel wheel is named by a path or by a url, one of them")
    wheel: dict[str, Any] = {"name": spec.filename}
    wheel |= {"path": path} if path is not None else {"url": url}
    wheel |= {"size": size, "hashes": {"sha256": sha256}}
    package: dict[str, Any] = {"name": spec.distribution, "version": spec.version}
    marker = variant_marker(spec.variant)
    if marker is not None:
        package["marker"] = marker
    package["requires-python"] = requires_python(spec.python_tag, spec.abi_tag)
    package["wheels"] = [wheel]
    if signer is not None:
        package["attestation-identities"] = [attestation_identity(signer)]
    package["tool"] = {TOOL: {"repo-id": spec.repo_id, "commit": spec.commit, "variant": spec.variant,
                              "variant-hash": spec.variant_hash}}  # fmt: skip
    return package


def kernel_pylock(wheels: Sequence[tuple[WheelSpec, str, int]], signers: Mapping[tuple[str, str], Signer], *,
                  name: str, first_line: str, machine: SystemInfo | None = None,
                  wheel_url: str | None = None) -> str:  # fmt: skip
    """The ``pylock.toml`` (named ``name``) of kernel wheels (spec, SHA-256, size), each named by
    its path beside the file, or as published under ``wheel_url``; attested by its build's
    signer in ``signers`` (repo id, variant -> signer); for ``machine``'s platform when given.
    Checked as :func:`parse_pylock` checks a lock, so a file that fails is never written."""
    packages = []
    for spec, sha256, size in wheels:
        where = {"url": _wheel_url(wheel_url, spec.filename)} if wheel_url else {"path": spec.filename}
        packages.append(kernel_package(spec, sha256, size, signer=signers.get((spec.repo_id, spec.variant)), **where))
    header = [first_line, f"# pip install --no-deps -r {name}, or uv pip install -r {name} "
                          "(torch comes from your own index or image)"]  # fmt: skip
    environment = environment_marker(machine.arch, machine.os) if machine is not None else None
    text = pylock_text(packages, header=header, environment=environment)
    parse_pylock(text)
    return text


def pylock_text(packages: Sequence[Mapping[str, Any]], *, header: Sequence[str] = (),
                environment: str | None = None) -> str:  # fmt: skip
    """The whole document: ``header`` (comment lines, each starting with ``#``), the top-level
    keys (``environments`` = [``environment``] when given), then each package sorted by name."""
    lines = list(header)
    lines.append(f"lock-version = {_value(LOCK_VERSION)}")
    if environment is not None:
        lines.append(f"environments = {_value([environment])}")
    lines.append(f"created-by = {_value(CREATED_BY)}")
    return "\n".join(lines) + "\n" + packages_text(packages)


def packages_text(packages: Sequence[Mapping[str, Any]]) -> str:
    """``[[packages]]`` entries as :func:`pylock_text` writes them, each starting with a blank line."""
    chunks = []
    for package in sorted(packages, key=lambda p: (p["name"], p.get("version", ""))):
        plain = {k: v for k, v in package.items() if k != "tool"}
        lines = ["", "[[packages]]", *(f"{_key(k)} = {_value(v)}" for k, v in plain.items())]
        for tool, table in (package.get("tool") or {}).items():
            lines += ["", f"[packages.tool.{_key(tool)}]", *(f"{_key(k)} = {_value(v)}" for k, v in table.items())]
        chunks.append("\n".join(lines) + "\n")
    return "".join(chunks)


def parse_pylock(text: str) -> dict[str, Any]:
    """``text`` parsed and checked as a PEP 751 lock; PylockError saying what is wrong, and where.

    The check is ``packaging.pylock``'s, where the installed packaging has it (26.x does);
    without it, the TOML and ``lock-version`` alone."""
    doc = _toml(text)
    check_pylock(doc)
    return doc


def check_pylock(doc: Mapping[str, Any]) -> None:
    """PylockError when ``doc`` (parsed TOML) is not a valid PEP 751 lock (see :func:`parse_pylock`)."""
    try:
        from packaging.pylock import Pylock, PylockValidationError
    except ImportError:  # packaging < 25.1: no model of PEP 751 to hold it to
        if doc.get("lock-version") != LOCK_VERSION:
            raise PylockError(f"lock-version is {doc.get('lock-version')!r}, not {LOCK_VERSION!r}") from None
        return
    try:
        Pylock.from_dict(doc)
    except PylockValidationError as exc:
        raise PylockError(str(exc)) from None


def merge_pylock(theirs: str, packages: Sequence[Mapping[str, Any]]) -> str:
    """``theirs`` (a ``pylock.toml`` another tool wrote) with ``packages`` added below
    :data:`MERGE_MARKER`, in place of what an earlier merge added there; every byte above the
    marker kept. PylockError when ``theirs`` is not a valid lock, already has a package of
    one of the names added, or cannot be extended (its ``packages`` an inline array)."""
    at = _marker_at(theirs)
    base = theirs if at is None else theirs[:at]
    try:
        before = _toml(base)
        check_pylock({**before, "packages": before.get("packages", [])})  # none yet: what export alone writes
    except PylockError as exc:
        raise PylockError(f"{exc} (above the kernel wheels an earlier export added)" if at is not None else str(exc)) \
            from None  # fmt: skip
    if at is not None:
        _check_added_by_us(parse_pylock(theirs), len(before.get("packages", [])))
    theirs_names = {p.get("name") for p in before.get("packages", [])}
    clashes = sorted({p["name"] for p in packages} & theirs_names)
    if clashes:
        raise PylockError(f"it already has a package {clashes[0]!r}, which a kernel wheel would install a second "
                          "time (pip and uv refuse a lock that selects two)")  # fmt: skip
    merged = base + ("" if not base or base.endswith("\n") else "\n") + "\n" + MERGE_MARKER + "\n"
    merged += packages_text(packages)
    try:
        after = parse_pylock(merged)
    except PylockError as exc:
        raise PylockError(f"kernel packages cannot be added to it ({exc}); is its packages an inline array "
                          "rather than [[packages]] tables?") from None  # fmt: skip
    kept = len(before.get("packages", []))
    if {k: v for k, v in after.items() if k != "packages"} != {k: v for k, v in before.items() if k != "packages"} \
            or after["packages"][:kept] != before.get("packages", []):  # fmt: skip
        raise PylockError("adding kernel packages at its end would change its own entries")
    return merged


def _check_added_by_us(doc: Mapping[str, Any], kept: int) -> None:
    for position, package in enumerate(doc.get("packages", [])[kept:], start=kept):
        if not isinstance(package.get("tool"), Mapping) or TOOL not in package["tool"]:
            raise PylockError(f"packages[{position}] ({package.get('name')!r}) is below the line kernel-deps "
                              "replaces but is not a kernel wheel; move it above that line")  # fmt: skip


def _marker_at(text: str) -> int | None:
    """Where what a merge added starts in ``text`` (the blank line above the marker line), or None."""
    if text.startswith("\n" + MERGE_MARKER + "\n"):
        return 0
    found = text.find("\n\n" + MERGE_MARKER + "\n")
    return None if found < 0 else found + 1


def _toml(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomlkit
        from tomlkit.exceptions import TOMLKitError

        try:
            return tomlkit.parse(text).unwrap()
        except TOMLKitError as exc:
            raise PylockError(f"not valid TOML ({exc})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PylockError(f"not valid TOML ({exc})") from None


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _value(value: Any) -> str:
    """A TOML value on one line: strings, integers, arrays and inline tables (``{ k = v }``)."""
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML value for {value!r}")


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes (which TOML shares), and DEL escaped, which JSON leaves."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
