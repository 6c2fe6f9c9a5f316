"""A mistyped kernel repo id is answered with the nearest existing repos of its organization.

Against the local Hub behind a proxy that lists an organization's repos as the Hub does
(the ``listing_hub`` fixture): ``kernels add`` and ``kernels lock`` name the nearest repo in
the not-found error's hint, write nothing, and ask for the listing only after a repo was
not found. A listing the Hub cannot give (refused, failing, not JSON, junk, huge, slow)
leaves the plain not-found error, quickly; entries that are not valid repo ids of that
same organization, or the id not found itself, are never suggested.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.builder import KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.processes import KERNELS
from tests.fixtures.projects import write_project

ORG = "kernels-typo"
LISTINGS = ("/api/kernels", "/api/models")
PLAIN_HINT = "check the name, or set HF_TOKEN if the repo is private"


@pytest.fixture
def typo_org(hub_env):
    """An organization of its own on the local Hub: activation, layer-norm and rotary."""
    for name in ("activation", "layer-norm", "rotary"):
        hub_env.add_repo(KernelRepo(f"{ORG}/{name}", (Release("1.0.0"),)))
    return hub_env


def make_project(root: Path, deps: str = f'"{ORG}/rotary" = ">=1"') -> Path:
    return write_project(root / "app", deps, trusted=(ORG,), locked=True)


def files_of(project: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(project.iterdir()) if p.is_file()}


def not_found(repo_id: str, endpoint: str, hint: str) -> str:
    return f"error: {repo_id}: kernel repo not found on {endpoint}; {hint}\n"


def listings_asked(proxy) -> int:
    return sum(n for (_, path), n in proxy.counts.items() if path in LISTINGS)


def test_add_of_a_mistyped_repo_names_the_nearest_one_and_writes_nothing(typo_org, listing_hub, tmp_path) -> None:
    project = make_project(tmp_path)
    before = files_of(project)

    result = subprocess.run(
        [KERNELS, "add", f"{ORG}/activaton", str(project)],
        env={**os.environ, "HF_ENDPOINT": listing_hub.url},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert result.returncode == 1
    assert result.stderr == not_found(
        f"{ORG}/activaton", listing_hub.url, f"did you mean '{ORG}/activation'? (a private repo needs HF_TOKEN)"
    )
    assert result.stdout == ""
    assert files_of(project) == before


def test_a_repo_that_exists_costs_no_listing(typo_org, listing_hub, tmp_path) -> None:
    project = make_project(tmp_path)

    result = run_kernels("add", f"{ORG}/activation>=1", str(project), env={"HF_ENDPOINT": listing_hub.url})

    assert result.returncode == 0, result.stderr
    assert f"{ORG}/activation" in (project / "kernels.lock").read_text()
    assert listings_asked(listing_hub) == 0


def test_a_typo_in_pyproject_met_by_lock_names_the_nearest_ones(typo_org, listing_hub, tmp_path) -> None:
    project = make_project(tmp_path)
    typo_org.add_repo(KernelRepo(f"{ORG}/layer-norms", (Release("1.0.0"),)))
    write_project(project, f'"{ORG}/rotary" = ">=1"\n"{ORG}/layer-nrom" = ">=1"', trusted=(ORG,))
    before = files_of(project)

    result = run_kernels("lock", str(project), env={"HF_ENDPOINT": listing_hub.url})

    assert result.returncode == 1
    assert result.stderr == not_found(
        f"{ORG}/layer-nrom", listing_hub.url,
        f"did you mean '{ORG}/layer-norm' or '{ORG}/layer-norms'? (a private repo needs HF_TOKEN)",
    )  # fmt: skip
    assert files_of(project) == before


def test_no_suggestion_when_nothing_of_the_organization_is_close(typo_org, listing_hub, tmp_path) -> None:
    project = make_project(tmp_path)
    before = files_of(project)

    result = run_kernels("add", f"{ORG}/quantizer", str(project), env={"HF_ENDPOINT": listing_hub.url})

    assert result.returncode == 1
    assert result.stderr == not_found(f"{ORG}/quantizer", listing_hub.url, PLAIN_HINT)
    assert listings_asked(listing_hub) >= 1  # it asked; nothing was close
    assert files_of(project) == before


def test_a_repo_of_another_organization_is_never_suggested(typo_org, listing_hub, tmp_path) -> None:
    project = make_project(tmp_path)

    result = run_kernels("add", "kernels-test/rotari", str(project), env={"HF_ENDPOINT": listing_hub.url})

    assert result.returncode == 1  # kernels-typo/rotary exists, kernels-test/rotary too: the same org's
    assert "did you mean 'kernels-test/rotary'?" in result.stderr
    assert ORG not in result.stderr


def hostile_entries(path: str) -> tuple[int, object] | None:
    """A listing whose only acceptable entry is the last: the id not found, another
    organization's, ids that are not valid, and entries that are not repos."""
    if path not in LISTINGS:
        return None
    return 200, [
        {"id": f"{ORG}/activaton"},
        {"id": "kernels-test/activaton"},
        {"id": f"{ORG}/activ aton"},
        {"id": f"{ORG}/../activaton"},
        {"id": f"{ORG}/activaton/x"},
        {"id": 7},
        {"name": f"{ORG}/activatin"},
        f"{ORG}/activatio",
        None,
        {"id": f"{ORG}/activatio"},
    ]


