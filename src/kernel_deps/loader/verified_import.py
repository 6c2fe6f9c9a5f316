"""Importing a verified kernel: only files kernels.lock covers, only the bytes that were hashed.

``cache.check_variant`` returns every file of a variant with its content hash; when the
check passes, that set is exactly what the lock pins. :class:`VerifiedFinder` serves
every module name under a loaded kernel's private name from that set alone, as Python's
own path finder would from the folder (a package, a module, or a namespace package for a
folder without ``__init__.py`` that holds verified files). Any other name is not found
(``find_spec`` returns None, as for a file that does not exist), and the kernel's
packages have an empty ``__path__``, so no path-based finder has a folder to look in: no
sourceless ``*.pyc``, no ``__pycache__``, no file added after the check runs, whatever
its name.

Python sources are read once, hashed, and compiled from those same bytes, so a file
changed after the check, even long after (a submodule imported lazily), is refused
rather than run. Native extensions are loaded by ``dlopen`` through their path: the
file is hashed again right before, which leaves the time between that hash and
``dlopen`` reading it (see docs/security.md).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from kernel_deps.core.errors import KernelCacheReadError, KernelIntegrityError
from kernel_deps.core.hashing import git_blob_id
from kernel_deps.core.records import FrozenMap, Record

ROOT_PACKAGE = "_kernel_deps_loaded"


class VerifiedTree(Record):
    """One checked variant: its folder, its package inside it, and its hashed files."""

    __slots__ = ("label", "folder", "package", "files")
    label: str  # "<repo id> <variant>", for messages
    folder: Path  # snapshots/<commit>/build/<variant>
    package: str  # the package folder relative to ``folder``: "" or one folder name
    files: FrozenMap  # relative path -> content hash, as verified (copied: nothing changes it after the check)

    def __init__(self, label: str, folder: Path, package: str, files: Mapping[str, str]) -> None:
        self._init(label, folder, package, FrozenMap(files.items()))

    def path_of(self, rel: str) -> Path:
        return self.folder.joinpath(*rel.split("/"))

    def read(self, rel: str) -> bytes:
        """The file's bytes, refused unless they hash to the verified value."""
        path = self.path_of(rel)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise KernelCacheReadError(
                f"{self.label}: cannot read {path} ({exc.strerror or exc}); "
                "check the cache's permissions, or run 'kernels download' to repair it"
            ) from None
        expected = self.files[rel]
        got = hashlib.sha256(data).hexdigest() if len(expected) == 64 else git_blob_id(data)
        if got != expected:
            raise KernelIntegrityError(
                f"refusing to import {rel} of {self.label}: it changed after it was verified "
                f"(expected {expected}, got {got}); run 'kernels download' to repair the cache"
            )
        return data

    def resolve(self, parts: list[str]) -> tuple[str, str] | None:
        """(relative path, "package" | "source" | "extension" | "namespace") for a module,
        from the verified files only, in the order Python's path finder takes them."""
        stem = "/".join(p for p in (self.package, *parts) if p)
        init = f"{stem}/__init__.py" if stem else "__init__.py"
        if init in self.files:
            return init, "package"
        if not parts:
            return None
        # Extension modules before source, as Python's path finder takes a module's files.
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if f"{stem}{suffix}" in self.files:
                return f"{stem}{suffix}", "extension"
        if f"{stem}.py" in self.files:
            return f"{stem}.py", "source"
        # A folder without __init__.py is a namespace package (PEP 420), but only one that
        # holds verified files: a folder of planted or bytecode-only files is not there.
        if any(rel.startswith(f"{stem}/") for rel in self.files):
            return stem, "namespace"
        return None


def package_of(files: Mapping[str, str]) -> str | None:
    """The variant's package folder: "" when ``__init__.py`` is at the top, else the only
    top-level folder with one (older layout); None when there is no single package."""
    if "__init__.py" in files:
        return ""
    packages = {rel.split("/")[0] for rel in files if rel.count("/") == 1 and rel.endswith("/__init__.py")}
    return packages.pop() if len(packages) == 1 else None


class _VerifiedSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles from the bytes it hashed: no bytecode read or written, no second read."""

    def __init__(self, fullname: str, tree: VerifiedTree, rel: str) -> None:
        super().__init__(fullname, str(tree.path_of(rel)))
        self._tree, self._rel = tree, rel

    def path_stats(self, path: str):  # noqa: D401 - importlib protocol
        raise OSError("kernel-deps does not use bytecode for verified kernels")

    def get_code(self, fullname: str):
        return self.source_to_code(self._tree.read(self._rel), self.path)


class _VerifiedExtensionLoader(importlib.machinery.ExtensionFileLoader):
    """Hashes the shared object again right before ``dlopen`` reads it."""

    def __init__(self, fullname: str, tree: VerifiedTree, rel: str) -> None:
        super().__init__(fullname, str(tree.path_of(rel)))
        self._tree, self._rel = tree, rel

    def create_module(self, spec):
        self._tree.read(self._rel)
        return super().create_module(spec)


class VerifiedFinder:
    """Serves the modules of loaded kernels from their verified files, and nothing else."""

    roots: dict[str, VerifiedTree] = {}

    @classmethod
    def find_spec(cls, fullname: str, path=None, target=None):
        root = next((r for r in cls.roots if fullname == r or fullname.startswith(r + ".")), None)
        if root is None:
            return None
        tree = cls.roots[root]
        parts = fullname[len(root) + 1:].split(".") if fullname != root else []
        found = tree.resolve(parts)
        if found is None:
            # Not found, as a missing file is (importlib.util.find_spec answers None). The
            # finders after this one get the parent's empty __path__ and find nothing either.
            return None
        rel, kind = found
        if kind == "namespace":
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
        elif kind == "extension":
            loader = _VerifiedExtensionLoader(fullname, tree, rel)
            spec = importlib.util.spec_from_file_location(fullname, tree.path_of(rel), loader=loader)
        else:
            loader = _VerifiedSourceLoader(fullname, tree, rel)
            spec = importlib.util.spec_from_file_location(fullname, tree.path_of(rel), loader=loader)
        if kind in ("package", "namespace"):
            # An empty __path__: its submodules come from this finder alone, never from a
            # path-based finder (with its sourceless-bytecode loader) reading the folder.
            spec.submodule_search_locations = []
        return spec


def install() -> None:
    """Register the private root package and put :class:`VerifiedFinder` first on ``sys.meta_path``."""
    if ROOT_PACKAGE not in sys.modules:
        root = ModuleType(ROOT_PACKAGE)
        root.__path__ = []  # a package with no files: its children come from VerifiedFinder
        sys.modules[ROOT_PACKAGE] = root
    if VerifiedFinder not in sys.meta_path:
        sys.meta_path.insert(0, VerifiedFinder)
