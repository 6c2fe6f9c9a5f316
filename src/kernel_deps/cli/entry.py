"""The entry point of the ``kernels`` and ``kernel-deps`` commands (their console scripts).

It imports nothing but the standard library's ``io``, ``os`` and ``sys`` (which Python's
start-up has loaded already), the package :mod:`kernel_deps.cli` (whose own module imports
nothing) and :mod:`kernel_deps.cli.interrupt` (which imports nothing else) before it has a
handler for Ctrl-C in place, so that an interrupt at any moment, including while the CLI
and huggingface_hub are still being imported, ends the same way: one line,
``interrupted``, on stderr and exit code 130 (128 + SIGINT), never a traceback.

It also gives the command output streams that outlive their reader: output into a pipe
whose reader has gone (``kernels versions ORG/NAME | head -1``) is dropped, and the
command finishes its work and exits as that work did (:func:`_outlive_a_closed_pipe`).
"""

from __future__ import annotations

import io
import os
import sys

from kernel_deps.cli.interrupt import interrupted


class _OutputFile(io.FileIO):
    """stdout's or stderr's descriptor, written as Python writes it, except that a write
    to a pipe whose reader has gone (EPIPE) points the descriptor at os.devnull and counts
    as written: what follows is dropped instead of raising BrokenPipeError again."""

    def write(self, data) -> int | None:
        try:
            return super().write(data)
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.fileno())
            finally:
                os.close(devnull)
            return memoryview(data).nbytes


def _outlive_a_closed_pipe(stream: io.TextIOBase | None) -> io.TextIOBase | None:
    """``stream`` (sys.stdout or sys.stderr) again, on an :class:`_OutputFile`.

    Python raises BrokenPipeError from whichever write meets a reader that has gone; click
    would then exit 1, whether the work had finished or not, and the interpreter's last
    flush prints "Exception ignored ... BrokenPipeError". Pointing the descriptor at
    os.devnull is the remedy Python's documentation gives (its note on SIGPIPE); done at
    the first failed write, the command also runs to its end and exits with its own code,
    as ``| head`` expects (pip instead stops with "ERROR: Pipe to stdout was broken",
    exit 1). A character the output's encoding cannot write is escaped, as Python writes
    stderr, rather than failing the command. A stream that is not a file descriptor of
    Python's own making (a console on Windows, an embedding application's) is kept.
    """
    buffer = getattr(stream, "buffer", None)
    raw = getattr(buffer, "raw", buffer)
    if type(raw) is not io.FileIO:
        return stream
    stream.flush()
    output = _OutputFile(raw.fileno(), "w", closefd=False)
    output.name = getattr(stream, "name", raw.name)
    binary = output if raw is buffer else io.BufferedWriter(output)  # unbuffered under python -u
    return io.TextIOWrapper(
        binary,
        encoding=stream.encoding,
        errors="backslashreplace" if stream.errors == "strict" else stream.errors,
        line_buffering=stream.line_buffering,
        write_through=stream.write_through,
    )


def main() -> None:
    """Run the ``kernels`` command (:func:`kernel_deps.cli.group.main`)."""
    try:
        sys.stdout, sys.stderr = _outlive_a_closed_pipe(sys.stdout), _outlive_a_closed_pipe(sys.stderr)
        from kernel_deps.cli.group import main as cli

        cli()
    except KeyboardInterrupt:
        interrupted()


def main_kernel_deps() -> None:
    """Run the ``kernel-deps`` command: kernel-deps' own subcommands only."""
    try:
        sys.stdout, sys.stderr = _outlive_a_closed_pipe(sys.stdout), _outlive_a_closed_pipe(sys.stderr)
        from kernel_deps.cli.group import main_own_commands

        main_own_commands()
    except KeyboardInterrupt:
        interrupted()
