"""Build hooks: a wheel carries its project's kernels.lock, and the loader finds the caller's.

The end-to-end tests build real wheels of the two sample projects in
``tests/fixtures/sample_projects`` with ``pip wheel`` in isolated build environments, fed
from a wheelhouse holding kernel-deps built from this checkout (plus setuptools,
hatchling and kernel-deps' dependencies, fetched once per session from the package
index). The built wheels are installed into a fresh virtualenv, and one process calls
into both packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from kernel_deps.build_hooks import ALLOW_STALE_ENV, BuildLock, StaleLockError, lock_for_build
from kernel_deps.core.errors import LockfileError, PyprojectError, UsageError
from kernel_deps.core.spec import parse_requirement
from kernel_deps.loader import api as loader
from kernel_deps.trust.signers import GITHUB_ISSUER
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock, VariantSigner
from tests.fixtures.projects import write_project
from tests.fixtures.wheels import (  # noqa: F401 - fixtures used by name
    EMBEDDED,
    SAMPLES,
    Samples,
    backends,
    clean_env,
    copy_project,
    dist_info_files,
    run,
    samples,
    wheelhouse,
)

ROTARY = "kernels-test/rotary"
DIST_NAMES = {"setuptools_app": "setuptools-app", "hatch_app": "hatch-app"}


# -- lock_for_build: what a build embeds, decided offline -----------------------------------


def with_lock(project: Path, requirements: dict[str, str]) -> Path:
    """``project`` with a kernels.lock written by :func:`make_lock` (no Hub involved)."""
    (project / "kernels.lock").write_text(make_lock(requirements).to_text())
    return project


def make_lock(requirements: dict[str, str]) -> Lockfile:
    """A lock pinning each repo at v1.0.0 of a made-up commit, locked for the given requirement."""
    kernels = []
    for index, (repo_id, spec) in enumerate(sorted(requirements.items())):
        text = parse_requirement(repo_id, spec, source="test").text
        variants = {"torch-universal": VariantLock(hash="sha256-" + "0" * 64)}
        sha = f"{index:x}" * 40
        kernels.append(LockedKernel(repo_id=repo_id, sha=sha, variants=variants, version="v1.0.0", requirement=text))
    return Lockfile(kernels=tuple(kernels))


@pytest.fixture
def no_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_STALE_ENV, raising=False)


@pytest.mark.parametrize(
    "pyproject",
    [None, '[project]\nname = "app"\n', '[tool.kernels]\nallow-stale-lock = true\n', "[tool.other]\nkernels = 1\n"],
    ids=["no-pyproject", "no-tool-kernels", "no-dependencies-table", "other-tool"],
)
def test_a_project_without_kernel_dependencies_embeds_nothing_and_says_nothing(tmp_path, pyproject, no_opt_out) -> None:
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "kernels.lock").write_text("not even JSON")  # never read without the table
    assert lock_for_build(tmp_path) == BuildLock()


def test_a_lock_in_sync_is_embedded_byte_for_byte(tmp_path, no_opt_out) -> None:
    deps = {ROTARY: "<1.1", "kernels-test/flash": "~=1.0"}
    project = with_lock(write_project(tmp_path, deps), deps)
    found = lock_for_build(project)
    assert found == BuildLock((project / "kernels.lock").read_text(), project / "kernels.lock", ())


def test_a_missing_lock_is_a_warning_and_embeds_nothing(tmp_path, no_opt_out) -> None:
    project = write_project(tmp_path, {ROTARY: "<1.1"})
    found = lock_for_build(project)
    assert (found.text, found.source) == (None, None)
    [warning] = found.warnings
    assert warning == (
        f"{project / 'pyproject.toml'} declares kernels in [tool.kernels.dependencies] but {project / 'kernels.lock'} "
        "does not exist, so the wheel carries no kernel lock and load_kernel() will not find one for this package; "
        f"run 'kernels lock' in {project} and build again"
    )
    # An empty table declares nothing to lock: no warning either.
    assert lock_for_build(write_project(tmp_path / "empty", {})) == BuildLock()


def test_a_stale_lock_refuses_the_build_and_names_every_problem(tmp_path, no_opt_out) -> None:
    project = with_lock(
        write_project(tmp_path, {ROTARY: ">=2", "kernels-test/flash": "~=1.0"}),
        {ROTARY: "<1.1", "kernels-test/activation": ">=1"},
    )
    with pytest.raises(StaleLockError) as info:
        lock_for_build(project)
    problems = info.value.problems
    assert [p.split(" ", 1)[0].rstrip(":") for p in problems] == ["kernels-test/flash", ROTARY, "kernels-test/activation"]
    assert "pyproject.toml ('~=1.0') but not in kernels.lock" in problems[0]
    assert "does not satisfy '>=2'" in problems[1]
    assert "was removed from pyproject.toml" in problems[2]
    message = str(info.value)
    lock, pyproject = project / "kernels.lock", project / "pyproject.toml"
    assert message.startswith(f"refusing to build: {lock} is out of date with {pyproject}, so the wheel would pin")
    assert "".join(f"\n  - {p}" for p in problems) in message
    assert message.endswith(
        f"\nrun 'kernels lock' in {project} and build again; to build with this lock anyway, "
        f"set {ALLOW_STALE_ENV}=1 or add 'allow-stale-lock = true' under [tool.kernels] in pyproject.toml"
    )


def test_a_changed_requirement_is_stale_even_when_the_pin_still_satisfies_it(tmp_path, no_opt_out) -> None:
    project = with_lock(write_project(tmp_path, {ROTARY: ">=0.5"}), {ROTARY: "<1.1"})
    with pytest.raises(StaleLockError, match=r"pyproject.toml asks for '>=0.5' but kernels.lock was locked for '<1.1'"):
        lock_for_build(project)


def test_a_publisher_trusted_on_a_withdrawn_entry_refuses_the_build(tmp_path, no_opt_out) -> None:
    deps = {ROTARY: "<1.1"}
    lock = make_lock(deps)
    trusted = Lockfile(kernels=(replace(lock.kernels[0], trusted_by="pyproject:kernels-test"),))
    project = write_project(tmp_path, deps, trusted=("kernels-test",))
    (project / "kernels.lock").write_text(trusted.to_text())
    assert lock_for_build(project).text == trusted.to_text()  # the entry it relied on is still listed

    write_project(tmp_path, deps, trusted=("other-org",))  # ... and now it is not
    with pytest.raises(StaleLockError) as info:
        lock_for_build(project)
    [problem] = info.value.problems
    assert problem.startswith(f"{ROTARY}: kernels.lock trusts it because [tool.kernels.trust] publishers listed 'kernels-test'")
    assert "no longer lists" in problem


def test_an_invalid_trust_table_fails_the_build_naming_its_line(tmp_path, no_opt_out) -> None:
    deps = {ROTARY: "<1.1"}
    project = with_lock(write_project(tmp_path, deps, trusted=()), deps)
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text + "\n[tool.kernels.trust]\nrequire-signatures = \"yes\"\n")
    line = len(text.splitlines()) + 3
    expected = rf"pyproject.toml:{line}: tool.kernels.trust.require-signatures = \"yes\": expected true or false"
    with pytest.raises(PyprojectError, match=expected):
        lock_for_build(project)


SIGNER = VariantSigner(
    issuer=GITHUB_ISSUER,
    identity="https://github.com/kernels-test/rotary/.github/workflows/build.yaml@refs/heads/main",
    repository="kernels-test/rotary", workflow=".github/workflows/build.yaml", ref="refs/heads/main",
    metadata_sha256="1" * 64,
)  # fmt: skip
IDENTITY = '{ repository = "kernels-test/rotary", workflow = ".github/workflows/build.yaml", ref = "refs/heads/main" }'


@pytest.mark.parametrize(
    "policy, signed, refused",
    [
        (f"identities = [{IDENTITY}]", True, None),
        (f"identities = [{IDENTITY.replace('refs/heads/main', 'refs/tags/v1')}]", True, "not allowed"),
        ("require-signatures = true", False, "records no signer"),
    ],
    ids=["allowed-signer", "signer-no-longer-allowed", "unsigned-while-required"],
)
def test_a_lock_the_signature_policy_no_longer_allows_refuses_the_build(tmp_path, no_opt_out, policy, signed, refused) -> None:
    deps = {ROTARY: "<1.1"}
    kernel = make_lock(deps).kernels[0]
    if signed:
        kernel = replace(kernel, signatures={variant: SIGNER for variant in kernel.variants})
    extra = f'[tool.kernels.trust]\n{policy}\n\n'
    project = write_project(tmp_path, deps, extra=extra, trusted=())
    (project / "kernels.lock").write_text(Lockfile(kernels=(kernel,)).to_text())
    if refused is None:
        assert lock_for_build(project).text == (project / "kernels.lock").read_text()
        return
    with pytest.raises(StaleLockError) as info:
        lock_for_build(project)
    [problem] = info.value.problems
    assert problem.startswith(f"{ROTARY} build torch-universal: ") and refused in problem


@pytest.mark.parametrize("how", ["env-1", "env-true", "pyproject"])
def test_the_stale_check_can_be_opted_out_of(tmp_path, monkeypatch, how) -> None:
    extra = "[tool.kernels]\nallow-stale-lock = true\n\n" if how == "pyproject" else ""
    project = with_lock(write_project(tmp_path, {ROTARY: ">=2"}, extra=extra), {ROTARY: "<1.1"})
    monkeypatch.setenv(ALLOW_STALE_ENV, {"env-1": "1", "env-true": "True", "pyproject": "0"}[how])
    found = lock_for_build(project)
    assert found.text == (project / "kernels.lock").read_text()
    [warning] = found.warnings
    why = f"[tool.kernels] allow-stale-lock = true in {project / 'pyproject.toml'}" if how == "pyproject" else ALLOW_STALE_ENV
    lock, pyproject = project / "kernels.lock", project / "pyproject.toml"
    assert warning.startswith(f"{lock} is out of date with {pyproject}; embedding it anyway because {why}")
    assert ROTARY in warning


def test_invalid_opt_out_values_are_refused(tmp_path, monkeypatch) -> None:
    flag = '[tool.kernels]\nallow-stale-lock = "yes"\n\n'
    project = with_lock(write_project(tmp_path, {ROTARY: "<1.1"}, extra=flag), {ROTARY: "<1.1"})
    monkeypatch.setenv(ALLOW_STALE_ENV, "maybe")
    with pytest.raises(UsageError, match=rf"^{ALLOW_STALE_ENV}='maybe': expected 1 or 0"):
        lock_for_build(project)
    monkeypatch.delenv(ALLOW_STALE_ENV)
    with pytest.raises(PyprojectError, match=r"toml: \[tool.kernels\] allow-stale-lock = 'yes': expected true or false"):
        lock_for_build(project)


def test_an_invalid_lock_or_pyproject_fails_the_build_naming_the_file(tmp_path, no_opt_out) -> None:
    project = write_project(tmp_path, {ROTARY: "<1.1"})
    (project / "kernels.lock").write_text("[{}]")
    with pytest.raises(LockfileError, match=rf"^{project / 'kernels.lock'}: missing key 'repo_id'"):
        lock_for_build(project)
    (project / "pyproject.toml").write_text('[tool.kernels.dependencies]\n"kernels-test/rotary" = true\n')
    with pytest.raises(PyprojectError, match=r"pyproject.toml:2: .*is not a version"):
        lock_for_build(project)
    (project / "pyproject.toml").write_text("[tool.kernels\n")
    # One parser reads pyproject.toml for builds and `kernels lock` alike, so the line is named.
    with pytest.raises(PyprojectError, match=r"pyproject.toml:1: invalid TOML"):
        lock_for_build(project)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_lock_that_is_no_regular_file_fails_the_build_at_once_naming_it(tmp_path, no_opt_out, kind) -> None:
    # Not "does not exist" (a warning, and a wheel without its lock), never a wait on the FIFO.
    import signal

    project = write_project(tmp_path, {ROTARY: "<1.1"})
    lock = project / "kernels.lock"
    os.mkfifo(lock) if kind == "fifo" else lock.symlink_to("/dev/zero")
    why = "a FIFO, not a regular file" if kind == "fifo" else "a character device, not a regular file"
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("lock_for_build waited on the file"))
    signal.alarm(30)
    try:
        with pytest.raises(LockfileError, match=rf"^{lock}: cannot read \({why}\)"):
            lock_for_build(project)
    finally:
        signal.alarm(0)


def test_an_unpacked_sdist_uses_the_lock_from_its_metadata(tmp_path, no_opt_out) -> None:
    project = write_project(tmp_path / "sdist", {ROTARY: "<1.1"})
    copy = tmp_path / "app.egg-info" / "kernels.lock"
    copy.parent.mkdir()
    copy.write_text(make_lock({ROTARY: "<1.1"}).to_text())
    assert lock_for_build(project, fallback=copy) == BuildLock(copy.read_text(), copy, ())
    (project / "kernels.lock").write_text(make_lock({ROTARY: ">=2"}).to_text())  # the project's own wins
    with pytest.raises(StaleLockError):
        lock_for_build(project, fallback=copy)


# -- the loader reads the embedded lock of the caller's distribution ------------------------


def install_fake_dist(site: Path, package: str, dist: str, lock_at: str | None, requirement: str) -> str:
    """A package and its .dist-info (with a lock at ``lock_at`` inside it), as an installer lays them out."""
    (site / package / "sub").mkdir(parents=True)
    for module in ("__init__.py", "sub/__init__.py", "sub/deep.py"):
        (site / package / module).write_text("")
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "RECORD").write_text("".join(f"{package}/{m},,\n" for m in ("__init__.py", "sub/__init__.py", "sub/deep.py")))
    text = make_lock({ROTARY: requirement}).to_text()
    if lock_at is not None:
        (info / lock_at).parent.mkdir(parents=True, exist_ok=True)
        (info / lock_at).write_text(text)
    return text


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("KERNELS_LOCKFILE", raising=False)
    monkeypatch.chdir(tmp_path)
    loader.packages_to_distributions.cache_clear()
    yield site
    loader.packages_to_distributions.cache_clear()


def test_the_loader_reads_the_lock_of_the_calling_modules_distribution(fake_site) -> None:
    setuptools_lock = install_fake_dist(fake_site, "fake_setuptools_pkg", "fake-setuptools-pkg", "kernels.lock", "<1.1")
    hatch_lock = install_fake_dist(fake_site, "fake_hatch_pkg", "fake-hatch-pkg", "extra_metadata/kernels.lock", ">=2")
    install_fake_dist(fake_site, "fake_plain_pkg", "fake-plain-pkg", None, ">=2")
    for caller, dist, text in [
        ("fake_setuptools_pkg", "fake-setuptools-pkg", setuptools_lock),
        ("fake_setuptools_pkg.sub.deep", "fake-setuptools-pkg", setuptools_lock),
        ("fake_hatch_pkg.sub", "fake-hatch-pkg", hatch_lock),
    ]:
        found = loader.find_lock(caller=caller)
        assert (found.origin, found.path) == (f"distribution {dist}", f"{dist} 1.0 (installed distribution)")
        assert found.lock == Lockfile.from_json(text)
    with pytest.raises(loader.LockNotFoundError, match=r"called from fake_plain_pkg\.sub"):
        loader.find_lock(caller="fake_plain_pkg.sub")


# -- real wheels, built and installed --------------------------------------------------------


def build_wheel(project: Path, out: Path, wheelhouse: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path | None]:
    """``pip wheel`` in an isolated build environment installed from the wheelhouse only (offline)."""
    result = run(
        sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps", "--no-index", "--find-links", wheelhouse,
        "--wheel-dir", out, project, env=clean_env(**env),
    )  # fmt: skip
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) <= 1
    return result, (wheels[0] if wheels else None)


@pytest.fixture(scope="module")
def wheels(samples: Samples, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A wheel of each sample project, as pip builds it."""
    out = tmp_path_factory.mktemp("wheels")
    built = {}
    for name, project in samples.projects.items():
        result, wheel = build_wheel(project, out / name, wheelhouse)
        assert result.returncode == 0 and wheel is not None, f"{name} did not build:\n{result.stdout}\n{result.stderr}"
        assert "kernel-deps:" not in result.stdout + result.stderr  # no warning for a lock in sync
        built[name] = wheel
    return built


