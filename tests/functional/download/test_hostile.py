"""Hostile repository content and hostile local input: rejected clearly, never written
outside the cache, never executed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from kernel_deps import get_locked_kernel
from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.core.errors import UnsafeRepoContentError
from kernel_deps.fetch.files import check_tree_paths
from kernel_deps.fetch.tasks import VariantTask
from kernel_deps.commands.lock import lock_project
from kernel_deps.core.errors import HubError, InvalidKernelMetadataError
from kernel_deps.hub.listing import TreeFile
from kernel_deps.lock.model import LockedKernel
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, BuiltRepo, KernelRepo, Release
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project



def add_hostile_entry(built: BuiltRepo, version: str, variant: str, entry_path: list[str], data: bytes) -> str:
    """Commit a file at build/<variant>/<entry_path...> with git plumbing, which (unlike
    `git add`) accepts names such as '..'; tags the result v<version>. Returns the commit."""

    def mktree(lines: list[str]) -> str:
        return subprocess.run(["git", "mktree"], cwd=built.path, input="\n".join(lines) + "\n",
                              capture_output=True, text=True, check=True).stdout.strip()

    def entries(treeish: str) -> list[str]:
        return built.git("ls-tree", treeish).splitlines()

    def replace(lines: list[str], name: str, new: str) -> list[str]:
        kept = [line for line in lines if line.split("\t", 1)[1] != name]
        return kept + [new]

    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=built.path, input=data,
                          capture_output=True, check=True).stdout.decode().strip()
    node = f"100644 blob {blob}\t{entry_path[-1]}"
    for part in reversed(entry_path[:-1]):
        node = f"040000 tree {mktree([node])}\t{part}"
    head = built.git("rev-parse", "HEAD")
    variant_tree = mktree(entries(f"{head}:build/{variant}") + [node])
    build_tree = mktree(replace(entries(f"{head}:build"), variant, f"040000 tree {variant_tree}\t{variant}"))
    root_tree = mktree(replace(entries(head), "build", f"040000 tree {build_tree}\tbuild"))
    commit = built.git("commit-tree", root_tree, "-p", head, "-m", "hostile")
    built.git("tag", f"v{version}", commit)
    return commit


def test_a_backslash_path_is_refused_and_nothing_is_written(hub_env, tmp_path) -> None:
    built = hub_env.add_repo(KernelRepo("kernels-test/hostile-backslash", (Release("1.0.0", variants=(CPU_VARIANT,)),)))
    commit = add_hostile_entry(built, "1.1.0", CPU_VARIANT, ["..\\..\\evil.py"], b"import os; os.system('touch /tmp/owned')\n")
    fresh = write_project(tmp_path / "fresh", '"kernels-test/hostile-backslash" = "==1.1.0"')
    result = run_kernels("lock", str(fresh))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "the repo lists an unsafe path" in result.stderr and "evil.py" in result.stderr
    assert not (fresh / "kernels.lock").exists()  # never locked, so never downloaded
    # A lock edited to name that commit is refused by download before anything is fetched.
    app = write_project(tmp_path / "app", '"kernels-test/hostile-backslash" = "==1.0.0"', locked=True)
    entries = json.loads((app / "kernels.lock").read_text())
    entries[0]["sha"] = commit
    (app / "kernels.lock").write_text(json.dumps(entries))
    result = run_kernels("download", str(app))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "the repo lists an unsafe path" in result.stderr and "evil.py" in result.stderr
    root = cache.cache_root()
    assert not list(root.rglob("*evil*"))
    assert not list(root.glob("*/snapshots/*/build/*"))
    assert not Path("/tmp/owned").exists()


@pytest.mark.parametrize(
    "path",
    ["../../evil.py", "/etc/evil.py", "a/../../evil.py", "a\\..\\evil.py", "./evil.py", "a//evil.py", "evil\0.py"],
)
def test_paths_escaping_the_variant_folder_are_refused(path) -> None:
    task = VariantTask(LockedKernel(repo_id="kernels-test/x", sha="0" * 40, variants={}), CPU_VARIANT)
    listing = [
        TreeFile(f"build/{CPU_VARIANT}/__init__.py", 1, "a" * 40, None),
        TreeFile(f"build/{CPU_VARIANT}/{path}", 1, "b" * 40, None),
    ]
    with pytest.raises(UnsafeRepoContentError, match="unsafe path"):
        check_tree_paths(task, listing)


def test_a_symlink_in_the_repo_is_stored_as_its_text_never_followed(hub_env, tmp_path) -> None:
    release = Release("1.0.0", variants=(CPU_VARIANT,), symlinks=(("passwd.py", "/etc/passwd"),))
    built = hub_env.add_repo(KernelRepo("kernels-test/hostile-symlink", (release,)))
    app = write_project(tmp_path / "app", '"kernels-test/hostile-symlink" = ">=1"')
    lock_project(app)
    download_project(app)
    folder = cache.variant_dir(cache.find_repo_dir("kernels-test/hostile-symlink"), built.commits["1.0.0"], CPU_VARIANT)
    link = folder / "passwd.py"
    # The cache holds the link's text as a verified blob; nothing points outside the cache.
    assert link.read_bytes() == b"/etc/passwd"
    assert link.resolve().parent == cache.find_repo_dir("kernels-test/hostile-symlink") / "blobs"
    assert get_locked_kernel("kernels-test/hostile-symlink", lockfile=app / "kernels.lock").__version__ == "1.0.0"


def test_a_folder_that_is_not_a_variant_name_is_never_locked(hub_env, tmp_path) -> None:
    weird = "torch-universal;rm -rf ~"
    hub_env.add_repo(KernelRepo("kernels-test/hostile-variant", (Release("1.0.0", variants=(CPU_VARIANT, weird)),)))
    app = write_project(tmp_path / "app", '"kernels-test/hostile-variant" = ">=1"')
    lock = lock_project(app).lock
    assert set(lock.get("kernels-test/hostile-variant").variants) == {CPU_VARIANT}
    result = run_kernels("download", "--all-variants", str(app))
    assert result.returncode == 0, result.stderr
    assert not list(cache.cache_root().rglob("*rm -rf*"))


@pytest.mark.parametrize(
    ("name", "metadata", "error", "message"),
    [
        ("huge", b'{"name": "x", "pad": "' + b"a" * (2 << 20) + b'"}', HubError, "is larger than 1048576 bytes; refusing to read it"),
        ("malformed", b'{"kernel-depends": [', HubError, "metadata.json cannot be read: not valid JSON"),
        ("not-object", b'["kernel-depends"]', HubError, "metadata.json is not a JSON object"),
        ("bad-depends", b'{"kernel-depends": [{"repo-id": "../../etc", "version": ">=1"}]}', InvalidKernelMetadataError, "../../etc"),
    ],
)
def test_bad_metadata_fails_the_lock_clearly(hub_env, tmp_path, name, metadata, error, message) -> None:
    release = Release("1.0.0", variants=(CPU_VARIANT,), extra_files=(("metadata.json", metadata),))
    hub_env.add_repo(KernelRepo(f"kernels-test/hostile-meta-{name}", (release,)))
    app = write_project(tmp_path / "app", f'"kernels-test/hostile-meta-{name}" = ">=1"')
    with pytest.raises(error, match=message.replace(".", r"\.").replace("[", r"\[")):
        lock_project(app)
    assert not (app / "kernels.lock").exists()
    result = run_kernels("lock", str(app))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_kernel_depends_cycle_is_locked_once_each(hub_env, tmp_path) -> None:
    hub_env.add_repo(KernelRepo("kernels-test/hostile-cycle-a", (Release("1.0.0", depends=(("kernels-test/hostile-cycle-b", ">=1"),)),)))
    hub_env.add_repo(KernelRepo("kernels-test/hostile-cycle-b", (Release("1.0.0", depends=(("kernels-test/hostile-cycle-a", ">=1"),)),)))
    app = write_project(tmp_path / "app", '"kernels-test/hostile-cycle-a" = ">=1"')
    lock = lock_project(app).lock
    assert lock.repo_ids == ("kernels-test/hostile-cycle-a", "kernels-test/hostile-cycle-b")
    assert lock.get("kernels-test/hostile-cycle-a").dependencies == ("kernels-test/hostile-cycle-b",)
    assert lock.get("kernels-test/hostile-cycle-b").dependencies == ("kernels-test/hostile-cycle-a",)
    assert read_lock(app / "kernels.lock", purpose="use").lock == lock


def test_a_self_dependency_is_locked_without_looping(hub_env, tmp_path) -> None:
    hub_env.add_repo(KernelRepo("kernels-test/hostile-self", (Release("1.0.0", depends=(("kernels-test/hostile-self", ">=1"),)),)))
    app = write_project(tmp_path / "app", '"kernels-test/hostile-self" = ">=1"')
    lock = lock_project(app).lock
    assert lock.repo_ids == ("kernels-test/hostile-self",)


# -- hostile local input ------------------------------------------------------------------


def locked_app(hub_env, tmp_path) -> Path:
    return write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1,<2"', locked=True)


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_an_edited_lock_hash_is_refused_before_any_download(hub_env, tmp_path) -> None:
    app = locked_app(hub_env, tmp_path)
    entries = json.loads((app / "kernels.lock").read_text())
    entries[0]["variants"][CPU_VARIANT]["hash"] = "sha256-" + "0" * 64
    (app / "kernels.lock").write_text(json.dumps(entries, indent=2) + "\n")
    result = run_kernels("download", str(app))
    assert result.returncode == 1
    assert "the Hub serves different content" in result.stderr and "sha256-" + "0" * 64 in result.stderr
    assert not list(cache.cache_root().glob("*/snapshots/*/build/*"))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda entries: entries + [dict(entries[0])], "kernels-test/rotary"),
        (lambda entries: {"kernels": entries}, "kernels.lock"),
        (lambda entries: [{**entries[0], "sha": "../../../etc/passwd"}], "[0].sha"),
        (lambda entries: [{**entries[0], "variants": {"../../x": {"hash": "sha256-" + "0" * 64, "hash_type": "git_lfs_concat"}}}], "../../x"),
    ],
    ids=["repo-twice", "not-a-list", "path-as-sha", "path-as-variant"],
)
def test_a_hostile_lock_is_bad_input(hub_env, tmp_path, mutate, message) -> None:
    app = locked_app(hub_env, tmp_path)
    entries = json.loads((app / "kernels.lock").read_text())
    (app / "kernels.lock").write_text(json.dumps(mutate(entries)))
    before = files_of(app)
    for command in (["download"], ["verify"], ["lock"]):
        result = run_kernels(*command, str(app))
        assert result.returncode == 2, (command, result.stderr)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert files_of(app) == before
    assert not cache.cache_root().exists() or not list(cache.cache_root().glob("*/snapshots/*"))


@pytest.mark.parametrize(
    "table",
    ['[tool]\nkernels = "oops"', '[tool.kernels]\ndependencies = ["kernels-test/rotary"]', "[tool.kernels.dependencies.x]\ny = 1"],
)
def test_a_pyproject_table_of_the_wrong_type_is_bad_input(tmp_path, table) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text(table + "\n")
    before = files_of(app)
    result = run_kernels("lock", str(app), env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2
    assert "pyproject.toml" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert files_of(app) == before


@pytest.mark.parametrize("value", ["maybe", "2", "offline"])
def test_an_offline_flag_that_is_neither_on_nor_off_is_bad_input(hub_env, tmp_path, value) -> None:
    """HF_HUB_OFFLINE is parsed like every other on/off variable: a typo is not 'online'."""
    app = write_project(tmp_path / "app", '"kernels-community/activation" = ">=1,<2"')
    result = run_kernels("lock", str(app), env={"HF_HUB_OFFLINE": value})
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: HF_HUB_OFFLINE={value!r}: expected 1 or 0 (also true/false, yes/no, on/off)"
    assert not (app / "kernels.lock").exists()


# -- hostile Hub listings -----------------------------------------------------------------

HOSTILE_FOLDER = f"build/{CPU_VARIANT}"


def _first_file(entries: list[dict], lfs: bool = False) -> dict:
    return next(e for e in entries if e.get("type") == "file" and e["path"].startswith(HOSTILE_FOLDER + "/")
                and bool(e.get("lfs")) == lfs)


def _added(path: str) -> Callable[[list[dict]], None]:
    return lambda entries: entries.append({"type": "file", "path": path, "oid": "a" * 40, "size": 1})


HOSTILE_LISTINGS = {
    # name: (how the listing is changed, what the one error line names)
    "non-hex-oid": (lambda entries: _first_file(entries).update(oid="../../../../evil"), "../../../../evil"),
    "null-oid": (lambda entries: _first_file(entries).update(oid=None), "malformed git blob id null"),
    "non-hex-lfs-oid": (lambda entries: _first_file(entries, lfs=True)["lfs"].update(oid="zz" * 32), "zz" * 32),
    "lone-surrogate": (_added(f"{HOSTILE_FOLDER}/evil\udc80.py"), "evil\\udc80.py"),
    "file-and-folder": (_added(f"{HOSTILE_FOLDER}/__init__.py/evil.py"), "__init__.py"),
    "long-name": (_added(f"{HOSTILE_FOLDER}/{'e' * 300}.py"), "eeeeeeee"),
    "deep-path": (_added(f"{HOSTILE_FOLDER}/{'d/' * 2000}evil.py"), "d/d/d/d/"),
}


def _run(args: list[str], endpoint: str) -> CliResult:
    return run_kernels(*args, env={"HF_ENDPOINT": endpoint})


def _one_line_naming(result: CliResult, repo_id: str, shown: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert repo_id in result.stderr and shown in result.stderr, result.stderr


@pytest.mark.parametrize("name", sorted(HOSTILE_LISTINGS))
def test_a_malformed_listing_is_refused_by_lock_download_and_verify(hub_env, proxy, tmp_path, name) -> None:
    """The Hub's tree listings are untrusted input: each bad entry is one line naming the
    kernel and path, at lock time already, and nothing reaches the cache."""
    repo_id = f"kernels-test/hostile-listing-{name}"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,)),)))
    locked = write_project(tmp_path / "locked", f'"{repo_id}" = ">=1"', locked=True)
    fresh = write_project(tmp_path / "fresh", f'"{repo_id}" = ">=1"')
    change, shown = HOSTILE_LISTINGS[name]
    root = cache.cache_root()
    kept = set(root.glob("*/blobs/*"))  # the metadata.json the honest lock read and kept

    def rewrite(path: str, data: list[dict]) -> list[dict]:
        # Every listing of the variants' files (the lock's listing of the whole commit, the
        # download's of one variant folder); a listing of the top level alone has none.
        if f"/{repo_id}/tree/" in path and any(str(e.get("path", "")).startswith("build/") for e in data):
            change(data)
        return data

    proxy.rewrite_json = rewrite
    _one_line_naming(_run(["lock", str(fresh)], proxy.url), repo_id, shown)
    assert not (fresh / "kernels.lock").exists()
    _one_line_naming(_run(["download", "--all-variants", str(locked)], proxy.url), repo_id, shown)
    assert not list(root.glob("*/snapshots/*")) and set(root.glob("*/blobs/*")) == kept
    result = _run(["verify", "--online", str(locked)], proxy.url)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert repo_id in result.stdout and shown in result.stdout, result.stdout
