"""What each locked kernel's build exports to ``kernelize``, read from its verified files, never imported.

For the build serving this machine, cached and checked against the lock file by file, the
Python sources are read, held to the hashes that check recorded, and parsed (``ast``):

- layers: the public classes ``layers.py`` or ``layers/__init__.py`` defines, or imports
  by name from a module of the build that defines them (what ``LockedLayerRepository``'s
  ``layer_name`` can name);
- functions: the public functions the top-level ``__init__.py`` defines, or imports by name
  from a module of the build that defines them, kept to ``__all__`` when it lists names
  (what ``LockedFuncRepository``'s ``func_name`` can name).

A build that cannot be read so carries the reason instead (not in the cache, differs from
the lock, no build for this machine, a source that does not parse).
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from kernel_deps.cache import store as cache
from kernel_deps.core.boundedread import RECORD_LIMIT, read_bounded
from kernel_deps.core.hashing import git_blob_id
from kernel_deps.core.records import Record
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.targets import Target, serving_variant
from kernel_deps.lock.model import LockedKernel, Lockfile, lock_path
from kernel_deps.lock.read import read_lock


class KernelExports(Record):
    """The layers and functions one locked kernel's build exports, or why they cannot be told."""

    __slots__ = ("repo_id", "variant", "layers", "functions", "reason")
    repo_id: str
    variant: str | None
    layers: tuple[str, ...]
    functions: tuple[str, ...]
    reason: str | None  # None: read from the verified files

    def __init__(self, repo_id: str, variant: str | None, layers: tuple[str, ...] = (),
                 functions: tuple[str, ...] = (), reason: str | None = None) -> None:  # fmt: skip
        self._init(repo_id, variant, layers, functions, reason)

    def describe(self) -> str:
        """``layers: A, B; functions: f`` or the reason, for a line of text."""
        if self.reason is not None:
            return self.reason
        return f"layers: {', '.join(self.layers) or 'none'}; functions: {', '.join(self.functions) or 'none'}"


class _Unreadable(Exception):
    """A source of the build cannot be read as verified Python."""


def project_exports(
    project_dir: Path, *, system: SystemInfo | None = None, cache_root: Path | None = None
) -> tuple[KernelExports, ...]:
    """:func:`lock_exports` of the project's lock, for this machine (or ``system``)."""
    lock = read_lock(lock_path(Path(project_dir)), purpose="use").lock
    return lock_exports(lock, system or detect_system(), cache_root=cache_root)


def lock_exports(lock: Lockfile, system: SystemInfo, *, cache_root: Path | None = None) -> tuple[KernelExports, ...]:
    """For each locked kernel, what the build serving ``system`` exports, in the lock's order."""
    target = Target("this machine", system)
    return tuple(_kernel_exports(kernel, serving_variant(target, kernel.variants), cache_root) for kernel in lock.kernels)


def _kernel_exports(kernel: LockedKernel, variant: str | None, cache_root: Path | None) -> KernelExports:
    if variant is None:
        return KernelExports(kernel.repo_id, None, reason="no build for this machine")
    try:
        check = cache.check_variant(kernel.repo_id, kernel.sha, variant, kernel.variants[variant].hash, root=cache_root)
    except OSError as exc:
        return KernelExports(kernel.repo_id, variant, reason=f"its cached build cannot be read ({exc.strerror or exc})")
    if not check.present:
        return KernelExports(kernel.repo_id, variant, reason="not in the cache: run 'kernels download'")
    if not check.ok:
        return KernelExports(kernel.repo_id, variant, reason="the cached build differs from the lock: run 'kernels verify'")
    try:
        sources = _Sources(check.path, check.files)
        layers = _public(sources, "layers", classes=True)
        functions = _public(sources, "", classes=False)
    except _Unreadable as exc:
        return KernelExports(kernel.repo_id, variant, reason=str(exc))
    return KernelExports(kernel.repo_id, variant, tuple(layers), tuple(functions))


class _Sources:
    """The verified Python files of one build, parsed on demand; bytes held to the check's hashes."""

    def __init__(self, folder: Path, files: dict[str, str]) -> None:
        self._folder, self._files, self._parsed = folder, files, {}

    def module(self, dotted: str) -> tuple[ast.Module, str] | None:
        """The parsed source of the build's module ``dotted`` ("" for the top package) and the
        package its relative imports start from; None when the build has no such module."""
        base = dotted.replace(".", "/")
        for relative in ((f"{base}/__init__.py", f"{base}.py") if base else ("__init__.py",)):
            if relative in self._files:
                package = dotted if relative.endswith("__init__.py") else dotted.rpartition(".")[0]
                return self._parse(relative), package
        return None

    def _parse(self, relative: str) -> ast.Module:
        if relative not in self._parsed:
            try:
                data = read_bounded(self._folder / relative, RECORD_LIMIT)
            except OSError as exc:
                raise _Unreadable(f"{relative} cannot be read ({exc.strerror or exc})") from None
            if self._files[relative] not in (git_blob_id(data), hashlib.sha256(data).hexdigest()):  # a plain or an LFS file
                raise _Unreadable(f"{relative} changed since it was checked: run 'kernels verify'")
            try:
                self._parsed[relative] = ast.parse(data, filename=relative)
            except (SyntaxError, ValueError) as exc:
                raise _Unreadable(f"{relative} does not parse as Python ({exc})") from None
        return self._parsed[relative]


def _public(sources: _Sources, dotted: str, *, classes: bool) -> list[str]:
    """The public classes (or functions) module ``dotted`` defines or imports by name from the build."""
    found_module = sources.module(dotted)
    if found_module is None:
        return []
    tree, package = found_module
    wanted = (ast.ClassDef,) if classes else (ast.FunctionDef, ast.AsyncFunctionDef)
    found: list[str] = []
    listed: list[str] | None = None
    for node in tree.body:
        if isinstance(node, wanted):
            found.append(node.name)
        elif isinstance(node, ast.ImportFrom) and node.level >= 1:
            origin = _relative(package, node.module, node.level)
            for alias in node.names:
                if origin is not None and alias.name in _defined(sources, origin, wanted):
                    found.append(alias.asname or alias.name)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                listed = list(value)
    names = [name for name in dict.fromkeys(found) if not name.startswith("_")]
    return [name for name in names if listed is None or name in listed]


def _defined(sources: _Sources, dotted: str, wanted: tuple[type, ...]) -> set[str]:
    found_module = sources.module(dotted)
    if found_module is None:
        return set()
    return {node.name for node in found_module[0].body if isinstance(node, wanted)}


def _relative(package: str, module: str | None, level: int) -> str | None:
    """The build-relative name of ``from <level dots><module> import`` in a module of ``package``."""
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None  # above the build
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, *(module.split(".") if module else [])])
