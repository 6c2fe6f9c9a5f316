"""Which installed distribution's kernels.lock a caller gets: a package no distribution
provides falls through to the project search (and its clear error), a script's own
``__main__`` never takes the lock of a distribution that installs a top-level ``__main__``,
and a broken lock shipped in a distribution is named by that distribution.

Distributions are real folders on ``sys.path`` with a ``.dist-info``; no lookup is mocked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_deps.core.errors import LockfileError
from kernel_deps.loader.api import LockNotFoundError, find_lock
from tests.fixtures.cached_project import REPO_ID, write_cached_project


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """An empty site folder on ``sys.path``; no lock in the environment nor around the working directory."""
    monkeypatch.delenv("KERNELS_LOCKFILE", raising=False)
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above: only a distribution could answer
    return folder


def _install(site: Path, package: str, dist: str, lock_text: str) -> None:
    """A distribution installed in ``site`` providing top-level ``package`` and shipping ``lock_text``."""
    (site / package).mkdir()
    (site / package / "__init__.py").write_text("")
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text(f"{package}\n")
    (info / "kernels.lock").write_text(lock_text)


def test_a_caller_no_distribution_provides_gets_the_usual_lock_not_found(site) -> None:
    with pytest.raises(LockNotFoundError) as info:
        find_lock(caller="emblookup_nowhere.tool")
    assert str(info.value).startswith("no kernels.lock found (called from emblookup_nowhere.tool): pass lockfile=")


def test_a_script_never_takes_the_lock_of_a_distribution_installing_a_top_level_main(site, tmp_path) -> None:
    # Some wheels wrongly install a top-level __main__; a script run as `python app.py`
    # is __main__ too, and must not be served that wheel's lock.
    lock = write_cached_project(tmp_path / "elsewhere", tmp_path / "cache") / "kernels.lock"
    _install(site, "__main__", "emblookup-stray-main", lock.read_text())
    with pytest.raises(LockNotFoundError, match=r"^no kernels.lock found \(called from __main__\)"):
        find_lock(caller="__main__")
    assert find_lock(caller="__main__", lockfile=lock).lock.get(REPO_ID) is not None  # the lock itself is fine


def test_a_broken_lock_shipped_in_a_distribution_is_named_by_that_distribution(site) -> None:
    _install(site, "emblookup_broken", "emblookup-broken", "[{not json")
    with pytest.raises(LockfileError) as info:
        find_lock(caller="emblookup_broken.tool")
    assert str(info.value).startswith("emblookup-broken:kernels.lock: not valid JSON (line 1 column 3")
