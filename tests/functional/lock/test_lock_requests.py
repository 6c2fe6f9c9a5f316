"""How many Hub requests `kernels lock` makes, counted by the proxy (behaviour, not timing).

One refs listing per repo, one tree listing per candidate commit (which also shows
whether the main branch holds a ``kernel-status.toml`` redirect, when main is that commit), one read per distinct
``metadata.json`` content, and none at all for a ``metadata.json`` the cache already holds
(a lock keeps each one it reads there, named by its content hash). For a repo the cache
holds nothing of, one listing more: its main branch's, asked with its refs, so that the
``metadata.json`` files it shows are read at the picked commit beside that commit's own
listing (a wave of requests less per kernel). A listing of a whole
commit is asked as ``tree/<commit>/``, which olah answers without a redirect; a server
that refuses that form is asked without the slash. Independent kernels' requests go
together: 20 kernels take no more waves of requests, one after another, than 3, and a
kernel named by another's ``metadata.json`` one wave more: the ``metadata.json`` of this
machine's build is read at main beside the refs, so the kernels it names are asked for
a wave before the picked commit's listing could name them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernel_deps.commands.lock import lock_project
from kernel_deps.core.errors import HubError
from kernel_deps.hub.client import HubClient
from tests.fixtures.cli import run_kernels
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, DEFAULT_VARIANTS, METAL_VARIANT, KernelRepo, Release
from tests.fixtures.faultproxy import by_kind, waves
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
    # Per kernel: refs, the main branch's listing beside them, the picked commit's listing.
    assert by_kind(proxy) == {"refs": 3, "tree": 2 * 3, "slash": 0, "file": 3 * variants, "other": 0}
    assert {path for _, path in proxy.counts if path.endswith("/tree/main/")} == {
        f"/api/kernels/{name}/tree/main/" for name in names
    }
    # Each commit listed with the trailing slash, the form olah answers without a redirect.
    assert all(path.endswith("/") for _, path in proxy.counts if "/tree/" in path)
    first = (project / "kernels.lock").read_bytes()

    # Locking again from scratch: the metadata.json files are in the cache, named by the
    # content hash the listing gives, so only refs and listings are asked for (and not
    # the main branch's: the cache holds the repo's files).
    (project / "kernels.lock").unlink()
    proxy.reset_counts()
    lock_project(project, hub=HubClient(endpoint=proxy.url))
    assert by_kind(proxy) == {"refs": 3, "tree": 3, "slash": 0, "file": 0, "other": 0}
    assert (project / "kernels.lock").read_bytes() == first


def test_variants_with_the_same_metadata_share_one_read(hub_env, proxy, tmp_path) -> None:
    same = json.dumps({"kernel-depends": [], "python-depends": []}).encode()
    (name,) = add_kernels(hub_env, "shared-metadata", 1, extra_files=(("metadata.json", same),))
    project = write_project(tmp_path / "app", f'"{name}" = 1')
    lock = lock_project(project, hub=HubClient(endpoint=proxy.url)).lock
    assert set(lock.get(name).variants) == {CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT}
    # Read once, early (main's listing shows one content) or not.
    assert by_kind(proxy) == {"refs": 1, "tree": 2, "slash": 0, "file": 1, "other": 0}


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
    # request is for something not asked before (refs per repo, listing per commit, the
    # main branch's listing per repo, metadata.json per variant), with no redirect on the
    # way (olah's trailing-slash one included): kernels 0.16's 101 through the same olah,
    # and the 20 listings of main, which take a wave of requests off every kernel's.
    names = add_kernels(hub_env, "twenty", 20)
    project = write_project(tmp_path / "app", "\n".join(f'"{name}" = 1' for name in names))

    lock_project(project, hub=HubClient(endpoint=proxy.url))
    variants = len(DEFAULT_VARIANTS)
    assert by_kind(proxy) == {"refs": 20, "tree": 2 * 20, "slash": 0, "file": 20 * variants, "other": 0}
    repeated = {request: n for request, n in proxy.counts.items() if n > 1}
    assert repeated == {}
    assert proxy.total_requests() <= 101 + 20


def test_twenty_kernels_take_no_more_waves_of_requests_than_three(hub_env, proxy, tmp_path) -> None:
    # Waves, not wall time: with a round trip far longer than the work between requests,
    # the requests sent together end together, and a request arriving after another one
    # ended is a wave later. Per kernel, refs and the main branch's listing, then the
    # picked commit's listing and the metadata.json files main's listing shows, read at
    # that commit; independent kernels side by side, however many. The local Hub serves one
    # request after another, so a wave of 20 requests ends over 20 times its serving time:
    # the latency stays well above that (the first wave is 40 requests), and each kernel's
    # variants share one metadata.json (one read per kernel), or on a loaded machine the
    # last answers of a wave would come after the first of the next had been asked, and
    # count as a wave of their own.
    proxy.latency = 0.5
    found = {}
    for count in (3, 20):
        names = [f"kernels-test/waves-{count}-{i}" for i in range(count)]
        for name in names:
            metadata = json.dumps({"kernel-depends": [], "python-depends": [], "license": name}).encode()
            release = {"extra_files": (("metadata.json", metadata),)}
            hub_env.add_repo(KernelRepo(name, (Release("1.0.0", **release), Release("1.1.0", **release))))
        project = write_project(tmp_path / f"app-{count}", "\n".join(f'"{name}" = 1' for name in names))
        proxy.reset_counts()
        lock_project(project, hub=HubClient(endpoint=proxy.url))
        assert by_kind(proxy)["file"] == count
        found[count] = waves(proxy)
    assert found[3] == 2
    assert found[20] <= found[3]


ROOT_LISTING = re.compile(r"/api/kernels/[^/]+/[^/]+/tree/[0-9a-f]{40}")


def plain_form_only(proxy, refusal: int) -> None:
    """Make ``proxy`` a Hub that lists a whole commit only when asked without the trailing
    slash (olah itself answers that form with a redirect to the other): the slash form is
    refused with ``refusal``, the plain one forwarded as the slash form olah answers."""
    proxy.answer_json = lambda path: (refusal, {"error": "Not found"}) if ROOT_LISTING.fullmatch(path[:-1]) else None
    proxy.upstream_path = lambda path: path + "/" if ROOT_LISTING.fullmatch(path) else path


@pytest.mark.parametrize("refusal", [404, 400])
def test_a_hub_refusing_the_trailing_slash_is_asked_without_it_once(hub_env, proxy, tmp_path, refusal) -> None:
    repo_id = "kernels-test/no-slash"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    old, new = built.commits["1.0.0"], built.commits["1.1.0"]
    expected = HubClient(endpoint=hub_env.url).list_commit(repo_id, new)
    plain_form_only(proxy, refusal)
    client = HubClient(endpoint=proxy.url)

    assert client.list_commit(repo_id, new) == expected
    listings = {path: n for (_, path), n in proxy.counts.items() if "/tree/" in path}
    assert listings == {f"/api/kernels/{repo_id}/tree/{new}/": 1, f"/api/kernels/{repo_id}/tree/{new}": 1}
    # Once the plain form has answered, the client asks only that.
    proxy.reset_counts()
    assert client.list_commit(repo_id, old).build_files
    assert {path for (_, path) in proxy.counts if "/tree/" in path} == {f"/api/kernels/{repo_id}/tree/{old}"}


def test_a_lock_through_a_hub_refusing_the_trailing_slash_is_the_same_lock(hub_env, proxy, tmp_path) -> None:
    names = add_kernels(hub_env, "plain-form", 3)
    deps = "\n".join(f'"{name}" = 1' for name in names)
    direct = lock_project(write_project(tmp_path / "olah", deps), hub=HubClient(endpoint=proxy.url)).lock
    plain_form_only(proxy, 404)
    proxy.reset_counts()
    assert lock_project(write_project(tmp_path / "hub", deps), hub=HubClient(endpoint=proxy.url)).lock == direct
    listed = [(path, n) for (_, path), n in proxy.counts.items() if "/tree/" in path]
    # Each commit answered in the plain form once; the slash asked at most once per commit
    # (the listings go together, so each may be asked so before the first refusal returns).
    assert sorted(path for path, n in listed if not path.endswith("/") and n == 1) == sorted(
        f"/api/kernels/{name}/tree/{direct.get(name).sha}" for name in names
    )
    assert all(n == 1 for _, n in listed) and len(listed) <= 2 * len(names)


def test_a_missing_commit_is_still_a_missing_commit_on_either_hub(hub_env, proxy) -> None:
    from kernel_deps.core.errors import RevisionNotFoundError

    missing = "0123456789abcdef0123456789abcdef01234567"
    for plain in (False, True):
        if plain:
            plain_form_only(proxy, 404)
        with pytest.raises(RevisionNotFoundError):
            HubClient(endpoint=proxy.url).list_commit("kernels-test/rotary", missing)


def without_main_hints(cache: Path, names: list[str]) -> None:
    """Make ``cache`` hold a file of each of ``names``, as an earlier command leaves it: a lock
    then asks for no main branch's listing, and reads each file once its commit's listing
    names it."""
    for name in names:
        blobs = cache / f"kernels--{name.replace('/', '--')}" / "blobs"
        blobs.mkdir(parents=True)
        (blobs / ("0" * 40)).write_bytes(b"not the content of this name")


def lock_through_the_command(project: Path, proxy, cache: Path) -> bytes:
    result = run_kernels("lock", str(project), env={"HF_ENDPOINT": proxy.url, "HF_HUB_CACHE": str(cache)})
    assert result.returncode == 0, result.stderr
    return (project / "kernels.lock").read_bytes()


def test_a_kernel_named_by_another_takes_one_wave_more_and_the_lock_is_the_same(hub_env, proxy, tmp_path) -> None:
    # A requires C in its metadata.json; B stands alone. Per level of the graph the Hub
    # protocol orders the refs before the commit's listing and a listing before the files
    # it names. With main's listing and this machine's build's metadata.json (at main)
    # asked beside the refs, C is known after the first wave: A's other files are read
    # beside A's listing while C's refs go (two waves), then C's files beside its listing
    # (three). Asked one after another, it was six; with main's listing alone, four.
    a, b, c = (f"kernels-test/named-{x}" for x in "abc")
    hub_env.add_repo(KernelRepo(c, (Release("1.0.0"), Release("1.1.0"))))
    hub_env.add_repo(KernelRepo(a, (Release("1.0.0", depends=((c, ">=1"),)), Release("1.1.0", depends=((c, ">=1"),)))))
    hub_env.add_repo(KernelRepo(b, (Release("1.0.0"), Release("1.1.0"))))
    deps = f'"{a}" = ">=1"\n"{b}" = ">=1"'

    # The lock made the way it was before main's listings: each file read once its
    # commit's listing names it, with no latency.
    without_main_hints(tmp_path / "cache-plain", [a, b, c])
    plain = lock_through_the_command(write_project(tmp_path / "plain", deps), proxy, tmp_path / "cache-plain")
    assert not any(path.endswith("/tree/main/") for _, path in proxy.counts)

    proxy.latency = 0.5
    proxy.reset_counts()
    slow = lock_through_the_command(write_project(tmp_path / "slow", deps), proxy, tmp_path / "cache-slow")
    assert slow == plain
    assert waves(proxy) == 3
    variants = len(DEFAULT_VARIANTS)
    # This machine's build read at main stands for its read at the pick: no request more.
    assert by_kind(proxy) == {"refs": 3, "tree": 2 * 3, "slash": 0, "file": 3 * variants, "other": 0}
    assert {path for _, path in proxy.counts if "/resolve/main/" in path} == {
        f"/kernels/{name}/resolve/main/build/{CPU_VARIANT}/metadata.json" for name in (a, b, c)
    }
    assert {request: n for request, n in proxy.counts.items() if n > 1} == {}


def test_a_main_build_naming_other_kernels_costs_requests_not_the_lock(hub_env, proxy, tmp_path) -> None:
    # This machine's build is read at main, which is past the release picked: the kernel its
    # metadata.json names is asked about in vain, and the lock holds what the pick's files name.
    a, c, d = (f"kernels-test/moved-main-{x}" for x in "acd")
    for name in (c, d):
        hub_env.add_repo(KernelRepo(name, (Release("1.0.0"),)))
    hub_env.add_repo(KernelRepo(a, (Release("1.0.0", depends=((c, ">=1"),)), Release("2.0.0", depends=((d, ">=1"),)))))
    deps = f'"{a}" = "<2"'
    without_main_hints(tmp_path / "cache-plain", [a, c, d])
    plain = lock_through_the_command(write_project(tmp_path / "plain", deps), proxy, tmp_path / "cache-plain")
    proxy.reset_counts()
    hinted = lock_through_the_command(write_project(tmp_path / "hinted", deps), proxy, tmp_path / "cache-hinted")
    assert hinted == plain
    assert c.encode() in hinted and d.encode() not in hinted
    assert ("GET", f"/api/kernels/{d}/refs") in proxy.counts
    assert (f"/kernels/{a}/resolve/main/build/{CPU_VARIANT}/metadata.json") in {path for _, path in proxy.counts}


@pytest.mark.parametrize("main_build", ["missing", "hostile"])
def test_a_main_build_missing_or_hostile_costs_a_request_not_the_lock(hub_env, proxy, tmp_path, main_build) -> None:
    # This machine's build read at main is a guess: a kernel without that build answers 404,
    # a hostile Hub answers anything (here a metadata.json naming a repo id that is none).
    # Either costs that one request; the pick's files are read as before and the lock is
    # the one made with no early read.
    variants = (CUDA_VARIANT, METAL_VARIANT) if main_build == "missing" else DEFAULT_VARIANTS
    (name,) = add_kernels(hub_env, f"main-build-{main_build}", 1, variants=variants)
    guessed = f"/kernels/{name}/resolve/main/build/{CPU_VARIANT}/metadata.json"
    deps = f'"{name}" = 1'
    without_main_hints(tmp_path / "cache-plain", [name])
    plain = lock_through_the_command(write_project(tmp_path / "plain", deps), proxy, tmp_path / "cache-plain")
    if main_build == "hostile":
        named = {"kernel-depends": [{"repo-id": "../../evil", "version": ">=1"}]}
        proxy.answer_json = lambda path: (200, named) if path == guessed else None
    proxy.reset_counts()
    hinted = lock_through_the_command(write_project(tmp_path / "hinted", deps), proxy, tmp_path / "cache-hinted")
    assert hinted == plain
    files = {path for _, path in proxy.counts if "/resolve/" in path}
    assert guessed in files
    assert len(files) == by_kind(proxy)["file"] == len(variants) + 1  # each build once at the pick, and the guess
    assert not any("evil" in path for _, path in proxy.counts)


def misleading_main(change: str):
    """A ``rewrite_json`` giving a main branch's listing other than the commit it is picked
    at: its variant folders renamed, or a ``kernel-status.toml`` beside them."""

    def rewrite(path: str, data: list[dict]) -> list[dict]:
        if not path.endswith("/tree/main/"):
            return data
        if change == "status":
            return [*data, {"type": "file", "oid": "1" * 40, "size": 40, "path": "kernel-status.toml"}]
        for entry in data:
            entry["path"] = entry["path"].replace("torch213-", "torch299-")
        return data

    return rewrite


@pytest.mark.parametrize("change", ["variants", "status"])
def test_a_main_branch_unlike_the_picked_commit_costs_requests_not_the_lock(hub_env, proxy, tmp_path, change) -> None:
    # Main's listing only decides which files are asked for early; a main that moved since
    # the refs were listed, or that is not the release picked, changes no byte of the lock.
    (name,) = add_kernels(hub_env, f"misleading-main-{change}", 1)
    deps = f'"{name}" = 1'
    first = lock_through_the_command(write_project(tmp_path / "first", deps), proxy, tmp_path / "cache-first")
    proxy.rewrite_json = misleading_main(change)
    proxy.reset_counts()
    again = lock_through_the_command(write_project(tmp_path / "again", deps), proxy, tmp_path / "cache-again")
    assert again == first
    files = {path for _, path in proxy.counts if "/resolve/" in path}
    assert all(path.endswith("/metadata.json") for path in files)
    # This machine's build is read at main beside the listing, and stands for its read at
    # the pick, which main's listing shows with that content under any name.
    at_main = {path for path in files if "/resolve/main/" in path}
    assert at_main == {f"/kernels/{name}/resolve/main/build/{CPU_VARIANT}/metadata.json"}
    if change == "variants":  # the other renamed folder asked for at the commit, in vain
        assert sum("torch299-" in path for path in files) == 1
    else:  # the repo may redirect: the other builds are read only once its listing is in
        assert not any("torch299-" in path for path in files)
    assert by_kind(proxy)["file"] == len(files) == len(DEFAULT_VARIANTS) + (1 if change == "variants" else 0)
