"""The Hugging Face ``kernels`` library installed beside kernel-deps, as the ``kernels`` command sees it.

Both packages install a console script named ``kernels``. Ours hands every subcommand it
does not have (``info``, ``benchmark``, ``verify-signature``, ``check``, ``upload``, ...)
to the Hugging Face CLI, so one command serves both whichever package wrote the script.

Finding the peer imports nothing of it: its ``.dist-info`` folder is looked up on
``sys.path`` (the first one wins, as for an import), its ``console_scripts`` entry point
read from ``entry_points.txt``, and its subcommands read from the source of that entry
point's module (the ``add_parser("name", help=...)`` calls of its argparse CLI), so
``kernels --help`` stays as light as before. Only :func:`run_peer_cli` imports it.
What reading the peer takes (``configparser``, ``ast``, ``pathlib``) is imported, and its
folder's pattern compiled, only once a name that could be its ``.dist-info`` folder is
seen, so ``--help`` without the peer pays for none of them.

Imports nothing of kernel-deps but :mod:`kernel_deps.core.records` (no dataclass: its
record costs ``kernels --help`` no import and no exec).
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, NoReturn

from kernel_deps.core.records import Record

if TYPE_CHECKING:
    from pathlib import Path

PEER_DISTRIBUTION = "kernels"
PEER_SCRIPT = "kernels"
INSTALL_HINT = "pip install kernels"
_DIST_INFO = r"^kernels-([^-]+)\.dist-info$"  # matched ignoring case, through re's own cache
# What the first, the eighth and the last character of a name _DIST_INFO matches can be,
# ignoring case as re does (the Kelvin sign is a K to it; "$" also matches before a last
# newline): a cheap test that leaves the pattern to the names that pass it, so that no
# other folder (kernel_deps' own .dist-info among them) has it compiled.
_FIRST, _LAST = "kK\u212a", "oO\n"


class PeerCliBroken(Exception):
    """The installed Hugging Face ``kernels`` command cannot be imported (a broken or partial install)."""


class PeerCli(Record):
    """The installed Hugging Face ``kernels`` distribution and its command."""

    __slots__ = ("version", "location", "entry_point", "subcommands")
    version: str
    location: Path  # the sys.path entry holding it
    entry_point: str  # "kernels.cli:main"
    subcommands: tuple[tuple[str, str], ...]  # (name, help), in the order its parser lists them

    def __init__(
        self, version: str, location: Path, entry_point: str, subcommands: tuple[tuple[str, str], ...]
    ) -> None:
        self._init(version, location, entry_point, subcommands)

    def subcommand_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.subcommands)


def find_peer_cli(path: list[str] | None = None) -> PeerCli | None:
    """The Hugging Face ``kernels`` CLI installed on ``path`` (default ``sys.path``), or None."""
    for entry in sys.path if path is None else path:
        folder = entry or os.curdir
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in sorted(n for n in names if n[:1] in _FIRST and n[7:8] == "-" and n[-1:] in _LAST):
            match = re.match(_DIST_INFO, name, re.IGNORECASE)
            if match is None:
                continue
            entry_point = _console_script(os.path.join(folder, name, "entry_points.txt"))
            if entry_point is None:
                continue
            import pathlib

            location = pathlib.Path(folder)
            return PeerCli(match.group(1), location, entry_point, _subcommands(location, entry_point))
    return None


def _console_script(path: str) -> str | None:
    import configparser

    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names as written
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        parser.read_string(text)
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    if not parser.has_option("console_scripts", PEER_SCRIPT):
        return None
    return parser.get("console_scripts", PEER_SCRIPT).strip()


def _subcommands(location: Path, entry_point: str) -> tuple[tuple[str, str], ...]:
    """The ``add_parser`` calls in the entry point's module: best effort, () when unreadable."""
    import ast

    module = entry_point.partition(":")[0]
    base = location.joinpath(*module.split("."))
    for source in (base / "__init__.py", base.with_suffix(".py")):
        try:
            tree = ast.parse(source.read_bytes(), filename=str(source))
        except (OSError, SyntaxError, ValueError):
            continue
        found: dict[str, tuple[int, str]] = {}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_parser"):
                continue
            if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
                continue
            text = next((k.value.value for k in node.keywords if k.arg == "help" and isinstance(k.value, ast.Constant)), "")
            found.setdefault(node.args[0].value, (node.lineno, text if isinstance(text, str) else ""))
        # In the order its parser lists them: the order of the calls in the source.
        return tuple((name, text) for name, (_, text) in sorted(found.items(), key=lambda item: item[1][0]))
    return ()


def run_peer_cli(peer: PeerCli, args: list[str]) -> NoReturn:
    """Run the Hugging Face CLI with ``args`` in this process and exit with its exit code.

    Its arguments, output and exit code are its own: ``sys.argv`` is set as its script
    would have it, and whatever its ``main`` returns or raises ends the process as it
    would end that script. :class:`PeerCliBroken` when its entry point cannot be imported.
    """
    import importlib

    module_name, _, attribute = peer.entry_point.partition(":")
    try:
        function = importlib.import_module(module_name)
        for part in attribute.split("."):
            function = getattr(function, part)
    except Exception as exc:  # noqa: BLE001 - a broken install is the user's to repair, not a traceback
        raise PeerCliBroken(
            f"the Hugging Face kernels {peer.version} command ({peer.entry_point}, in {peer.location}) cannot start: "
            f"{type(exc).__name__}: {exc}; reinstall it with 'pip install --force-reinstall kernels=={peer.version}'"
        ) from None
    sys.argv = [PEER_SCRIPT, *args]
    sys.exit(function())  # type: ignore[operator]


__all__ = ["INSTALL_HINT", "PEER_DISTRIBUTION", "PeerCli", "PeerCliBroken", "find_peer_cli", "run_peer_cli"]
