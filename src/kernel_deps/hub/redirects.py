"""A repo's ``kernel-status.toml``: the redirect it states, parsed as the Hugging Face library
reads it, and redirects told in messages.

Following them (a chain to its end, at most :data:`MAX_REDIRECTS`, loops refused) is
:meth:`kernel_deps.hub.index.KernelIndex.redirects_from`'s, which reads each file once per run.
"""

from __future__ import annotations

import tomllib
from typing import Sequence

from kernel_deps.core.errors import InvalidKernelMetadataError, InvalidRepoIdError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import KERNEL_STATUS_NAME
from kernel_deps.core.spec import show_toml, validate_repo_id

# How many redirects in a row are followed (A -> B -> C is two); the Hugging Face library
# follows one, and a longer chain than this is refused rather than walked.
MAX_REDIRECTS = 8


class Redirect(Record):
    """A ``kernel-status.toml`` of ``kind = "redirect"``: the repo moved to ``destination``."""

    __slots__ = ("source", "destination", "revision", "commit")
    source: str
    destination: str
    revision: str
    commit: str  # the main branch's commit the file was read at

    def __init__(self, source: str, destination: str, revision: str = "main", commit: str = "") -> None:
        self._init(source, destination, revision, commit)


def describe_redirects(way: Sequence[str]) -> str:
    """``A redirects to B, which redirects to C (kernel-status.toml on their main branches)``
    for the repos ``way`` names, from the one asked for to where its redirects lead."""
    text = f"{way[0]} redirects to {way[1]}" + "".join(f", which redirects to {repo_id}" for repo_id in way[2:])
    where = "its main branch" if len(way) == 2 else "their main branches"
    return f"{text} ({KERNEL_STATUS_NAME} on {where})"


def redirect_trail(hops: Sequence[Redirect]) -> str:
    """Each redirect with the repo, commit and file it comes from, for errors."""
    return "; ".join(f"{h.source}@{h.commit[:12]}: {KERNEL_STATUS_NAME} redirects to {h.destination}" for h in hops)


def and_list(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def parse_kernel_status(repo_id: str, data: bytes, source: str) -> Redirect:
    """A repo's ``kernel-status.toml``; InvalidKernelMetadataError naming ``source`` when it is
    not one the Hugging Face library accepts (``kind = "redirect"``, ``destination``)."""
    try:
        parsed = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidKernelMetadataError(f"{source} is not valid TOML ({exc})") from None
    except ValueError:  # Python reads no integer of more than 4300 digits
        raise InvalidKernelMetadataError(f"{source} is not valid TOML (an integer of more than 4300 digits)") from None
    kind = parsed.get("kind")
    if kind != "redirect":
        stated = "no kind" if kind is None else f"kind = {show_toml(kind)}"
        raise InvalidKernelMetadataError(
            f'{stated}, a status this version of kernel-deps does not understand (it knows only '
            '"redirect", as the Hugging Face library does)',
            subject=source,
            hint=(
                f"upgrade kernel-deps if a newer one knows it, or ask the owners of {repo_id} about "
                "the file"
            ),
        )
    destination, revision = parsed.get("destination"), parsed.get("revision", "main")
    if destination is None:
        expected = 'expected destination = "org/name"'
        raise InvalidKernelMetadataError("a redirect without a destination", subject=source, hint=expected)
    try:
        validate_repo_id(destination)  # type: ignore[arg-type]
    except InvalidRepoIdError:
        shown = show_toml(destination)
        raise InvalidKernelMetadataError(
            f"destination = {shown} is not a repo id (org/name)",
            subject=source,
        ) from None
    if destination == repo_id or not isinstance(revision, str) or not revision:
        raise InvalidKernelMetadataError(
            f"a redirect to {show_toml(destination)} at revision {show_toml(revision)} leads "
            "nowhere",
            subject=source,
        )
    return Redirect(repo_id, destination, revision)
