"""What a kernel requires of its dependencies is recorded in the lock and checked offline.

A kernel's ``kernel-depends`` (in each variant's ``metadata.json``) is read when locking;
the lock records it per entry (``kernel_depends``), so ``kernels lock --check``,
``kernels verify`` and the build hooks catch a hand-edited lock whose transitive pin no
longer meets it, with ``HF_HUB_OFFLINE=1``. The projects are locked against the local Hub.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_deps.commands.lock import lock_project
from kernel_deps.lock.freshness import check_sync
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock
from kernel_deps.lock.read import read_lock
from kernel_deps.project.pyproject import read_requirements
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated

ACTIVATION = "kernels-test/activation"
LAYER_NORM = "kernels-test/layer-norm"
ASKED = "<2,>=1.1"  # layer-norm v0.2.0's kernel-depends on activation, as recorded
OFFLINE = {"HF_HUB_OFFLINE": "1"}


def offline(*args: str) -> CliResult:
    return run_kernels(*args, env=OFFLINE)


@pytest.fixture
def project(hub_env, tmp_path: Path) -> Path:
    """layer-norm v0.2.0 locked (it needs activation >=1.1,<2: v1.2.0 is locked)."""
    return write_project(tmp_path / "app", f'"{LAYER_NORM}" = ">=0.2,<1"', locked=True)


def entry_of(lock_text: str, repo_id: str) -> dict:
    return next(e for e in json.loads(lock_text) if e["repo_id"] == repo_id)


def pin_activation_at_v2(project: Path, tmp_path: Path) -> str:
    """Hand-edit the lock as a pull request could: activation pinned at the real v2.0.0
    (its commit, variant hashes and tag, from a lock of its own), everything else kept,
    laid out as `kernels lock` writes it. Returns the text written."""
    other = write_project(tmp_path / "other", f'"{ACTIVATION}" = ">=2"', locked=True)
    v2 = entry_of((other / "kernels.lock").read_text(), ACTIVATION)
    entries = json.loads((project / "kernels.lock").read_text())
    for entry in entries:
        if entry["repo_id"] == ACTIVATION:
            entry.update(sha=v2["sha"], variants=v2["variants"], version=v2["version"])
    text = json.dumps(entries, indent=2) + "\n"
    assert Lockfile.from_json(text).to_text() == text  # a valid lock, in the layout kernels lock writes
    (project / "kernels.lock").write_text(text)
    return text


SHA = "c" * 40
VARIANTS = {"torch-universal": VariantLock(hash="sha256-" + "d" * 64)}


def locked(repo_id: str, version: str, requirement: str | None = None, **asks: tuple[str, ...]) -> LockedKernel:
    """An entry of a lock built in code; ``asks`` maps dependency names (``_`` for ``/``) to requirement texts."""
    kernel_depends = {name.replace("_", "/", 1): texts for name, texts in asks.items()}
    return LockedKernel(repo_id=repo_id, sha=SHA, variants=VARIANTS, version=version, requirement=requirement,
                        dependencies=tuple(kernel_depends), kernel_depends=kernel_depends)  # fmt: skip


@pytest.mark.parametrize(
    ("version", "requirement", "asked", "kinds"),
    [
        ("v1.2.0", None, ("<2,>=1.1",), []),
        ("v2.0.0", None, ("<2,>=1.1",), ["dependency-unsatisfied"]),
        ("v1", None, ("1",), []),
        ("v2", None, ("1",), ["dependency-unsatisfied"]),
        ("v2.0.0", None, ("<2,>=1.1", "revision=v2.0.0"), ["dependency-unsatisfied"]),
        # A branch name shows no version: while a revision asked for it chose the name, a
        # range asked too is not judged by it; otherwise the name must show it.
        ("v1", "revision=v1", ("<2,>=1.1",), []),
        ("v1", None, ("<2,>=1.1", "revision=v1"), []),
        ("v1", None, ("<2,>=1.1",), ["dependency-unsatisfied"]),
        ("main", "revision=v1", ("<2,>=1.1",), ["dependency-unsatisfied"]),
    ],
)
def test_each_locked_dependency_is_judged_by_what_its_parent_requires(
    version: str, requirement: str | None, asked: tuple[str, ...], kinds: list[str]
) -> None:
    from kernel_deps.lock.freshness import check_dependencies

    parent = locked(LAYER_NORM, "v0.2.0", **{"kernels-test_activation": asked})
    lock = Lockfile(kernels=(locked(ACTIVATION, version, requirement), parent))
    found = check_dependencies(lock)
    assert [p.kind for p in found] == kinds
    assert all(p.repo_id == ACTIVATION and p.facts["by"] == LAYER_NORM and p.expected in asked for p in found)


def test_the_lock_records_what_each_kernel_requires_of_its_dependencies(hub_env, project: Path) -> None:
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert lock.get(LAYER_NORM).dependencies == (ACTIVATION,)
    assert dict(lock.get(LAYER_NORM).kernel_depends) == {ACTIVATION: (ASKED,)}
    assert lock.get(ACTIVATION).version == "v1.2.0"
    assert check_sync(read_requirements(project), lock) == []
    assert offline("lock", "--check", str(project)).returncode == 0


def test_a_hand_edited_transitive_pin_fails_lock_check_and_verify_offline(
    hub_env, project: Path, tmp_path: Path
) -> None:
    written = pin_activation_at_v2(project, tmp_path)

    check = offline("lock", "--check", str(project))
    assert check.returncode == 1, check.stdout + check.stderr
    problem = (
        f"{ACTIVATION}: the locked v2.0.0 ({entry_of(written, ACTIVATION)['sha'][:12]}) does not satisfy {ASKED!r}, "
        f"which {LAYER_NORM} v0.2.0 ("
    )
    assert problem in check.stderr and "kernels.lock is out of date; run 'kernels lock' to update it" in check.stderr
    summary = validated(offline("lock", "--check", "--json", str(project)), "lock")
    assert summary["up_to_date"] is False and summary["changes"] == []
    assert [(p["kind"], p["repo_id"]) for p in summary["problems"]] == [("dependency-unsatisfied", ACTIVATION)]

    verify = offline("verify", str(project))
    assert verify.returncode == 1
    assert problem in verify.stdout + verify.stderr
    (found,) = validated(offline("verify", "--json", str(project)), "verify")["problems"]
    assert (found["kind"], found["repo_id"], found["expected"], found["got"]) == (
        "dependency-unsatisfied", ACTIVATION, ASKED, f"v2.0.0 ({entry_of(written, ACTIVATION)['sha'][:12]})",
    )  # fmt: skip
    assert (project / "kernels.lock").read_text() == written  # read-only commands wrote nothing
    # An edit needs the Hub to relock: offline it is refused and changes neither file.
    pyproject = (project / "pyproject.toml").read_text()
    edit = offline("add", "kernels-test/rotary>=1", str(project))
    assert edit.returncode == 1 and "HF_HUB_OFFLINE is set" in edit.stderr
    assert (project / "kernels.lock").read_text() == written and (project / "pyproject.toml").read_text() == pyproject

    # Online, --check shows the same problem and what kernels lock would change.
    online = run_kernels("lock", "--check", str(project))
    assert online.returncode == 1 and problem in online.stderr and f"~ {ACTIVATION} v2.0.0" in online.stderr
    # kernels lock repairs it: the pin no longer meets what layer-norm requires, so it moves.
    assert lock_project(project).lock.get(ACTIVATION).version == "v1.2.0"
    assert offline("lock", "--check", str(project)).returncode == 0
    assert offline("verify", str(project)).returncode == 0


def test_the_build_hooks_refuse_a_hand_edited_transitive_pin(hub_env, project: Path, tmp_path: Path) -> None:
    from kernel_deps.build_hooks import lock_for_build
    from kernel_deps.core.errors import KernelDepsError

    pin_activation_at_v2(project, tmp_path)
    with pytest.raises(KernelDepsError, match=rf"does not satisfy '{ASKED}', which {LAYER_NORM} v0\.2\.0"):
        lock_for_build(project)


def test_a_lock_without_recorded_requirements_is_read_as_it_is_and_verify_says_what_lock_adds(
    hub_env, project: Path
) -> None:
    entries = json.loads((project / "kernels.lock").read_text())
    for entry in entries:
        entry.pop("kernel_depends", None)
    older = json.dumps(entries, indent=2) + "\n"
    (project / "kernels.lock").write_text(older)

    assert offline("lock", "--check", str(project)).returncode == 0
    verify = offline("verify", str(project))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    notices = validated(offline("verify", "--json", str(project)), "verify")["notices"]
    assert [n["kind"] for n in notices] == ["requirements-not-recorded"]
    assert f"records which kernels {LAYER_NORM} depend on but not what they require of them" in notices[0]["message"]
    assert "'kernels lock' records them" in notices[0]["message"] and "note: " in verify.stdout

    # Its pins hold, so --check stays green; kernels lock records the requirements, keeping them.
    relock = run_kernels("lock", str(project))
    assert relock.returncode == 0, relock.stderr
    assert relock.stdout.splitlines()[0] == (
        f"~ {LAYER_NORM}: records that it requires {ACTIVATION} {ASKED!r} (its kernel-depends)"
    )
    relocked = read_lock(project / "kernels.lock", purpose="use").lock
    assert dict(relocked.get(LAYER_NORM).kernel_depends) == {ACTIVATION: (ASKED,)}
    assert [(k.repo_id, k.sha) for k in relocked.kernels] == [(e["repo_id"], e["sha"]) for e in entries]
    assert validated(offline("verify", "--json", str(project)), "verify")["notices"] == []


def test_kernels_lock_puts_back_the_requirements_an_edit_changed_to_match(
    hub_env, project: Path, tmp_path: Path
) -> None:
    """The limit of the offline checks (docs/security.md): a pin edited together with the
    requirement recorded for it is consistent, so only a relock, which reads metadata.json
    at the locked commit again, shows and undoes it."""
    written = pin_activation_at_v2(project, tmp_path)
    entries = json.loads(written)
    next(e for e in entries if e["repo_id"] == LAYER_NORM)["kernel_depends"] = {ACTIVATION: [">=2"]}
    (project / "kernels.lock").write_text(json.dumps(entries, indent=2) + "\n")
    assert offline("lock", "--check", str(project)).returncode == 0  # nothing offline contradicts it

    relock = run_kernels("lock", str(project))
    assert relock.returncode == 0, relock.stderr
    assert f"~ {LAYER_NORM}: requires {ACTIVATION} '>=2' -> {ASKED!r}" in relock.stdout
    assert f"~ {ACTIVATION} v2.0.0" in relock.stdout
    assert read_lock(project / "kernels.lock", purpose="use").lock.get(ACTIVATION).version == "v1.2.0"
