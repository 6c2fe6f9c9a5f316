"""The entry point of the ``kernels`` and ``kernel-deps`` commands.

It imports nothing but the standard library's ``os`` and ``sys`` before it has a handler
for Ctrl-C in place, so that an interrupt at any moment, including while the CLI and
huggingface_hub are still being imported, ends the same way: one line, ``interrupted``,
on stderr and exit code 130 (128 + SIGINT), never a traceback.
"""

from __future__ import annotations

import os
import sys

EXIT_INTERRUPTED = 130


def interrupted() -> None:
    """End the command after a Ctrl-C: one line on stderr, exit 130; never returns.

    Called once the interrupt has unwound the main thread (so its ``finally`` blocks and
    rollbacks have run). The process then ends at once: worker threads still waiting on
    the Hub are not joined, so a download in flight stops now rather than when its files
    finish.
    """
    try:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt this
    except (ImportError, ValueError, OSError):
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, RuntimeError):
            pass
    try:
        os.write(2, b"interrupted\n")
    except OSError:
        pass
    os._exit(EXIT_INTERRUPTED)


def main() -> None:
    """Run the ``kernels`` command (:func:`kernel_deps.cli.main`)."""
    try:
        from kernel_deps.cli import main as cli

        cli()
    except KeyboardInterrupt:
        interrupted()


def main_kernel_deps() -> None:
    """Run the ``kernel-deps`` command: kernel-deps' own subcommands only."""
    try:
        from kernel_deps.cli import main_own_commands

        main_own_commands()
    except KeyboardInterrupt:
        interrupted()
