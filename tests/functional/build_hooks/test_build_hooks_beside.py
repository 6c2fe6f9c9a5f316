"""Build hooks with the Hugging Face ``kernels`` library installed too.

Both packages register the setuptools ``egg_info.writers`` entry ``kernels.lock``, so a
setuptools build runs both writers on the same file, in the order their distributions
are found. The real kernels 0.16 and 0.17.2 releases are installed beside kernel-deps in
a virtualenv holding setuptools, hatchling and kernel-deps built from this checkout,
before it on ``sys.path`` (``PYTHONPATH``: their writer runs first) or after it (a
``.pth`` file: theirs runs last), and the sample projects are built by calling each
backend's ``build_wheel``, as a build frontend does.
"""

from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path

import pytest

from kernel_deps.lock.formats import to_kernels017
from kernel_deps.lock.read import read_lock
from tests.fixtures.peers import peer_path
from tests.fixtures.wheels import (  # noqa: F401 - fixtures used by name
    EMBEDDED,
    Samples,
    backends,
    clean_env,
    copy_project,
    dist_info_files,
    run,
    samples,
    wheelhouse,
)

BACKEND = {"setuptools_app": "setuptools.build_meta", "hatch_app": "hatchling.build"}
BUILD = "import sys, {backend} as backend; print(backend.build_wheel(sys.argv[1]))"


def build_beside(python: Path, project: Path, out: Path, peer: str, order: str) -> tuple[object, Path | None]:
    """Build ``project``'s wheel with kernels ``peer`` installed beside kernel-deps, found ``order``."""
    paths = str(peer_path(peer))
    # torch and the rest of the development environment, last: kernels imports what it finds.
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip())
    pth = site / "zz_beside.pth"
    env = clean_env()
    if order == "first":
        env["PYTHONPATH"] = paths
        pth.write_text(sysconfig.get_path("purelib") + "\n")
    else:
        pth.write_text("\n".join([*paths.split(os.pathsep), sysconfig.get_path("purelib")]) + "\n")
    try:
        name = project.name
        result = run(python, "-c", BUILD.format(backend=BACKEND[name]), out, cwd=project, env=env)
    finally:
        pth.unlink()
    wheels = sorted(out.glob("*.whl"))
    return result, wheels[0] if wheels else None


def writers_seen(python: Path, peer: str, order: str) -> list[str]:
    """The ``egg_info.writers`` entries named kernels.lock, in the order setuptools runs them."""
    code = (
        "import json; from importlib.metadata import entry_points\n"
        "print(json.dumps([e.value for e in entry_points(group='egg_info.writers') if e.name == 'kernels.lock']))\n"
    )
    with_peer = str(peer_path(peer))
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip())
    env = clean_env(PYTHONPATH=with_peer) if order == "first" else clean_env()
    if order == "last":
        (site / "zz_beside.pth").write_text(with_peer.replace(os.pathsep, "\n") + "\n")
    try:
        return json.loads(run(python, "-c", code, env=env).stdout)
    finally:
        (site / "zz_beside.pth").unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("name", "peer", "order"),
    [
        ("setuptools_app", "0.17", "first"),
        ("setuptools_app", "0.17", "last"),
        ("setuptools_app", "0.16", "first"),
        ("hatch_app", "0.17", "first"),
    ],
)
def test_a_wheel_built_with_both_installed_carries_exactly_one_correct_lock(
    samples: Samples, backends: Path, tmp_path: Path, name: str, peer: str, order: str
) -> None:
    if name == "setuptools_app":  # both writers really run, in this order
        ours = "kernel_deps.build_hooks.setuptools:write_lock"
        seen = writers_seen(backends, peer, order)
        assert ours in seen and len(seen) == 2
        assert (seen.index(ours) == 1) == (order == "first")
    project = copy_project(samples.projects[name], tmp_path / name)
    result, wheel = build_beside(backends, project, tmp_path / "out", peer, order)
    assert wheel is not None, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    locks = {path: data for path, data in dist_info_files(wheel).items() if path.endswith("kernels.lock")}
    assert locks == {EMBEDDED[name]: (project / "kernels.lock").read_bytes()}


@pytest.mark.parametrize("order", ["first", "last"])
def test_a_kernels_017_lock_is_carried_as_it_is_with_a_warning(samples: Samples, backends: Path, tmp_path: Path, order: str) -> None:
    project = copy_project(samples.projects["setuptools_app"], tmp_path / "setuptools_app")
    theirs = to_kernels017(read_lock(project / "kernels.lock", purpose="use").lock)  # what kernels 0.17 reads
    (project / "kernels.lock").write_text(theirs)
    result, wheel = build_beside(backends, project, tmp_path / "out", "0.17", order)
    assert wheel is not None, result.stdout + result.stderr
    assert "was written by Hugging Face kernels 0.17; the wheel carries it as it is" in result.stdout + result.stderr
    locks = {path: data for path, data in dist_info_files(wheel).items() if path.endswith("kernels.lock")}
    assert locks == {"kernels.lock": theirs.encode()}


def test_a_stale_lock_is_refused_with_both_installed(samples: Samples, backends: Path, tmp_path: Path) -> None:
    project = copy_project(samples.projects["setuptools_app"], tmp_path / "setuptools_app")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"<1.1"', '">=1.1"'))
    result, wheel = build_beside(backends, project, tmp_path / "out", "0.17", "first")
    assert wheel is None
    assert "kernel-deps: refusing to build:" in result.stdout + result.stderr
