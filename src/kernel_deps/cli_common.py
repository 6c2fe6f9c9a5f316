"""What the ``kernels`` group (:mod:`kernel_deps.cli`) and its commands
(:mod:`kernel_deps.cli_commands`) share: where ``--json`` and ``-q`` are remembered, JSON
output, colour. Imports click, and ``json`` only to print it."""

from __future__ import annotations

import os

import click

# Set in click's context meta (shared by the group and its command) by the options below.
_JSON_META = "kernel_deps.json"
_QUIET_META = "kernel_deps.quiet"


def _remember(key: str):
    def callback(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        if value:
            ctx.meta[key] = True
        return value

    return callback


def _colour(text: str, **style) -> str:
    """``text`` styled for a terminal, plain when NO_COLOR is set (click drops styles off a terminal)."""
    return text if os.environ.get("NO_COLOR") else click.style(text, **style)


def _echo_json(payload: dict) -> None:
    import json  # only a command that prints JSON pays for it (not `--help`)

    click.echo(json.dumps(payload, indent=2))
