"""The CI glue of docs/ci.md, run for real: pre-commit hooks, the GitHub action, GitLab CI.

- `.pre-commit-hooks.yaml` through the `pre-commit` package (`pre-commit try-repo` with
  this repository, as a user tries hooks before pinning them), on a sample project that is
  a git repository of its own;
- `action.yml` and the workflow example in docs/ci.md linted with actionlint, and the
  action's shell steps run as the runner would run them;
- the GitLab snippet's script run on a sample project.

All against the local Hub.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernel_deps.cache import store as cache
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, METAL_VARIANT
from tests.fixtures.projects import write_project

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
DOCS = ROOT / "docs" / "ci.md"
DEPS = '"kernels-test/layer-norm" = ">=0.2"\n"kernels-test/flash" = 1'


def doc_block(first_line: str) -> str:
    """The fenced yaml block of docs/ci.md that starts with the comment ``first_line``."""
    for block in re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S):
        if block.splitlines()[0] == first_line:
            return block
    raise AssertionError(f"docs/ci.md has no yaml block starting with {first_line!r}")


def tool_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "NO_COLOR")}
    return {**env, "PATH": f"{BIN}{os.pathsep}{env['PATH']}", **extra}


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


# -- pre-commit --------------------------------------------------------------------------


def test_hooks_match_the_documented_config() -> None:
    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"kernels-lock-check", "kernels-verify"}
    assert hooks["kernels-lock-check"]["entry"] == "kernels lock --check"
    assert hooks["kernels-verify"]["entry"] == "kernels verify"
    for hook in hooks.values():
        watched = re.compile(hook["files"])
        assert watched.search("pyproject.toml") and watched.search("kernels.lock") and watched.search("app/kernels.lock")
        assert not watched.search("README.md") and not watched.search("my-pyproject.toml")
    config = yaml.safe_load(doc_block("# .pre-commit-config.yaml"))
    assert [hook["id"] for hook in config["repos"][0]["hooks"]] == ["kernels-lock-check", "kernels-verify"]


def try_repo(project: Path, hub_url: str, *args: str) -> subprocess.CompletedProcess:
    """`pre-commit try-repo` with this repository, in ``project`` (it installs kernel-deps from it)."""
    env = tool_env(HF_ENDPOINT=hub_url, PRE_COMMIT_COLOR="never")
    return subprocess.run(
        [str(BIN / "pre-commit"), "try-repo", str(ROOT), *args], cwd=project, capture_output=True, text=True,
        env=env, timeout=1200,
    )  # fmt: skip


def test_pre_commit_hooks_pass_then_a_stale_lock_fails(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", DEPS, locked=True)
    (project / "README.md").write_text("an app\n")
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "app")

    good = try_repo(project, hub_env.url, "--all-files")
    assert good.returncode == 0, good.stdout + good.stderr
    assert re.search(r"^kernels\.lock is in sync with pyproject\.toml\.+Passed$", good.stdout, re.M), good.stdout
    assert re.search(r"^kernels verify\.+Passed$", good.stdout, re.M), good.stdout

    # A requirement changed without relocking: the commit that stages it is refused.
    text = (project / "pyproject.toml").read_text().replace('"kernels-test/flash" = 1', '"kernels-test/flash" = 2')
    (project / "pyproject.toml").write_text(text)
    (project / "README.md").write_text("an app, edited\n")
    git(project, "add", "pyproject.toml", "README.md")
    stale = try_repo(project, hub_env.url)
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert re.search(r"^kernels\.lock is in sync with pyproject\.toml\.+Failed$", stale.stdout, re.M), stale.stdout
    assert "kernels.lock is out of date; run 'kernels lock' to update it:" in stale.stdout
    assert "~ kernels-test/flash" in stale.stdout
    assert re.search(r"^kernels verify\.+Failed$", stale.stdout, re.M), stale.stdout
    # The hooks watch pyproject.toml and kernels.lock only.
    git(project, "reset", "-q", "pyproject.toml")
    readme_only = try_repo(project, hub_env.url)
    assert readme_only.returncode == 0, readme_only.stdout
    assert re.search(r"^kernels\.lock is in sync with pyproject\.toml\.+\(no files to check\)Skipped$", readme_only.stdout, re.M)


# -- GitHub Actions ----------------------------------------------------------------------


def actionlint(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "actionlint"), "-no-color"], cwd=folder, capture_output=True, text=True, env=tool_env())


def workflow_repo(tmp_path: Path, workflow: str) -> Path:
    """A repository holding this action at its root and ``workflow``, as a user's would."""
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    git(repo, "init", "-q")
    shutil.copyfile(ROOT / "action.yml", repo / "action.yml")
    (repo / ".github" / "workflows" / "kernels.yml").write_text(workflow)
    return repo


def documented_workflow() -> str:
    """The docs' workflow, using this checkout's action (``./``) so actionlint reads its inputs."""
    workflow = doc_block("# .github/workflows/kernels.yml")
    assert "uses: your-org/kernel-deps@v0.1.0" in workflow
    return workflow.replace("uses: your-org/kernel-deps@v0.1.0", "uses: ./")


