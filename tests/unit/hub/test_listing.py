"""list_versions against the local Hub: refs, kinds, commits, variant counts, repo type."""

from __future__ import annotations

import pytest

from kernel_deps.commands.versions import ListedVersion, VersionListing, list_versions
from kernel_deps.resolve.newest import requirement_for_newest
from kernel_deps.core.errors import OfflineError, RepoNotFoundError, UsageError
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release


def variant_count(built, release: str) -> int:
    return len({path.split("/")[1] for path in built.files[release] if path.startswith("build/")})


def test_versions_newest_first_with_commits_and_variant_counts(hub_env) -> None:
    built = hub_env.repos["kernels-test/activation"]
    listing = list_versions("kernels-test/activation")
    assert isinstance(listing, VersionListing)
    assert (listing.repo_id, listing.repo_type, listing.is_legacy) == ("kernels-test/activation", "kernel", False)
    expected = [
        ("v2", "branch", "2", "2.0.0"),
        ("v2.0.0", "tag", "2.0.0", "2.0.0"),
        ("v1", "branch", "1", "1.2.0"),
        ("v1.3.0rc1", "tag", "1.3.0rc1", "1.3.0rc1"),
        ("v1.2.0", "tag", "1.2.0", "1.2.0"),
        ("v1.1.0", "tag", "1.1.0", "1.1.0"),
        ("v1.0.0", "tag", "1.0.0", "1.0.0"),
    ]
    assert listing.versions == tuple(
        ListedVersion(ref, kind, version, built.commits[release], variant_count(built, release))
        for ref, kind, version, release in expected
    )
    # The sample's releases differ in their builds: the counts are read per commit.
    assert listing.versions[4].variants == 4 and listing.versions[5].variants == 3


def test_each_commit_is_listed_once_through_the_given_client(hub_env, proxy) -> None:
    listing = list_versions("kernels-test/activation", hub=HubClient(endpoint=proxy.url))
    distinct = {v.commit for v in listing.versions}
    assert len(distinct) == 5 < len(listing.versions)  # v2 and v1 share commits with tags
    assert proxy.requests_matching("/tree/") == len(distinct)
    assert proxy.requests_matching("/refs") == 1


def test_branches_only_and_legacy_model_repos(hub_env) -> None:
    flash = hub_env.repos["kernels-test/flash"]
    listing = list_versions("kernels-test/flash")
    assert [(v.ref, v.kind, v.commit, v.variants) for v in listing.versions] == [
        ("v2", "branch", flash.commits["2.0.0"], 3),
        ("v1", "branch", flash.commits["1.1.0"], 3),
    ]
    legacy = list_versions("kernels-test/legacy-gelu")
    assert (legacy.repo_type, legacy.is_legacy) == ("model", True)
    assert [v.ref for v in legacy.versions] == ["v0", "v0.2.0", "v0.1.0"]


def test_a_repo_without_versions_lists_none_and_cannot_be_added_by_name(hub_env) -> None:
    repo_id = "kernels-test/listing-untagged"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), tagged=False),)))
    built.git("branch", "-D", "v1")  # only main is left: no ref names a version
    listing = list_versions(repo_id)
    assert (listing.repo_type, listing.versions) == ("kernel", ())
    with pytest.raises(UsageError, match=f"{repo_id} has no versions .*add it as {repo_id}@REVISION"):
        requirement_for_newest(repo_id)


def test_the_requirement_for_the_newest_release(hub_env) -> None:
    assert requirement_for_newest("kernels-test/activation") == ">=2.0.0,<3"  # the rc is skipped
    assert requirement_for_newest("kernels-test/flash") == 2  # branches only: the newest major


def test_hub_errors_propagate(hub_env, monkeypatch) -> None:
    with pytest.raises(RepoNotFoundError, match="kernels-test/no-such-kernel"):
        list_versions("kernels-test/no-such-kernel")
    with pytest.raises(UsageError, match="invalid kernel repo id"):
        list_versions("not-a-repo-id")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError):
        list_versions("kernels-test/activation")