def test_each_wheel_carries_its_projects_lock(samples: Samples, wheels: dict[str, Path]) -> None:
    for name, wheel in wheels.items():
        files = dist_info_files(wheel)
        assert files[EMBEDDED[name]] == (samples.projects[name] / "kernels.lock").read_bytes()
        assert [path for path in files if path.endswith("kernels.lock")] == [EMBEDDED[name]]


CALL_BOTH = """
import json, sys
import kernel_deps, setuptools_app, hatch_app
from setuptools_app.layers import rotary_kernel as setuptools_rotary
from hatch_app.nn.rotary import rotary_kernel as hatch_rotary

found = {"kernel_deps": kernel_deps.__file__}
for package, call in (("setuptools_app", setuptools_rotary), ("hatch_app", hatch_rotary)):
    module = call()
    origin = module.__kernel_origin__
    found[package] = {
        "file": sys.modules[package].__file__, "module": module.__name__, "version": module.__version__,
        "commit": origin.commit, "lock_origin": origin.lock_origin, "lock_path": origin.lock_path,
    }
print(json.dumps(found))
"""


def test_installed_packages_each_load_the_kernel_their_own_lock_pins(
    samples: Samples, wheels: dict[str, Path], wheelhouse: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv).returncode == 0
    python = venv / "bin" / "python"
    install = run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--find-links", wheelhouse,
        *wheels.values(), env=clean_env(),
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    # torch is too big to install per test: the development environment's packages come
    # last on sys.path, after everything installed in the fresh environment.
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip())
    (site / "zz_development_packages.pth").write_text(sysconfig.get_path("purelib") + "\n")
    elsewhere = tmp_path / "elsewhere"  # no pyproject.toml or kernels.lock here or above
    elsewhere.mkdir()
    result = run(python, "-c", CALL_BOTH, cwd=elsewhere, env=clean_env(HF_HUB_CACHE=str(samples.cache), HF_HUB_OFFLINE="1"))
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)

    assert Path(found["kernel_deps"]).is_relative_to(site)  # the kernel-deps wheel, not this checkout
    commits = samples.hub.repos[ROTARY].commits
    for name, version in (("setuptools_app", "1.0.0"), ("hatch_app", "2.0.0")):
        loaded = found[name]
        assert Path(loaded["file"]).is_relative_to(site)
        assert (loaded["version"], loaded["commit"]) == (version, commits[version])
        assert loaded["commit"] == samples.locked_commit(name)
        assert loaded["lock_origin"] == f"distribution {DIST_NAMES[name]}"
        assert loaded["lock_path"] == f"{DIST_NAMES[name]} 0.1.0 (installed distribution)"
    assert found["setuptools_app"]["module"] != found["hatch_app"]["module"]


