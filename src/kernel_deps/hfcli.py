"""The Hugging Face ``kernels`` library installed beside kernel-deps, as the ``kernels`` command sees it.

Both packages install a console script named ``kernels``. Ours hands every subcommand it
does not have (``info``, ``benchmark``, ``verify-signature``, ``check``, ``upload``, ...)
to the Hugging Face CLI, so one command serves both whichever package wrote the script.

Finding the peer imports nothing of it: its ``.dist-info`` folder is looked up on
``sys.path`` (the first one wins, as for an import), its ``console_scripts`` entry point
read from ``entry_points.txt``, and its subcommands read from the source of that entry
point's module (the ``add_parser("name", help=...)`` calls of its argparse CLI), so
``kernels --help`` stays as light as before. Only :func:`run_peer_cli` imports it.
What reading the peer takes (``configparser``, ``ast``) is imported only once its
``.dist-info`` folder is found, so ``--help`` without the peer pays for neither.

Imports nothing of kernel-deps.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

PEER_DISTRIBUTION = "kernels"
PEER_SCRIPT = "kernels"
INSTALL_HINT = "pip install kernels"
_DIST_INFO = re.compile(r"^kernels-([^-]+)\.dist-info$", re.IGNORECASE)


class PeerCliBroken(Exception):
    """The installed Hugging Face ``kernels`` command cannot be imported (a broken or partial install)."""


@dataclass(frozen=True, slots=True)
class PeerCli:
    """The installed Hugging Face ``kernels`` distribution and its command."""

    version: str
    location: Path  # the sys.path entry holding it
    entry_point: str  # "kernels.cli:main"
    subcommands: tuple[tuple[str, str], ...]  # (name, help), in the order its parser lists them

    def subcommand_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.subcommands)


def find_peer_cli(path: list[str] | None = None) -> PeerCli | None:
    """The Hugging Face ``kernels`` CLI installed on ``path`` (default ``sys.path``), or None."""
    for entry in sys.path if path is None else path:
        folder = Path(entry or os.curdir)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in sorted(names):
            match = _DIST_INFO.match(name)
            if match is None:
                continue
            entry_point = _console_script(folder / name / "entry_points.txt")
            if entry_point is None:
                continue
            return PeerCli(match.group(1), folder, entry_point, _subcommands(folder, entry_point))
    return None


def _console_script(path: Path) -> str | None:
    import configparser

    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names as written
    try:
        parser.read_string(path.read_text(encoding="utf-8"))
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
