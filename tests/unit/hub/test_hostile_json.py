"""Hostile JSON from outside (a kernel's metadata.json, the Hub's listings, the cache, the
lock): every document goes through one parse, and what it cannot take is one line naming
the kernel, commit and file, never a traceback; JSON's null is shown as ``null``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import HubError
from kernel_deps.core.hashing import git_blob_id, variant_hash
from kernel_deps.loader.api import get_kernel
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock, write_lockfile
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project

DEEP = b"[" * 100_000 + b"]" * 100_000
HUGE_INT = b'{"kernel-depends": [], "size": 1' + b"0" * 5_000 + b"}"
HOSTILE = {"deep": (DEEP, "nested more than 64 deep"), "huge-int": (HUGE_INT, "an integer of 5001 digits")}


def one_line_error(result: CliResult, exit_code: int, *named: str) -> str:
    """The single stderr line of a failed command, checked to name everything in ``named``."""
    assert result.returncode == exit_code, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines[-5:]
    for part in named:
        assert part in lines[0], (part, lines[0])
    return lines[0]


# -- a kernel's metadata.json on the Hub ----------------------------------------------------


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_metadata_is_one_line_for_lock_add_json_and_get_kernel(hub_env, tmp_path, case) -> None:
    data, reason = HOSTILE[case]
    repo_id = f"kernels-test/hostile-json-{case}"
    release = Release("1.0.0", variants=(CPU_VARIANT,), extra_files=(("metadata.json", data),))
    commit = hub_env.add_repo(KernelRepo(repo_id, (release,))).commits["1.0.0"]
    named = (f"{repo_id}@{commit[:12]}", f"build/{CPU_VARIANT}/metadata.json", reason)

    app = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"')
    one_line_error(run_kernels("lock", str(app)), 1, *named)
    assert not (app / "kernels.lock").exists()

    result = run_kernels("lock", "--json", str(app))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    document = json.loads(result.stdout)  # one JSON document, nothing else
    assert document["ok"] is False and document["exit_code"] == 1
    assert all(part in document["error"] for part in named)

    other = write_project(tmp_path / "other", '"kernels-test/rotary" = ">=1,<2"', locked=True)
    before = {name: (other / name).read_bytes() for name in ("pyproject.toml", "kernels.lock")}
    one_line_error(run_kernels("add", repo_id, str(other)), 1, *named)
    assert {name: (other / name).read_bytes() for name in before} == before

    with pytest.raises(HubError) as caught:
        get_kernel(repo_id, version=1)
    assert all(part in str(caught.value) for part in named) and "\n" not in str(caught.value)


def test_a_listing_with_an_integer_past_the_bound_is_refused(hub_env, proxy, tmp_path, monkeypatch) -> None:
    """The Hub's API answers go through the same parse: a size of 1,000 digits, which Python
    would read, is not one a tree listing can hold."""
    repo_id = "kernels-test/hostile-json-listing"
    commit = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,)),))).commits["1.0.0"]

    def lie(path: str, entries: object) -> object:
        if repo_id in path and isinstance(entries, list):
            return [{**entry, "size": 10**1000} if entry.get("type") == "file" else entry for entry in entries]
        return entries

    proxy.rewrite_json = lie
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    app = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"')
    one_line_error(run_kernels("lock", str(app)), 1, f"{repo_id}@{commit[:12]}", "tree listing", "1001 digits")
    assert not (app / "kernels.lock").exists()


def test_null_in_kernel_depends_is_shown_as_null(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/hostile-json-null"
    metadata = b'{"kernel-depends": [{"repo-id": "kernels-test/rotary", "version": null}]}'
    release = Release("1.0.0", variants=(CPU_VARIANT,), extra_files=(("metadata.json", metadata),))
    hub_env.add_repo(KernelRepo(repo_id, (release,)))
    app = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"')
    line = one_line_error(run_kernels("lock", str(app)), 1, "version = null }: null is not a version")
    assert "None" not in line


# -- what the cache holds -------------------------------------------------------------------

PARENT, CHILD = "kernels-test/hostile-json-parent", "kernels-test/hostile-json-child"
PARENT_SHA, CHILD_SHA = "1" * 40, "2" * 40
VARIANT = "torch-universal"


def cached_pair(folder: Path, root: Path, parent_metadata: bytes) -> Path:
    """A project locking PARENT (which depends on CHILD) with both variants in the cache at
    ``root``, placed by kernel-deps' own cache code, PARENT's metadata.json as given."""
    write_project(folder, {PARENT: ">=1"})
    kernels = []
    for repo_id, sha, files in (
        (PARENT, PARENT_SHA, {"metadata.json": parent_metadata, "parent/__init__.py": b""}),
        (CHILD, CHILD_SHA, {"metadata.json": b"{}\n", "child/__init__.py": b""}),
    ):
        repo = cache.repo_dir(repo_id, root=root)
        names = {}
        for rel, data in files.items():
            names[rel] = git_blob_id(data)
            cache.blob_path(repo, names[rel]).parent.mkdir(parents=True, exist_ok=True)
            cache.blob_path(repo, names[rel]).write_bytes(data)
        cache.place_variant(repo, sha, VARIANT, names)
        variants = {VARIANT: VariantLock(hash=variant_hash(names.items()))}
        dependencies = (CHILD,) if repo_id == PARENT else ()
        kernels.append(LockedKernel(repo_id=repo_id, sha=sha, variants=variants, version="v1.0.0", requirement=">=1",
                                    dependencies=dependencies))  # fmt: skip
    write_lockfile(folder / "kernels.lock", Lockfile(kernels=tuple(kernels)))
    return folder


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_tree_reads_requirements_from_the_lock_and_never_a_hostile_cached_metadata_json(
    tmp_path, monkeypatch, case
) -> None:
    """tree tells what a kernel requires of its dependency from the lock's kernel_depends; a
    cached metadata.json, however hostile, is not read (no error, no traceback, no guess)."""
    data, _reason = HOSTILE[case]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "cache"))
    app = cached_pair(tmp_path / "app", tmp_path / "cache", data)
    result = run_kernels("tree", "--json", str(app))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    (parent,) = json.loads(result.stdout)["kernels"]
    assert [(d["repo_id"], d["requirement"]) for d in parent["dependencies"]] == [(CHILD, None)]

    lock = json.loads((app / "kernels.lock").read_text())
    for entry in lock:
        if entry["repo_id"] == PARENT:
            entry["kernel_depends"] = {CHILD: [">=1,<2"]}
    (app / "kernels.lock").write_text(json.dumps(lock, indent=2))
    result = run_kernels("tree", "--json", str(app))
    assert result.returncode == 0, result.stderr
    (parent,) = json.loads(result.stdout)["kernels"]
    assert [(d["repo_id"], d["requirement"]) for d in parent["dependencies"]] == [(CHILD, ">=1,<2")]


def test_a_hostile_manifest_is_no_record_and_the_files_are_still_checked(cached) -> None:
    """The cache's manifest names a variant's files; one kernel-deps cannot read is ignored,
    and the variant is still hashed against the lock."""
    project, folder = cached
    repo = folder.parents[3]
    commit = folder.parents[1].name
    manifest = cache.manifest_path(repo, commit, folder.name)
    assert manifest.is_file()
    manifest.write_bytes(DEEP)
    result = run_kernels("verify", str(project))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (folder / "startup" / "_ops.py").unlink()
    (folder / "startup" / "_ops.py").write_bytes(b"OPS = ('changed',)\n")
    result = run_kernels("verify", str(project))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]


# -- the lock -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 64 deep"),
        ("[" * 100 + "]" * 100, "nested more than 64 deep"),  # within Python's limit, past ours
        ('[{"repo_id": "kernels-test/rotary", "sha": 1' + "0" * 5_000 + "}]", "an integer of 5001 digits"),
        ('[{"repo_id": "kernels-test/rotary", "repo_id": "kernels-test/x"}]', "has the key 'repo_id' twice"),
    ],
    ids=["deep", "deep-100", "huge-int", "duplicate-key"],
)
def test_a_hostile_lock_is_one_line_naming_it_for_verify(tmp_path, monkeypatch, text, reason) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "cache"))
    app = write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1,<2"')
    (app / "kernels.lock").write_text(text)
    line = one_line_error(run_kernels("verify", str(app)), 2, "kernels.lock: ", reason, "kernels lock")
    assert "0" * 40 not in line and "[[[" not in line


def test_null_in_a_lock_is_shown_as_null(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "cache"))
    app = write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1,<2"')
    (app / "kernels.lock").write_text(json.dumps([None, {"repo_id": None}]))
    line = one_line_error(run_kernels("verify", str(app)), 2, "invalid value null in '[0]'")
    assert "None" not in line


# -- pyproject.toml -------------------------------------------------------------------------


def test_a_major_of_400_digits_is_refused_and_quoted_briefly(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    app = write_project(tmp_path / "app", '"kernels-test/rotary" = 1' + "0" * 400)
    named = ("pyproject.toml", '"kernels-test/rotary" = 1000', "(401 digits)", "a major version of more than 9 digits")
    line = one_line_error(run_kernels("lock", str(app)), 2, *named)
    assert "0" * 40 not in line and not (app / "kernels.lock").exists()
    # Nine digits are still a major (a date-like v20240101 branch, say); offline, the Hub is what stops it.
    write_project(app, '"kernels-test/rotary" = 999999999')
    one_line_error(run_kernels("lock", str(app)), 1, "HF_HUB_OFFLINE")


# -- kernel-status.toml ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('kind = "retired"\n', 'kind = "retired", a status this version of kernel-deps does not understand'),
        ("kind = 3\n", "kind = 3, a status this version of kernel-deps does not understand"),
        ('destination = "org/new"\n', "no kind, a status this version of kernel-deps does not understand"),
        ('kind = "redirect"\n', 'a redirect without a destination; expected destination = "org/name"'),
    ],
)
def test_a_status_file_kernel_deps_does_not_understand_says_so(text: str, said: str) -> None:
    from kernel_deps.core.errors import InvalidKernelMetadataError
    from kernel_deps.hub.redirects import parse_kernel_status

    with pytest.raises(InvalidKernelMetadataError) as caught:
        parse_kernel_status("org/old", text.encode(), "org/old@0123456789ab: kernel-status.toml")
    message = str(caught.value)
    assert message.startswith(f"org/old@0123456789ab: kernel-status.toml: {said}")
    assert "pin a revision" not in message and "None" not in message
    if "kind" in said:
        assert message.endswith("upgrade kernel-deps if a newer one knows it, or ask the owners of org/old about the file")
