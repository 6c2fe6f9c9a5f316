"""Ending a command after Ctrl-C: one line, ``interrupted``, on stderr and exit code 130.

Shared by :mod:`kernel_deps.cli.entry` (an interrupt before or while the CLI is imported)
and :mod:`kernel_deps.cli.group` (one during a command, which click would end with
"Aborted!" and exit 1). It imports only ``os`` and ``sys``, which Python's start-up has loaded already,
so the entry point can hold it before it imports anything else.
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