def test_action_and_documented_workflow_pass_actionlint(tmp_path) -> None:
    result = actionlint(workflow_repo(tmp_path, documented_workflow()))
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_reads_the_action_inputs(tmp_path) -> None:
    # The same workflow with a misspelt input fails, naming it: the lint covers action.yml.
    workflow = documented_workflow().replace("project-dir: .", "project_dir: .")
    result = actionlint(workflow_repo(tmp_path, workflow))
    assert result.returncode == 1
    assert '"project_dir"' in result.stdout and "not defined" in result.stdout, result.stdout


def run_action_steps(project: Path, runner: Path, inputs: dict[str, str]) -> list[subprocess.CompletedProcess]:
    """The action's shell steps after the install, run as a runner runs them: bash, its
    ``${{ inputs.* }}`` filled in, GITHUB_ENV applied to the steps after it."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    defaults = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    values = {**defaults, **inputs}
    github_env, github_output = runner / "env", runner / "output"
    github_env.touch()
    github_output.touch()
    results = []
    for step in action["runs"]["steps"]:
        if "run" not in step or "pip install" in step["run"]:
            continue  # the install is this test environment's own kernel-deps
        assert step["shell"] == "bash"
        env = {key: re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: values[m.group(1)], str(value))
               for key, value in step.get("env", {}).items()}  # fmt: skip
        exported = dict(line.split("=", 1) for line in github_env.read_text().splitlines() if line)
        base = {k: v for k, v in tool_env().items() if k not in ("HF_HUB_CACHE", "KERNELS_CACHE")}
        full = {**base, "HOME": str(runner / "home"), "GITHUB_ENV": str(github_env),
                "GITHUB_OUTPUT": str(github_output), **exported, **env}  # fmt: skip
        # GitHub runs a bash step as `bash --noprofile --norc -eo pipefail {0}`.
        script = runner / f"step-{len(results)}.sh"
        script.write_text(step["run"])
        results.append(subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                                      cwd=project, capture_output=True, text=True, env=full))  # fmt: skip
        assert results[-1].returncode == 0, f"{step['name']}: {results[-1].stdout}{results[-1].stderr}"
    return results


def test_action_steps_download_and_verify_with_the_cache_keyed_on_the_lock(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "work" / "app", DEPS, locked=True)
    runner = tmp_path / "runner"
    runner.mkdir()
    results = run_action_steps(project.parent, runner, {"project-dir": "app"})
    cache_dir = runner / "home" / ".cache" / "kernel-deps"
    assert f"KERNELS_CACHE={cache_dir}\n" in (runner / "env").read_text()
    assert f"path={cache_dir}\n" in (runner / "output").read_text()  # what actions/cache restores and saves
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert f"{len(lock.kernels)} variants present and verified ({len(lock.kernels)} downloaded" in results[1].stdout
    assert "kernels.lock, pyproject.toml and the cache agree" in results[2].stdout
    for kernel in lock.kernels:
        repo = cache.find_repo_dir(kernel.repo_id, cache_dir)
        assert repo is not None and cache.variant_dir(repo, kernel.sha, CPU_VARIANT).is_dir()

    # The cache key: the runner and the hash of this project's kernels.lock.
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    restore = next(step for step in action["runs"]["steps"] if step.get("uses", "").startswith("actions/cache@"))
    assert "hashFiles(format('{0}/kernels.lock', inputs.project-dir))" in restore["with"]["key"]
    assert restore["with"]["path"] == "${{ steps.cache-dir.outputs.path }}"


def test_action_steps_with_another_machines_variant(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/flash" = 1', locked=True)
    runner = tmp_path / "runner"
    runner.mkdir()
    results = run_action_steps(project, runner, {"variants": METAL_VARIANT, "cache-dir": str(tmp_path / "kc")})
    assert f"kernels-test/flash {METAL_VARIANT}: downloaded" in results[1].stdout
    assert "1 cached variant verified" in results[2].stdout


# -- GitLab CI ---------------------------------------------------------------------------


def test_gitlab_snippet_script_runs_on_a_sample_project(hub_env, tmp_path) -> None:
    job = yaml.safe_load(doc_block("# .gitlab-ci.yml"))["kernels"]
    assert job["cache"]["key"]["files"] == ["kernels.lock"]
    assert job["cache"]["paths"] == [".kernels-cache/"]
    project = write_project(tmp_path / "app", DEPS, locked=True)
    script = [line for line in job["script"] if not line.startswith("pip install")]
    assert script == ["kernels lock --check .", "kernels download .", "kernels verify . --require-cached"]
    exports = [f'export {name}="{value}"' for name, value in job["variables"].items()]
    env = tool_env(CI_PROJECT_DIR=str(project))
    env.pop("HF_HUB_CACHE")
    result = subprocess.run(["bash", "-ec", "\n".join([*exports, *script])], cwd=project, capture_output=True,
                            text=True, env=env)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kernels.lock is up to date" in result.stdout
    assert "kernels.lock, pyproject.toml and the cache agree" in result.stdout
    assert (project / ".kernels-cache").is_dir() and any((project / ".kernels-cache").iterdir())
