"""A build's ``digest`` covers exactly the files the Hugging Face library's covers, and a
digest is met or refused exactly when that library meets or refuses it.

Generated variant folders, full of the names at the edges of the rule (a file or folder
named ``__pycache__`` at the top or nested, a file named ``.pyc``, ``..pyc``, ``x.pyc``, a
nested ``metadata.json``), are hashed by kernels 0.17.2's own ``Digest.hash_variant`` (the
compat install, in a subprocess) and by kernel-deps; then digests built from each side, one
with a key kernel-builder does not write, one missing a file, one naming a file that is
not there, are judged by both (``Metadata.from_bytes`` then ``Digest.validate`` there,
``digest_problems`` here).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kernel_deps.trust import digests
from kernel_deps.trust.signatures import digest_problems
from tests.fixtures.peers import run_peer

# Names at the edges of the coverage rule, and a few plain ones.
NAMES = (
    "__pycache__", ".pyc", "..pyc", "x.pyc", ".x.pyc", "x.PYC", "pyc", "x.pyc.", "__pycache__.d",
    "metadata.json", "metadata.json.sigstore", "a.py", "_ops.py", ".hidden",
)  # fmt: skip

# argv[1]: a file of JSON [{"folder", "algorithm", "candidates": [digest, ...]}]. For each folder: the
# files its Digest.hash_variant covers, and per candidate "ok", "invalid" (Metadata refuses
# it) or the violations Digest.validate names.
JUDGE_WITH_017 = """
import json, sys
from kernels._rust import Digest, DigestAlgorithm, DigestValidationError, Metadata
BASE = {"id": "_edge_0000000", "name": "edge", "version": 1, "license": "apache-2.0",
        "python-depends": [], "backend": {"type": "cpu"}}
out = []
for job in json.loads(open(sys.argv[1]).read()):
    actual = Digest.hash_variant(getattr(DigestAlgorithm, job["algorithm"].upper()), job["folder"])
    verdicts = []
    for candidate in job["candidates"]:
        try:
            declared = Metadata.from_bytes(json.dumps(dict(BASE, digest=candidate)).encode()).digest
        except ValueError:
            verdicts.append("invalid")
            continue
        try:
            declared.validate(actual)
            verdicts.append("ok")
        except DigestValidationError as exc:
            verdicts.append(sorted(str(v) for v in exc.violations))
    out.append({"files": actual.files, "verdicts": verdicts})
print(json.dumps(out))
"""


def make_tree(root: Path, rng: random.Random, depth: int = 0) -> None:
    """A folder of files and subfolders named from NAMES (at least one file at the top)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in rng.sample(NAMES, rng.randint(2, 6) if depth else 8):
        if depth < 3 and rng.random() < 0.3:
            make_tree(root / name, rng, depth + 1)
        else:
            (root / name).write_bytes(f"{root.name}/{name} {rng.random()}".encode())


def files_of(folder: Path) -> dict[str, Path]:
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}


def ours(algorithm: str, files: dict[str, Path]) -> dict:
    """kernel-deps' digest of a folder: each file its rule covers."""
    covered = {path: digests.file_digest(algorithm, p.read_bytes()) for path, p in files.items() if digests.is_covered(path)}
    return {"algorithm": algorithm, "files": covered}


def our_verdict(candidate: dict, files: dict[str, Path]) -> str:
    try:
        problems = digest_problems(json.dumps({"digest": candidate}).encode(), files)
    except ValueError:
        return "refused"
    return "ok" if not problems else "refused"


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
def test_generated_trees_are_covered_and_judged_as_kernels_017_does(tmp_path, algorithm) -> None:
    rng = random.Random(f"digest-parity-{algorithm}")
    jobs, trees = [], []
    for index in range(40):
        folder = tmp_path / f"v{index}"
        make_tree(folder, rng)
        files = files_of(folder)
        mine = ours(algorithm, files)
        covered = sorted(mine["files"])
        candidates = [mine, {**mine, "signed-at": "2026-12-01", "tool": {"name": "kernel-builder"}}]
        if covered:  # one covered file left out
            dropped = dict(mine["files"])
            dropped.pop(rng.choice(covered))
            candidates.append({**mine, "files": dropped})
        absent = [n for n in (".pyc", "sub/.pyc", "x.py") if n not in files]
        candidates.append({**mine, "files": {**mine["files"], absent[0]: digests.file_digest(algorithm, b"")}})
        jobs.append({"folder": str(folder), "algorithm": algorithm, "candidates": candidates})
        trees.append(files)
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    theirs = run_peer("0.17", JUDGE_WITH_017, str(tmp_path / "jobs.json"))
    edge_names_seen = set()
    for job, files, hf in zip(jobs, trees, theirs):
        mine = job["candidates"][0]
        assert mine["files"] == hf["files"], job["folder"]
        for candidate, verdict in zip(job["candidates"], hf["verdicts"]):
            assert our_verdict(candidate, files) == ("ok" if verdict == "ok" else "refused"), (job["folder"], candidate, verdict)
        edge_names_seen |= {p.split("/")[-1] for p in files}
    # The generated trees did reach the edges: each name the rule turns on was in some tree.
    assert {"__pycache__", ".pyc", "..pyc", "x.pyc", "metadata.json"} <= edge_names_seen
    nested = [p for files in trees for p in files if "/" in p and p.split("/")[-1] in ("__pycache__", ".pyc")]
    assert nested, "no nested __pycache__ or .pyc file was generated"


