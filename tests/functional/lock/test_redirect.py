"""A kernel repo that redirects to another (``kernel-status.toml`` on its main branch, as the
Hugging Face library and kernel-builder lay it out) is locked at its destination, with a note.

The repos are real git repositories served by the local olah Hub.
"""

from __future__ import annotations

import pytest

from kernel_deps import load_kernel
from kernel_deps.commands.download import download_project
from kernel_deps.commands.lock import lock_project
from kernel_deps.commands.verify import verify_project
from kernel_deps.lock.read import read_lock
from kernel_deps.cli.render_lock import note_line
from tests.fixtures.builder import BuiltRepo, KernelRepo, Release
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated

OLD, NEW = "kernels-test/redirect-old", "kernels-test/redirect-new"
PARENT = "kernels-test/redirect-parent"


def add_status(built: BuiltRepo, text: str) -> str:
    """Commit ``kernel-status.toml`` at the top of the repo's main branch; the new main commit."""
    (built.path / "kernel-status.toml").write_text(text)
    built.git("add", "kernel-status.toml")
    built.git("commit", "--quiet", "--no-verify", "-m", "Moved", date_index=30)
    built.branches["main"] = built.git("rev-parse", "HEAD")
    return built.branches["main"]


@pytest.fixture
def moved(hub_env):
    """OLD (1.0.0, then moved) redirects to NEW (1.0.0, 1.1.0); PARENT depends on OLD 1."""
    if OLD not in hub_env.repos:
        hub_env.add_repo(KernelRepo(NEW, (Release("1.0.0"), Release("1.1.0"))))
        old = hub_env.add_repo(KernelRepo(OLD, (Release("1.0.0"),)))
        add_status(old, f'kind = "redirect"\ndestination = "{NEW}"\n')
        hub_env.add_repo(KernelRepo(PARENT, (Release("1.0.0", depends=((OLD, 1),)),)))  # type: ignore[arg-type]
        hub_env.repos[OLD] = old
    return hub_env


def run_cli(*args: str) -> CliResult:
    return run_kernels(*args)


