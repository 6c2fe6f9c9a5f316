"""The kernel repo builder makes real, reproducible git repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.fixtures.builder import (
    CATALOGUE,
    CPU_VARIANT,
    build_catalogue,
    git_blob_id,
    lfs_pointer,
    repo_path,
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_same_description_gives_same_commit_shas(tmp_path: Path) -> None:
    first = build_catalogue(tmp_path / "one")
    second = build_catalogue(tmp_path / "two")
    assert {r: b.commits for r, b in first.items()} == {r: b.commits for r, b in second.items()}
    assert {r: b.tags for r, b in first.items()} == {r: b.tags for r, b in second.items()}
    # Annotated tag objects are reproducible too, not just the commits they point at.
    one = _git(first["kernels-test/activation"].path, "rev-parse", "v1.1.0")
    two = _git(second["kernels-test/activation"].path, "rev-parse", "v1.1.0")
    assert one == two and _git(first["kernels-test/activation"].path, "cat-file", "-t", "v1.1.0") == "tag"


def test_layout_refs_and_lfs_objects(tmp_path: Path) -> None:
    built = build_catalogue(tmp_path)
    activation = built["kernels-test/activation"]
    assert activation.path == tmp_path / "kernels" / "kernels-test" / "activation"
    assert (tmp_path / "models" / "kernels-test" / "legacy-gelu" / ".git").is_dir()
    assert not (tmp_path / "kernels" / "kernels-test" / "legacy-gelu").exists()

    refs = _git(activation.path, "for-each-ref", "--format=%(refname)")
    assert {"refs/heads/main", "refs/heads/v1", "refs/heads/v2", "refs/tags/v1.0.0", "refs/tags/v1.3.0rc1"} <= set(refs.split())
    # v1 tracks the newest final 1.x release, not the later pre-release.
    assert _git(activation.path, "rev-parse", "v1") == activation.commits["1.2.0"]
    assert _git(activation.path, "rev-parse", "main") == activation.commits["2.0.0"]
    assert "refs/tags" not in _git(built["kernels-test/flash"].path, "for-each-ref")

    commit = activation.commits["1.0.0"]
    files = activation.files["1.0.0"]
    listed = _git(activation.path, "ls-tree", "-r", commit, "build/")
    paths = {line.split("\t")[1] for line in listed.splitlines()}
    assert paths == set(files)
    assert f"build/{CPU_VARIANT}/__pycache__/__init__.cpython-311.pyc" in paths
    assert f"build/{CPU_VARIANT}/layers/__init__.py" in paths

    lfs = [(p, c) for p, c in files.items() if c.lfs]
    assert lfs, "compiled variants carry an LFS shared object"
    for path, content in lfs:
        committed = _git(activation.path, "show", f"{commit}:{path}").encode() + b"\n"
        assert committed == lfs_pointer(content.data)
        oid = content.lfs_sha256
        stored = activation.path / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
        assert stored.read_bytes() == content.data
    for path, content in files.items():
        blob = _git(activation.path, "rev-parse", f"{commit}:{path}")
        assert blob == git_blob_id(content.committed)


def test_catalogue_has_dependencies_and_a_conflicting_pair() -> None:
    by_id = {spec.repo_id: spec for spec in CATALOGUE}
    attention = by_id["kernels-test/attention"]
    assert dict(attention.releases[-1].depends) == {"kernels-test/rotary": ">=2"}
    assert any(r.depends for r in by_id["kernels-test/layer-norm"].releases)
    assert repo_path(Path("/m"), by_id["kernels-test/legacy-gelu"]) == Path("/m/models/kernels-test/legacy-gelu")
