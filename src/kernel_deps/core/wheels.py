"""Kernel wheels: one locked build variant as a wheel (its name, version and tags), and the archive.

The rules (docs/wheels.md says why):

- distribution name: the repo id's words in lower case joined by ``-``, and a last word
  that says where the organization ends and, when needed, which letters were capitals and
  which separators were not a single ``-`` (``kernels-community/activation`` ->
  ``kernels-community-activation-o2``, ``org/a_b`` -> ``org-a-b-o1x28``); no two repo ids
  get one name, even after PEP 503 normalization (docs/wheels.md proves it). The import
  name is the same with ``_`` (``kernels_community_activation_o2``; ``_`` first when it
  would start with a digit), so no two kernels share a folder in ``site-packages``;
- version: the locked tag's version (``v1.2.0`` -> ``1.2.0``); a ``vN`` branch gives ``N``
  and any other pin ``0``, both with ``g<commit>`` in the local label, since the public
  version does not tell their commits apart;
- local version label: the variant without its arch and os (``torch213-cxx11-cu128-x86_64-linux``
  -> ``+torch213.cxx11.cu128``; ``torch-cuda`` -> ``+cuda``; none for ``torch-universal``):
  wheel tags cannot tell two CUDA versions (or torch versions, or C++ ABIs) apart, so the
  label does, as PyTorch's own index does with ``+cu128``;
- platform tag: linux -> ``manylinux_2_28_<arch>`` (PyTorch's own Linux wheels' tag since
  2.6), darwin -> ``macosx_11_0_arm64`` (``macosx_26_0_arm64`` for Metal builds, which need
  macOS 26), windows -> ``win_amd64``, noarch -> ``any``;
- Python tag: ``cp39-abi3`` when the variant's shared objects are built for Python's stable
  ABI (``*.abi3.so``), ``cp3XY-cp3XY`` for a ``*.cpython-3XY-*`` one, else ``py3-none``;
- ``Requires-Dist``: torch as the variant needs it (``torch==2.13.*`` for an exact build,
  ``torch>=2.9`` for a stable-ABI 2.9 build, ``torch`` for noarch ones), and each locked
  kernel dependency at its locked public version (any backend's wheel of it).

:func:`build_wheel` writes the archive reproducibly: entries sorted (``RECORD`` last, CSV
written by the csv module), every time stamp 1980-01-01, permissions 0o644 (0o755 for
shared objects), so the same lock gives the same bytes. :func:`shared_names` tells which
wheels of one run would share a name. Pure: the caller gives the files' bytes and writes the result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence

from kernel_deps.core.records import Record
from kernel_deps.core.spec import validate_repo_id
from kernel_deps.core.variants import Variant, parse_variant
from kernel_deps.core.versions import locked_ref, parse_version_ref

# The file in a kernel wheel's .dist-info that names what it holds (read by the loader).
KERNEL_RECORD_NAME = "kernel_deps.json"
KERNEL_RECORD_SCHEMA = 1
MANYLINUX = "manylinux_2_28"
_STABLE_ABI_PYTHON = "cp39"  # kernel-builder compiles against Python's limited API of 3.9
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
# Compiled (by re's cache) when a wheel is built: verify imports this module for the names only.
_CPYTHON_SO = r"\.cpython-3(\d+)[-.]"
_SHARED_OBJECT = r"\.(so|pyd|dylib)(\.[0-9.]+)?$"
_DARWIN_ARCHS = {"aarch64": "arm64", "x86_64": "x86_64"}
_WINDOWS_ARCHS = {"x86_64": "amd64", "aarch64": "arm64"}


# The name of a repo's kernel wheels (docs/wheels.md, "One name per repo", proves it one-to-one):
# the repo id's words (its runs of letters and digits) in lower case, joined by "-", then one
# last word, the tag: "o<N>", the organization being the first N words, and, when the repo id
# has capitals or separators other than a single "-", "x<base 36>" of the bits that tell them.
_WORD = r"[A-Za-z0-9]+"
_SEPARATOR_CODES = {"-": 1, "_": 2, ".": 3}  # 2 bits each; 0 ends a separator


def distribution_name(repo_id: str) -> str:
    """The PEP 503 name of a repo's kernel wheels, one per valid repo id and no other repo's:
    ``kernels-community/activation`` -> ``kernels-community-activation-o2`` (the organization
    is the first two words); ``org/a_b`` -> ``org-a-b-o1x28`` (the ``_`` and the case of
    each letter, as bits in base 36). See docs/wheels.md for the rule and its proof."""
    org, _, name = validate_repo_id(repo_id).partition("/")
    words = re.findall(_WORD, repo_id)
    tag = f"o{len(re.findall(_WORD, org))}"
    bits = _lost_bits(org) + _lost_bits(name)
    number = int(bits[::-1], 2) if "1" in bits else 0  # the first bit is the least significant
    if number:
        tag += "x" + _base36(number)
    return "-".join([*(word.lower() for word in words), tag])


def import_name(repo_id: str) -> str:
    """The package a repo's kernel wheel installs: its distribution name with ``_``, and a
    leading ``_`` when that starts with a digit (``1org/x`` -> ``_1org_x_o1``), so it imports."""
    name = distribution_name(repo_id).replace("-", "_")
    return f"_{name}" if name[:1].isdigit() else name


def _lost_bits(part: str) -> str:
    """What lower-casing the words of one part of a repo id and joining them with ``-`` loses,
    as bits in reading order: per letter 1 for a capital, else 0; per separator between two
    words 0 for a single ``-``, else 1 and two bits per character (``-`` 01, ``_`` 10, ``.``
    11, each least significant first) ending with 00."""
    bits = []
    for piece in re.findall(r"[A-Za-z0-9]+|[^A-Za-z0-9]+", part):
        if piece[0].isalnum():
            bits += ["1" if char.isupper() else "0" for char in piece if char.isalpha()]
        elif piece == "-":
            bits.append("0")
        else:
            bits.append("1")
            for char in piece:
                code = _SEPARATOR_CODES[char]
                bits += [str(code & 1), str(code >> 1)]
            bits += ["0", "0"]
    return "".join(bits)


def _base36(number: int) -> str:
    digits = ""
    while number:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
    return digits


def public_version(locked_version: str | None, commit: str) -> str:
    """The version before the local label: a tag's version, a ``vN`` branch's ``N``, else ``0``."""
    ref = locked_ref(locked_version, commit)
    parsed = parse_version_ref(ref) if ref is not None else None
    if parsed is None:
        return "0"
    return str(parsed.version.major) if parsed.is_branch else str(parsed.version)


def local_label(locked_version: str | None, commit: str, variant: str) -> str:
    """The local version label (without ``+``): ``g<commit>`` for a pin that is no tag, then
    the variant without its arch and os; may be empty (a tagged ``torch-universal``)."""
    parts = []
    ref = locked_ref(locked_version, commit)
    parsed = parse_version_ref(ref) if ref is not None else None
    if parsed is None or parsed.is_branch:
        parts.append(f"g{commit[:12]}")
    parts.append(variant_label(_parsed(variant)))
    return ".".join(p for p in parts if p)


def variant_label(variant: Variant) -> str:
    """``torch213-cxx11-cu128-x86_64-linux`` -> ``torch213.cxx11.cu128``; ``torch-cuda`` -> ``cuda``."""
    if variant.noarch:
        suffix = variant.name[len("torch-"):]
        return "" if suffix == "universal" else suffix
    stem = variant.name[: -len(f"-{variant.arch}-{variant.os}")]
    return stem.replace("-", ".").replace("_", ".").lower()


def platform_tag(variant: Variant) -> str:
    """The wheel platform tag a variant runs on (see the module's rules)."""
    if variant.noarch:
        return "any"
    assert variant.arch is not None and variant.os is not None
    if variant.os == "linux":
        return f"{MANYLINUX}_{variant.arch}"
    if variant.os == "darwin":
        arch = _DARWIN_ARCHS.get(variant.arch, variant.arch)
        release = "26_0" if variant.backend == "metal" else ("11_0" if arch == "arm64" else "10_15")
        return f"macosx_{release}_{arch}"
    return f"win_{_WINDOWS_ARCHS.get(variant.arch, variant.arch)}"


def python_tags(variant: Variant, paths: Sequence[str]) -> tuple[str, str]:
    """(python tag, abi tag) from the variant's shared objects."""
    objects = [p for p in paths if re.search(_SHARED_OBJECT, p.rsplit("/", 1)[-1])]
    if variant.noarch or not objects:
        return "py3", "none"
    for path in objects:
        match = re.search(_CPYTHON_SO, path.rsplit("/", 1)[-1])
        if match:
            return f"cp3{match[1]}", f"cp3{match[1]}"
    return _STABLE_ABI_PYTHON, "abi3"


def torch_requirement(variant: Variant) -> str | None:
    """The ``Requires-Dist`` on torch a variant needs (None: not a torch build)."""
    if variant.framework != "torch":
        return None
    if variant.torch_version is not None:
        return f"torch=={variant.torch_version[0]}.{variant.torch_version[1]}.*"
    if variant.stable_abi is not None:
        return f"torch>={variant.stable_abi[0]}.{variant.stable_abi[1]}"
    return "torch"


class WheelSpec(Record):
    """The name, version, tags and requirements of one kernel variant's wheel."""

    __slots__ = ("repo_id", "commit", "locked_version", "variant", "variant_hash", "distribution", "package", "version",
                 "python_tag", "abi_tag", "platform", "requires")  # fmt: skip
    repo_id: str
    commit: str
    locked_version: str | None
    variant: str
    variant_hash: str
    distribution: str
    package: str
    version: str
    python_tag: str
    abi_tag: str
    platform: str
    requires: tuple[str, ...]

    def __init__(self, *, repo_id: str, commit: str, locked_version: str | None, variant: str, variant_hash: str,
                 distribution: str, package: str, version: str, python_tag: str, abi_tag: str, platform: str,
                 requires: tuple[str, ...]) -> None:  # fmt: skip
        self._init(repo_id, commit, locked_version, variant, variant_hash, distribution, package, version, python_tag,
                   abi_tag, platform, requires)  # fmt: skip

    @property
    def tag(self) -> str:
        return f"{self.python_tag}-{self.abi_tag}-{self.platform}"

    @property
    def filename(self) -> str:
        """``<name>-<version>-<python>-<abi>-<platform>.whl`` (the name with ``_``, as wheels spell it)."""
        return f"{self.distribution.replace('-', '_')}-{self.version}-{self.tag}.whl"

    @property
    def dist_info(self) -> str:
        return f"{self.distribution.replace('-', '_')}-{self.version}.dist-info"


def wheel_spec(
    repo_id: str,
    commit: str,
    locked_version: str | None,
    variant: str,
    variant_hash: str,
    paths: Sequence[str],
    dependencies: Mapping[str, str] | None = None,
) -> WheelSpec:
    """The wheel of one locked variant; ``dependencies`` maps each locked kernel dependency's
    repo id to its locked version name (as the lock records it, or None)."""
    parsed = _parsed(variant)
    version = wheel_version(locked_version, commit, variant)
    python, abi = python_tags(parsed, paths)
    requires = [r for r in (torch_requirement(parsed),) if r]
    for dep_repo, dep_version in sorted((dependencies or {}).items()):
        requires.append(f"{distribution_name(dep_repo)}=={public_version(dep_version, '0' * 40)}")
    return WheelSpec(
        repo_id=repo_id, commit=commit, locked_version=locked_version, variant=variant, variant_hash=variant_hash,
        distribution=distribution_name(repo_id), package=import_name(repo_id), version=version,
        python_tag=python, abi_tag=abi, platform=platform_tag(parsed), requires=tuple(requires),
    )  # fmt: skip


def wheel_version(locked_version: str | None, commit: str, variant: str) -> str:
    """The wheel's version: the public version and, when there is one, ``+`` the local label."""
    label = local_label(locked_version, commit, variant)
    return public_version(locked_version, commit) + (f"+{label}" if label else "")


def shared_names(wheels: Iterable[tuple[str, str, str | None, str]]) -> list[str]:
    """One line for each two of ``wheels`` (repo id, commit, locked version, variant) that
    would share a name: two repos one distribution or import name (never, by the rule
    above, but a lock is input), or two builds one file name. A file name is told before
    the build's files are known, so two builds whose name, version and platform tag agree
    count as one file whatever their Python tags: pip could not tell them apart."""
    found: list[str] = []
    owners: dict[tuple[str, str], str] = {}
    for repo_id, commit, locked_version, variant in wheels:
        distribution = distribution_name(repo_id)
        version = wheel_version(locked_version, commit, variant)
        keys = (
            (("distribution", distribution), repo_id, f"the distribution {distribution}"),
            (("package", import_name(repo_id)), repo_id, f"the package {import_name(repo_id)} in site-packages"),
            (("file", f"{distribution}-{version}-{platform_tag(_parsed(variant))}"), f"{repo_id} {variant}",
             f"the wheel {distribution.replace('-', '_')}-{version}-*-{platform_tag(_parsed(variant))}.whl"),
        )  # fmt: skip
        for key, owner, what in keys:
            first = owners.setdefault(key, owner)
            if first != owner:
                found.append(f"{first} and {owner} would both be {what}")
    return list(dict.fromkeys(found))


def kernel_record(spec: WheelSpec, content_hashes: Mapping[str, str]) -> dict:
    """What ``.dist-info/kernel_deps.json`` holds: the lock's view of the variant, and every
    file's content hash (LFS SHA-256 or git blob SHA-1) as the variant hash takes it."""
    return {
        "schema_version": KERNEL_RECORD_SCHEMA,
        "repo_id": spec.repo_id,
        "commit": spec.commit,
        "version": spec.locked_version,
        "variant": spec.variant,
        "hash": spec.variant_hash,
        "hash_type": "git_lfs_concat",
        "package": spec.package,
        "files": dict(sorted(content_hashes.items())),
    }


def build_wheel(spec: WheelSpec, files: Mapping[str, bytes], content_hashes: Mapping[str, str]) -> bytes:
    """The wheel's bytes: ``files`` (paths relative to the variant) under the package folder,
    and the .dist-info; the same arguments give the same bytes."""
    import io
    import zipfile  # only for writing: the loader and verify read names and records alone

    entries: dict[str, bytes] = {f"{spec.package}/{rel}": data for rel, data in files.items()}
    info = spec.dist_info
    entries[f"{info}/METADATA"] = _metadata(spec).encode()
    entries[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: kernel-deps (kernels to-wheel)\n"
        f"Root-Is-Purelib: {'true' if spec.platform == 'any' else 'false'}\nTag: {spec.tag}\n"
    ).encode()
    record = json.dumps(kernel_record(spec, content_hashes), indent=2, sort_keys=True) + "\n"
    entries[f"{info}/{KERNEL_RECORD_NAME}"] = record.encode()
    names = sorted(entries)
    record_name = f"{info}/RECORD"
    entries[record_name] = _record([(name, f"sha256={_urlsafe_digest(entries[name])}", str(len(entries[name])))
                                    for name in names] + [(record_name, "", "")])  # fmt: skip
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in [*names, record_name]:
            item = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            item.compress_type = zipfile.ZIP_DEFLATED
            item.create_system = 3  # unix, so the permissions below are read
            mode = 0o755 if re.search(_SHARED_OBJECT, name.rsplit("/", 1)[-1]) else 0o644
            item.external_attr = (0o100000 | mode) << 16
            archive.writestr(item, entries[name], compresslevel=6)
    return buffer.getvalue()


def _record(rows: Sequence[tuple[str, str, str]]) -> bytes:
    """``RECORD``: CSV as the wheel spec says, written by the csv module, so a path with a
    comma or a quote (``a,b.py``) is quoted and stays one field for pip's csv reader."""
    import csv
    import io

    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    return text.getvalue().encode()


def _metadata(spec: WheelSpec) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {spec.distribution}",
        f"Version: {spec.version}",
        f"Summary: {spec.repo_id} {spec.variant} at commit {spec.commit[:12]}, as kernels.lock pins it",
        f"Keywords: kernel-deps,{spec.repo_id},{spec.variant}",
        *[f"Requires-Dist: {requirement}" for requirement in spec.requires],
    ]
    return "\n".join(lines) + "\n"


def _urlsafe_digest(data: bytes) -> str:
    import base64
    import hashlib  # a wheel written: its files, whatever their size

    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _parsed(variant: str) -> Variant:
    parsed = parse_variant(variant)
    if parsed is None:
        raise ValueError(f"{variant!r} is not a variant name")
    return parsed
