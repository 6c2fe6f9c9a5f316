"""How many Hub requests `kernels lock` makes, counted by the proxy (behaviour, not timing).

One refs listing per repo, one tree listing per candidate commit (which also shows
whether the main branch holds a ``kernel-status.toml`` redirect, when main is that commit), one read per distinct
``metadata.json`` content, and none at all for a ``metadata.json`` the cache already holds
(a lock keeps each one it reads there, named by its content hash).
"""

from __future__ import annotations

import json

import pytest

from kernel_deps.commands.lock import lock_project
from kernel_deps.core.errors import HubError
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, DEFAULT_VARIANTS, METAL_VARIANT, KernelRepo, Release
from tests.fixtures.faultproxy import by_kind
from tests.fixtures.projects import write_project


def add_kernels(hub_env, prefix: str, count: int, **release) -> list[str]:
    names = [f"kernels-test/{prefix}-{i}" for i in range(count)]
    for name in names:
        hub_env.add_repo(KernelRepo(name, (Release("1.0.0", **release), Release("1.1.0", **release))))
    return names


def test_a_lock_lists_each_repo_and_commit_once_and_reads_each_metadata_once(hub_env, proxy, tmp_path) -> None:
    names = add_kernels(hub_env, "counted", 3)
    project = write_project(tmp_path / "app", "\n".join(f'"{name}" = 1' for name in names))

    lock_project(project, hub=HubClient(endpoint=proxy.url))
    variants = len(DEFAULT_VARIANTS)
    assert by_kind(proxy) == {"refs": 3, "tree": 3, "slash": 3, "file": 3 * variants, "other": 0}
    first = (project / "kernels.lock").read_bytes()

    # Locking again from scratch: the metadata.json files are in the cache, named by the
    # content hash the listing gives, so only refs and listings are asked for.
    (project / "kernels.lock").unlink()
    proxy.reset_counts()
    lock_project(project, hub=HubClient(endpoint=proxy.url))
    assert by_kind(proxy) == {"refs": 3, "tree": 3, "slash": 3, "file": 0, "other": 0}
    assert (project / "kernels.lock").read_bytes() == first


def test_variants_with_the_same_metadata_share_one_read(hub_env, proxy, tmp_path) -> None:
    same = json.dumps({"kernel-depends": [], "python-depends": []}).encode()
    (name,) = add_kernels(hub_env, "shared-metadata", 1, extra_files=(("metadata.json", same),))
    project = write_project(tmp_path / "app", f'"{name}" = 1')
    lock = lock_project(project, hub=HubClient(endpoint=proxy.url)).lock
    assert set(lock.get(name).variants) == {CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT}
    assert by_kind(proxy) == {"refs": 1, "tree": 1, "slash": 1, "file": 1, "other": 0}


def test_a_cached_metadata_that_no_longer_hashes_to_its_name_is_read_again(hub_env, proxy, tmp_path) -> None:
    from kernel_deps.cache import store as cache

    (name,) = add_kernels(hub_env, "damaged-metadata", 1, variants=(CPU_VARIANT,))
    project = write_project(tmp_path / "app", f'"{name}" = 1')
    first = lock_project(project, hub=HubClient(endpoint=proxy.url)).lock
    (blob,) = (cache.find_repo_dir(name) / "blobs").iterdir()
    blob.write_bytes(b'{"kernel-depends": [{"repo-id": "kernels-test/evil", "version": ">=1"}]}')

    (project / "kernels.lock").unlink()
    proxy.reset_counts()
    again = lock_project(project, hub=HubClient(endpoint=proxy.url)).lock
    assert again == first  # the damaged copy was not believed
    assert by_kind(proxy)["file"] == 1
    assert b"evil" not in blob.read_bytes()  # and was replaced by what the Hub serves


def test_metadata_served_unlike_its_listing_is_refused(hub_env, proxy, tmp_path) -> None:
    (name,) = add_kernels(hub_env, "lying-metadata", 1, variants=(CPU_VARIANT,))
    project = write_project(tmp_path / "app", f'"{name}" = 1')
    wrong = "0" * 40

    def rewrite(path: str, data: list[dict]) -> list[dict]:
        for entry in data:
            if entry["path"].endswith("/metadata.json"):
                entry["oid"] = wrong
        return data

    proxy.rewrite_json = rewrite
    with pytest.raises(HubError, match=f"metadata.json: the Hub serves content that differs from its listing .*{wrong}"):
        lock_project(project, hub=HubClient(endpoint=proxy.url))
    assert not (project / "kernels.lock").exists()


def test_a_cache_that_cannot_be_written_costs_requests_not_the_lock(hub_env, proxy, tmp_path, monkeypatch) -> None:
    (name,) = add_kernels(hub_env, "unwritable-cache", 1, variants=(CPU_VARIANT,))
    project = write_project(tmp_path / "app", f'"{name}" = 1')
    not_a_folder = tmp_path / "cache-is-a-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("HF_HUB_CACHE", str(not_a_folder))
    for _ in range(2):
        (project / "kernels.lock").unlink(missing_ok=True)
        proxy.reset_counts()
        assert lock_project(project, hub=HubClient(endpoint=proxy.url)).written
        assert by_kind(proxy)["file"] == 1


def test_twenty_kernels_ask_each_thing_once_and_no_more_than_kernels_016(hub_env, proxy, tmp_path) -> None:
    # The measure: 20 independent kernels, as bench/compare.py locks them. Each
    # request is for something not asked before (refs per repo, listing per commit,
    # metadata.json per variant), and on the Hub, which answers a listing without olah's
    # trailing-slash redirect, they come to no more than kernels 0.16's 101.
    names = add_kernels(hub_env, "twenty", 20)
    project = write_project(tmp_path / "app", "\n".join(f'"{name}" = 1' for name in names))

    lock_project(project, hub=HubClient(endpoint=proxy.url))
    variants = len(DEFAULT_VARIANTS)
    assert by_kind(proxy) == {"refs": 20, "tree": 20, "slash": 20, "file": 20 * variants, "other": 0}
    repeated = {request: n for request, n in proxy.counts.items() if n > 1}
    assert repeated == {}
    assert proxy.total_requests() - by_kind(proxy)["slash"] <= 101
