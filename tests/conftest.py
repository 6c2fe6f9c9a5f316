"""Shared fixtures: the sample kernel catalogue served by a local olah Hub."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.fixtures.builder import BuiltRepo, KernelRepo, build_catalogue, build_repo
from tests.fixtures.localhub import LocalHub

if TYPE_CHECKING:
    from tests.fixtures.sigstore_ca import LocalSigstore


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cuda", action="store_true", help="also run the tests marked cuda (they need a CUDA device)")
    parser.addoption(
        "--container", action="store_true", help="also run the tests marked container (make container-test)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs a CUDA device and a CUDA build of torch; runs only with --cuda")
    config.addinivalue_line(
        "markers", "container: builds images with podman (slow, system packages); runs only with --container"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --cuda, CUDA tests are deselected (never skipped): `make test` runs on CPU machines.
    Without --container, so are the container tests: `make container-test` runs them."""
    for marker in ("cuda", "container"):
        if config.getoption(f"--{marker}"):
            continue
        deselected = [item for item in items if item.get_closest_marker(marker)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not item.get_closest_marker(marker)]


@pytest.fixture(autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test keeps kernel-deps' state (its verification receipts and their key) in a
    folder of its own, never in the developer's ~/.local/state; the folder is returned."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


@dataclass
class HubWorld:
    """The running local Hub and the repositories it serves."""

    hub: LocalHub
    repos: dict[str, BuiltRepo]

    @property
    def url(self) -> str:
        return self.hub.url

    def add_repo(self, spec: KernelRepo) -> BuiltRepo:
        """Build another repo into the served mirrors (use a unique repo id per test)."""
        built = build_repo(self.hub.mirrors, spec)
        self.repos[spec.repo_id] = built
        return built


@pytest.fixture(scope="session")
def local_hub(tmp_path_factory: pytest.TempPathFactory) -> HubWorld:
    """olah on 127.0.0.1 serving the sample catalogue, for the whole session."""
    root = tmp_path_factory.mktemp("hub")
    repos = build_catalogue(root / "mirrors")
    hub = LocalHub(root / "mirrors", root / "olah").start()
    yield HubWorld(hub, repos)
    hub.stop()


@pytest.fixture
def hub_env(local_hub: HubWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HubWorld:
    """Point kernel-deps and huggingface_hub at the local Hub with an empty cache."""
    monkeypatch.setenv("HF_ENDPOINT", local_hub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)  # read by huggingface_hub, and so by kernel-deps
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("KERNELS_CACHE", raising=False)
    return local_hub


@pytest.fixture
def proxy(local_hub: HubWorld):
    """A fault-injecting proxy in front of the local Hub (faults off until a test sets them)."""
    from tests.fixtures.faultproxy import FaultProxy

    with FaultProxy(local_hub.url, seed=1234) as fault_proxy:
        yield fault_proxy


@pytest.fixture
def listing_hub(local_hub: HubWorld):
    """A fault proxy in front of the local Hub that also lists an organization's repos, as the
    Hub does (tests/fixtures/hub_listing.py); its faults apply to the listing too."""
    from tests.fixtures.faultproxy import FaultProxy
    from tests.fixtures.hub_listing import OrgListing

    with FaultProxy(local_hub.url, seed=1234) as fault_proxy:
        fault_proxy.answer_request = OrgListing(local_hub.hub.mirrors)
        yield fault_proxy


@pytest.fixture(scope="session")
def local_sigstore() -> LocalSigstore:
    """A Sigstore of our own (CA, CT log, transparency log) whose bundles sigstore-python accepts offline."""
    from tests.fixtures.sigstore_ca import LocalSigstore

    return LocalSigstore("kernels-test")


IMG2GRAY_VERSIONS = ("1.0.0", "1.1.0")


@pytest.fixture(scope="session")
def img2gray_hub(local_hub: HubWorld) -> HubWorld:
    """The local Hub also serving kernels-test/img2gray: a real op compiled for this machine."""
    from tests.fixtures.img2gray_kernel import REPO_ID, build_cpu_variant, img2gray_repo

    if REPO_ID not in local_hub.repos:
        local_hub.add_repo(img2gray_repo({v: build_cpu_variant(v) for v in IMG2GRAY_VERSIONS}))
    return local_hub


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A project locked and cached without the Hub; (project, its variant folder)."""
    from kernel_deps.cache import store as cache
    from tests.fixtures.cached_project import COMMIT, REPO_ID, VARIANT, write_cached_project
    from tests.fixtures.cli import run_kernels

    root = tmp_path / "cache"
    monkeypatch.setenv("KERNELS_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    project = write_cached_project(tmp_path / "app", root)
    folder = cache.variant_dir(cache.repo_dir(REPO_ID, root=root), COMMIT, VARIANT)
    assert run_kernels("verify", str(project)).returncode == 0
    return project, folder