def test_entries_that_are_not_repos_of_the_organization_are_never_suggested(typo_org, listing_hub, tmp_path) -> None:
    project = make_project(tmp_path)
    listing_hub.answer_json = hostile_entries

    result = run_kernels("add", f"{ORG}/activaton", str(project), env={"HF_ENDPOINT": listing_hub.url})

    assert result.returncode == 1
    assert result.stderr == not_found(
        f"{ORG}/activaton", listing_hub.url, f"did you mean '{ORG}/activatio'? (a private repo needs HF_TOKEN)"
    )


def huge(path: str) -> tuple[int, object] | None:
    """A listing of megabytes whose first entry would be the suggestion."""
    if path not in LISTINGS:
        return None
    return 200, [{"id": f"{ORG}/activation"}] + [{"id": f"{ORG}/k{i}", "pad": "x" * 400} for i in range(8000)]


def junk(path: str) -> tuple[int, object] | None:
    return (200, {"id": f"{ORG}/activation"}) if path in LISTINGS else None


@pytest.mark.parametrize(
    "fault",
    ["status-500", "status-401", "status-403", "status-404", "status-429", "not-json", "not-a-list", "huge", "slow", "reset"],
)
def test_a_listing_the_hub_cannot_give_leaves_the_plain_error_quickly(typo_org, listing_hub, tmp_path, fault) -> None:
    project = make_project(tmp_path)
    before = files_of(project)
    listing_hub.only_paths = lambda path: path in LISTINGS
    kind, _, value = fault.partition("-")
    if kind == "status":
        listing_hub.error_status = int(value)
        listing_hub.retry_after = "1" if value == "429" else None
        listing_hub.fail_all()
    elif fault == "not-json":
        listing_hub.error_schedule = [200, 200]  # 200 with a text body
    elif fault == "not-a-list":
        listing_hub.answer_json = junk
    elif fault == "huge":
        listing_hub.answer_json = huge
    elif fault == "slow":
        listing_hub.latency = 60.0
    else:
        listing_hub.reset_rate = 1.0

    started = time.monotonic()
    result = run_kernels("add", f"{ORG}/activaton", str(project), env={"HF_ENDPOINT": listing_hub.url})
    took = time.monotonic() - started

    assert result.returncode == 1
    assert result.stderr == not_found(f"{ORG}/activaton", listing_hub.url, PLAIN_HINT)
    assert listings_asked(listing_hub) >= 1
    assert took < 15, took  # the listing's few seconds at most, never the command's budget
    assert files_of(project) == before


def test_the_suggestion_is_in_the_json_error(typo_org, listing_hub, tmp_path) -> None:
    project = make_project(tmp_path)

    result = run_kernels("add", "--json", f"{ORG}/rotray", str(project), env={"HF_ENDPOINT": listing_hub.url})

    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert payload["kind"] == "repo-not-found"
    assert payload["hint"] == f"did you mean '{ORG}/rotary'? (a private repo needs HF_TOKEN)"