@pytest.mark.parametrize("name", list(EMBEDDED), ids=["setuptools", "hatchling"])
def test_a_wheel_built_from_the_sdist_carries_the_lock(
    samples: Samples, backends: Path, wheelhouse: Path, tmp_path: Path, name
) -> None:
    # What `python -m build` and `pip install <sdist>` do: make an sdist, build the wheel from it.
    project = copy_project(samples.projects[name], tmp_path / name)
    backend = {"setuptools_app": "setuptools.build_meta", "hatch_app": "hatchling.build"}[name]
    build_sdist = f"import sys, {backend} as backend; print(backend.build_sdist(sys.argv[1]))"
    made = run(backends, "-c", build_sdist, tmp_path / "sdist", cwd=project, env=clean_env())
    assert made.returncode == 0, made.stdout + made.stderr
    with tarfile.open(tmp_path / "sdist" / made.stdout.strip().splitlines()[-1]) as sdist:
        sdist.extractall(tmp_path / "unpacked", filter="data")
    [unpacked] = (tmp_path / "unpacked").iterdir()
    # hatchling ships the project's lock; setuptools ships the copy in its egg-info folder.
    shipped = {"setuptools_app": "src/setuptools_app.egg-info/kernels.lock", "hatch_app": "kernels.lock"}[name]
    assert (unpacked / shipped).read_bytes() == (project / "kernels.lock").read_bytes()

    result, wheel = build_wheel(unpacked, tmp_path / "out", wheelhouse)
    assert result.returncode == 0 and wheel is not None, result.stdout + result.stderr
    assert "kernel-deps:" not in result.stdout + result.stderr
    assert dist_info_files(wheel)[EMBEDDED[name]] == (project / "kernels.lock").read_bytes()