def test_a_digest_kernels_017_accepts_is_accepted() -> None:
    """A ``digest`` with a key kernel-builder does not write, or naming a file ``.pyc``, is one
    that library parses; kernel-deps reads it too (its files, the extra key ignored)."""
    value = digests.file_digest("sha256", b"x")
    parsed = digests.parse_digest({"digest": {"algorithm": "sha256", "files": {".pyc": value, "a/.pyc": value}, "v": 2}})
    assert parsed is not None and dict(parsed.files) == {".pyc": value, "a/.pyc": value}
    for never in ("__pycache__", "a/__pycache__", "a/__pycache__/b.py", "x.pyc", "a/..pyc", "metadata.json"):
        with pytest.raises(digests.InvalidDigest, match="never covers"):
            digests.parse_digest({"digest": {"algorithm": "sha256", "files": {never: value}}})


def test_a_signed_build_with_files_at_the_edges_locks_downloads_and_verifies(hub_env, tmp_path) -> None:
    """A build holding a file named ``.pyc`` (which its digest covers, as kernels 0.17.2's
    does) and files named ``__pycache__`` (which it does not) is locked, downloaded and
    verified; the digest it carries is the one that library computes over its files."""
    from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release, variant_files
    from tests.fixtures.cli import run_kernels
    from tests.fixtures.projects import write_project
    from tests.fixtures.sigstore_ca import Identity, LocalSigstore

    sigstore = LocalSigstore("edges")
    repo_id = "kernels-test/digest-edges"
    edges = ((".pyc", b"a file named .pyc"), ("layers/.pyc", b"nested"), ("ops/__pycache__", b"a file"),
             ("layers/__pycache__", b"nested file"))  # fmt: skip
    release = Release("1.0.0", variants=(CPU_VARIANT,), extra_files=edges, digest="sha256",
                      sign=lambda data, variant: sigstore.sign(data, Identity(repo_id)))  # fmt: skip
    hub_env.add_repo(KernelRepo(repo_id, (release,)))
    project = tmp_path / "app"
    project.mkdir()
    sigstore.write_trusted_root(project / "trusted_root.json")
    trust = ('[tool.kernels.trust]\npublishers = ["kernels-test"]\ntrusted-root = "trusted_root.json"\n'
             "require-signatures = true\n\n")  # fmt: skip
    write_project(project, f'"{repo_id}" = ">=1"\n', extra=trust, trusted=())
    for command in (("lock",), ("download", "--variant", CPU_VARIANT), ("verify",)):
        result = run_kernels(*command, str(project))
        assert result.returncode == 0, (command, result.stdout + result.stderr)
    # The declared digest is kernels 0.17.2's of the build's files (every one of them, written out).
    folder = tmp_path / "built"
    for rel, content in variant_files(KernelRepo(repo_id, (release,)), release, CPU_VARIANT).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(content.data)
    job = [{"folder": str(folder), "algorithm": "sha256", "candidates": []}]
    (tmp_path / "jobs.json").write_text(json.dumps(job))
    theirs = run_peer("0.17", JUDGE_WITH_017, str(tmp_path / "jobs.json"))[0]["files"]
    assert {".pyc", "layers/.pyc"} <= theirs.keys() and not {"ops/__pycache__", "layers/__pycache__"} & theirs.keys()
    from kernel_deps.cache import store as cache
    from kernel_deps.lock.read import read_lock

    lock = read_lock(project / "kernels.lock", purpose="use").lock
    cached = cache.variant_dir(cache.find_repo_dir(repo_id), lock.get(repo_id).sha, CPU_VARIANT)
    assert json.loads((cached / "metadata.json").read_bytes())["digest"]["files"] == theirs