def test_a_redirecting_repo_is_locked_at_its_destination_with_a_note(moved, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{OLD}" = 1\n')
    result = run_cli("lock", str(project))
    assert result.returncode == 0, result.stderr
    assert (
        f"note: {OLD} redirects to {NEW} (kernel-status.toml on its main branch); locked {NEW}" in result.stdout.splitlines()
    )
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert lock.repo_ids == (NEW,)
    entry = lock.get(NEW)
    assert (entry.sha, entry.version, entry.requirement) == (moved.repos[NEW].branches["v1"], "v1", "1")
    assert entry.redirected_from == (OLD,) and lock.get(OLD) is entry

    # The lock holds offline, and the whole path works under the name pyproject.toml uses.
    assert run_cli("lock", "--check", str(project)).returncode == 0
    download_project(project)
    assert verify_project(project, require_cached=True).ok
    module = load_kernel(OLD, lockfile=project / "kernels.lock")
    assert module.__version__ == "1.1.0" and module.__kernel_origin__.repo_id == NEW
    outdated = run_cli("outdated", str(project))
    assert outdated.returncode == 0 and "the locked kernel is current" in outdated.stdout, outdated.stdout


def test_a_dependency_that_redirects_is_followed(moved, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{PARENT}" = 1\n')
    outcome = lock_project(project)
    assert outcome.lock.repo_ids == tuple(sorted((PARENT, NEW)))
    assert outcome.lock.get(PARENT).dependencies == (NEW,)
    assert outcome.lock.get(NEW).redirected_from == ()  # the parent names NEW in the lock
    assert [note_line(n) for n in outcome.notes] == [f"{OLD} redirects to {NEW} (kernel-status.toml on its main branch); locked {NEW}"]


def test_asking_for_a_repo_and_its_redirect_is_bad_input(moved, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{OLD}" = 1\n"{NEW}" = 1\n')
    result = run_cli("lock", str(project))
    assert result.returncode == 2 and not (project / "kernels.lock").exists()
    assert result.stderr.splitlines() == [
        f"error: pyproject.toml: {OLD} redirects to {NEW} (kernel-status.toml), which [tool.kernels.dependencies] "
        f"also asks for as {NEW}; keep one entry, for {NEW}"
    ]


def test_an_unknown_status_is_one_line_naming_the_file(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/redirect-strange"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    main = add_status(built, 'kind = "retired"\n')
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n')
    result = run_cli("lock", str(project))
    assert result.returncode == 1 and not (project / "kernels.lock").exists()
    assert result.stderr.splitlines() == [
        f'error: {repo_id}@{main[:12]}: kernel-status.toml: kind = "retired", a status this version of kernel-deps '
        f'does not understand (it knows only "redirect", as the Hugging Face library does); upgrade kernel-deps if a '
        f"newer one knows it, or ask the owners of {repo_id} about the file"
    ]


def test_a_redirect_added_after_locking_moves_nothing_until_upgrade(moved, tmp_path) -> None:
    """Pins hold while upstream moves: a repo that starts redirecting after the lock was made
    keeps its locked commit until the user asks to upgrade it."""
    later = "kernels-test/redirect-later"
    built = moved.add_repo(KernelRepo(later, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{later}" = 1\n')
    first = lock_project(project)
    before = (project / "kernels.lock").read_bytes()
    assert first.lock.repo_ids == (later,)

    add_status(built, f'kind = "redirect"\ndestination = "{NEW}"\n')  # upstream moved the repo

    again = lock_project(project)
    assert (again.written, again.changes, again.notes) == (False, [], [])
    assert (project / "kernels.lock").read_bytes() == before
    assert run_cli("lock", "--check", str(project)).returncode == 0

    upgraded = lock_project(project, upgrade_packages=[later])
    assert upgraded.lock.repo_ids == (NEW,)
    assert upgraded.lock.get(NEW).redirected_from == (later,)
    assert [note_line(n) for n in upgraded.notes] == [f"{later} redirects to {NEW} (kernel-status.toml on its main branch); locked {NEW}"]


def add_redirect(built: BuiltRepo, destination: str) -> str:
    """Point the repo at ``destination`` (a redirect on its main branch); the new main commit."""
    return add_status(built, f'kind = "redirect"\ndestination = "{destination}"\n')


def test_outdated_says_what_upgrade_would_take_from_a_repo_that_redirects_since_locking(moved, tmp_path) -> None:
    """The lock keeps its pin while the repo redirects; `kernels outdated` says where
    `kernels lock --upgrade` would move it (text, --exit-code and --json)."""
    later = "kernels-test/redirect-outdated"
    built = moved.add_repo(KernelRepo(later, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{later}" = 1\n')
    locked = lock_project(project).lock.get(later)
    add_redirect(built, NEW)
    new_v1 = moved.repos[NEW].branches["v1"]

    text = run_cli("outdated", str(project))
    assert text.returncode == 0, text.stderr
    assert [line.split() for line in text.stdout.splitlines()[:2]] == [
        ["KERNEL", "LOCKED", "UPGRADE", "LATEST"],
        [later, "v1", f"({locked.sha[:12]})", NEW, "v1", f"({new_v1[:12]})", "-"],
    ]
    assert text.stdout.splitlines()[2:] == [
        f"note: {later} redirects to {NEW} (kernel-status.toml on its main branch); "
        f"kernels lock --upgrade would lock {NEW} v1 ({new_v1[:12]}) in its place"
    ]
    assert run_cli("outdated", "--exit-code", str(project)).returncode == 1

    data = validated(run_cli("outdated", "--json", str(project)), "outdated")
    (drift,) = data["kernels"]
    assert data["drifted"] is True
    assert (drift["repo_id"], drift["locked_commit"], drift["redirects"]) == (later, locked.sha, [later, NEW])
    assert (drift["upgrade_version"], drift["upgrade_commit"], drift["upgradable"]) == ("v1", new_v1, True)

    # ... which is what the upgrade then does.
    upgraded = lock_project(project, upgrade=True).lock
    assert upgraded.repo_ids == (NEW,) and (upgraded.get(NEW).version, upgraded.get(NEW).sha) == ("v1", new_v1)


def test_a_chain_of_redirects_is_followed_to_its_end_with_a_note(moved, tmp_path) -> None:
    first, middle = "kernels-test/redirect-chain-first", "kernels-test/redirect-chain-middle"
    add_redirect(moved.add_repo(KernelRepo(middle, (Release("1.0.0"),))), NEW)
    add_redirect(moved.add_repo(KernelRepo(first, (Release("1.0.0"),))), middle)
    project = write_project(tmp_path / "app", f'"{first}" = 1\n')
    result = run_cli("lock", str(project))
    assert result.returncode == 0, result.stderr
    assert (
        f"note: {first} redirects to {middle}, which redirects to {NEW} (kernel-status.toml on their main branches); "
        f"locked {NEW}"
    ) in result.stdout.splitlines()
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert lock.repo_ids == (NEW,) and lock.get(NEW).redirected_from == (first,)
    assert lock.get(NEW).sha == moved.repos[NEW].branches["v1"]


def test_outdated_follows_a_locked_destination_that_redirects_again(moved, tmp_path) -> None:
    """Locked at the destination of one redirect, which later redirects on: the pin holds
    for `kernels lock`, and `kernels outdated` names the whole way and what --upgrade takes."""
    first, middle = "kernels-test/redirect-on-first", "kernels-test/redirect-on-middle"
    built = moved.add_repo(KernelRepo(middle, (Release("1.0.0"),)))
    add_redirect(moved.add_repo(KernelRepo(first, (Release("1.0.0"),))), middle)
    project = write_project(tmp_path / "app", f'"{first}" = 1\n')
    assert lock_project(project).lock.repo_ids == (middle,)
    before = (project / "kernels.lock").read_bytes()
    add_redirect(built, NEW)

    again = lock_project(project)
    assert (again.written, again.changes) == (False, []) and (project / "kernels.lock").read_bytes() == before

    data = validated(run_cli("outdated", "--json", str(project)), "outdated")
    (drift,) = data["kernels"]
    new_v1 = moved.repos[NEW].branches["v1"]
    assert (drift["repo_id"], drift["redirects"], drift["upgrade_commit"]) == (middle, [first, middle, NEW], new_v1)
    assert drift["drifted"] is True and run_cli("outdated", "--exit-code", str(project)).returncode == 1
    assert lock_project(project, upgrade=True).lock.repo_ids == (NEW,)


def test_a_redirect_loop_is_one_line_naming_each_repo(hub_env, tmp_path) -> None:
    one, two = "kernels-test/redirect-loop-one", "kernels-test/redirect-loop-two"
    built_one = hub_env.add_repo(KernelRepo(one, (Release("1.0.0"),)))
    built_two = hub_env.add_repo(KernelRepo(two, (Release("1.0.0"),)))
    main_one, main_two = add_redirect(built_one, two), add_redirect(built_two, one)
    project = write_project(tmp_path / "app", f'"{one}" = 1\n')
    result = run_cli("lock", str(project))
    assert result.returncode == 1 and not (project / "kernels.lock").exists()
    assert result.stderr.splitlines() == [
        f"error: {one}@{main_one[:12]}: kernel-status.toml redirects to {two}; {two}@{main_two[:12]}: "
        f"kernel-status.toml redirects to {one}: a loop of redirects; ask the owners of {one} and {two} to fix it"
    ]


def test_a_chain_longer_than_the_bound_is_one_line(hub_env, tmp_path) -> None:
    bound = 8  # docs/locking.md: at most 8 redirects are followed
    names = [f"kernels-test/redirect-long-{i}" for i in range(bound + 2)]
    for name, destination in zip(names, names[1:]):
        add_redirect(hub_env.add_repo(KernelRepo(name, (Release("1.0.0"),))), destination)
    project = write_project(tmp_path / "app", f'"{names[0]}" = 1\n')
    result = run_cli("lock", str(project))
    assert result.returncode == 1 and not (project / "kernels.lock").exists()
    assert result.stderr.splitlines() == [
        f"error: {names[0]}: kernel-status.toml redirects more than {bound} times "
        f"({' -> '.join(names)}); kernel-deps follows at most {bound}: "
        f"ask the owners of {names[0]} to point it at the repo it moved to"
    ]


def test_a_redirect_to_a_missing_repo_names_the_repo_that_redirects(hub_env, tmp_path) -> None:
    repo_id, gone = "kernels-test/redirect-dangling", "kernels-test/redirect-nowhere"
    main = add_redirect(hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),))), gone)
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n')
    result = run_cli("lock", str(project))
    assert result.returncode == 1 and not (project / "kernels.lock").exists()
    assert result.stderr.splitlines() == [
        f"error: {repo_id}@{main[:12]}: kernel-status.toml redirects to {gone}, which is missing: kernel repo "
        f"not found on {hub_env.url}; check the name, or set HF_TOKEN if the repo is private"
    ]