@pytest.mark.parametrize(
    ("name", "edit", "problem", "opt_out"),
    [
        ("setuptools_app", ('"<1.1"', '">=1.1"'), f"{ROTARY}: the locked v1.0.0 (", {ALLOW_STALE_ENV: "1"}),
        ("hatch_app", ('">=2"', '">=1"'), f"{ROTARY}: pyproject.toml asks for '>=1' but kernels.lock was locked for '>=2'",
         None),
    ],
    ids=["setuptools", "hatchling"],
)
def test_a_stale_lock_fails_the_build_unless_opted_out(
    samples: Samples, wheelhouse: Path, tmp_path: Path, name, edit, problem, opt_out
) -> None:
    project = copy_project(samples.projects[name], tmp_path / name)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(*edit))

    result, wheel = build_wheel(project, tmp_path / "refused", wheelhouse)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and wheel is None
    assert f"kernel-deps: refusing to build: {project / 'kernels.lock'} is out of date with {pyproject}" in output
    assert problem in output
    assert f"run 'kernels lock' in {project} and build again; to build with this lock anyway, set {ALLOW_STALE_ENV}=1" in output
    assert "Traceback" not in output

    if opt_out is None:  # the pyproject.toml way
        pyproject.write_text(pyproject.read_text() + "\n[tool.kernels]\nallow-stale-lock = true\n")
    result, wheel = build_wheel(project, tmp_path / "allowed", wheelhouse, **(opt_out or {}))
    assert result.returncode == 0 and wheel is not None, result.stdout + result.stderr
    assert "embedding it anyway because" in result.stdout + result.stderr
    assert dist_info_files(wheel)[EMBEDDED[name]] == (project / "kernels.lock").read_bytes()


@pytest.mark.parametrize("name", list(EMBEDDED), ids=["setuptools", "hatchling"])
def test_a_missing_lock_builds_with_a_warning_and_no_lock(wheelhouse: Path, tmp_path: Path, name) -> None:
    project = copy_project(SAMPLES / name, tmp_path / name)
    result, wheel = build_wheel(project, tmp_path / "out", wheelhouse)
    assert result.returncode == 0 and wheel is not None, result.stdout + result.stderr
    warning = f"kernel-deps: {project / 'pyproject.toml'} declares kernels in [tool.kernels.dependencies] but"
    assert warning in result.stdout + result.stderr
    assert not [path for path in dist_info_files(wheel) if path.endswith("kernels.lock")]


def test_a_project_without_kernel_dependencies_gets_no_lock_and_no_warning(wheelhouse: Path, tmp_path: Path) -> None:
    project = copy_project(SAMPLES / "setuptools_app", tmp_path / "setuptools_app")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().split("[tool.kernels.trust]")[0])
    (project / "kernels.lock").write_text("[]\n")  # a stray lock is not the project's: it stays out
    result, wheel = build_wheel(project, tmp_path / "out", wheelhouse)
    assert result.returncode == 0 and wheel is not None, result.stdout + result.stderr
    assert "kernel-deps:" not in result.stdout + result.stderr
    assert not [path for path in dist_info_files(wheel) if path.endswith("kernels.lock")]
