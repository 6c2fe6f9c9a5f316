"""A Hub that rate-limits (HTTP 429): waited out after Retry-After (seconds or an HTTP date),
else with jittered exponential backoff, for listings and file downloads, within the time
budget; the failure once the budget cannot cover the wait names the rate limit and the budget."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.core.errors import HubUnavailableError
from kernel_deps.hub.backoff import retry_after_seconds
from kernel_deps.hub.client import HubClient
from tests.fixtures.downloads import add_repos, all_verified, snapshot_entries
from tests.fixtures.projects import write_project


def test_retry_after_in_seconds_is_waited_before_the_next_request(hub_env, proxy) -> None:
    proxy.error_schedule = [429]
    proxy.retry_after = "2"
    client = HubClient(endpoint=proxy.url, backoff=0.01, budget=30)
    start = time.monotonic()
    assert client.list_refs("kernels-test/rotary").repo_type == "kernel"
    elapsed = time.monotonic() - start
    assert proxy.counts[("GET", "/api/kernels/kernels-test/rotary/refs")] == 2
    first, second = proxy.answered(2)[:2]
    assert second[0] - first[1] >= 2.0  # the retry came no sooner than the Hub asked
    assert elapsed < 15  # generous: a loaded machine


def test_retry_after_as_an_http_date_is_waited_until_that_time(hub_env, proxy) -> None:
    until = float(int(time.time()) + 4)  # HTTP dates have whole seconds
    proxy.error_schedule = [429]
    proxy.retry_after = formatdate(until, usegmt=True)
    client = HubClient(endpoint=proxy.url, backoff=0.01, budget=30)
    assert client.list_refs("kernels-test/rotary").repo_type == "kernel"
    assert time.time() >= until  # the retry, and so the answer, came after that time
    first, second = proxy.answered(2)[:2]
    assert second[0] - first[1] < 10


def test_a_rate_limit_is_waited_out_past_the_retry_count_while_the_budget_lasts(hub_env, proxy) -> None:
    proxy.error_schedule = [429] * 5  # no Retry-After: exponential backoff
    client = HubClient(endpoint=proxy.url, backoff=0.01, retries=1, budget=30)
    assert client.list_refs("kernels-test/rotary").repo_type == "kernel"
    assert proxy.counts[("GET", "/api/kernels/kernels-test/rotary/refs")] == 6
    timeline = proxy.answered(6)
    gaps = [b[0] - a[1] for a, b in zip(timeline, timeline[1:])]
    assert gaps[-1] > gaps[0]  # the waits grow


@pytest.mark.parametrize("retry_after", [None, "1"], ids=["backoff", "retry-after"])
def test_listings_and_file_downloads_that_are_rate_limited_still_arrive(hub_env, proxy, tmp_path, retry_after) -> None:
    project = write_project(tmp_path / "app", add_repos(hub_env, f"limited-{retry_after}", kernels=1), locked=True)
    proxy.retry_after = retry_after
    proxy.only_paths = lambda path: "/tree/" in path or "/resolve/" in path
    proxy.error_schedule = [429, None, 429, 429, None, 429]  # the first listing, then files
    hub = HubClient(endpoint=proxy.url, backoff=0.05, retries=1, budget=60)
    report = download_project(project, all_variants=True, hub=hub)
    assert len(report.fetched) == 3
    assert all_verified(project)
    assert sum(1 for kind, _ in proxy.faults if kind == "error") == 4
    assert any("/tree/" in path for kind, path in proxy.faults if kind == "error")
    assert any("/resolve/" in path for kind, path in proxy.faults if kind == "error")


def test_a_retry_after_longer_than_the_budget_fails_at_once_naming_the_rate_limit(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "app", add_repos(hub_env, "throttled", kernels=1), locked=True)
    proxy.only_paths = "/resolve/"
    proxy.error_status = 429
    proxy.retry_after = "120"
    proxy.fail_all()
    hub = HubClient(endpoint=proxy.url, backoff=0.01, budget=20)
    start = time.monotonic()
    with pytest.raises(HubUnavailableError) as info:
        download_project(project, hub=hub)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert "is rate-limiting requests (HTTP 429 after 1 attempts; it asked to wait 120 s more" in message
    assert "the 20 s budget of KERNELS_HUB_BUDGET" in message and "raise KERNELS_HUB_BUDGET" in message
    assert "\n" not in message
    assert elapsed < 15  # no point waiting for a wait the budget cannot cover (120 s)
    assert snapshot_entries(cache.cache_root()) == []


def test_a_hub_that_keeps_rate_limiting_is_given_up_when_the_budget_is_spent(hub_env, proxy) -> None:
    proxy.error_status = 429
    proxy.retry_after = "not a number"  # hostile: read as absent, so backing off
    proxy.fail_all()
    client = HubClient(endpoint=proxy.url, backoff=0.2, retries=1, budget=3)
    start = time.monotonic()
    with pytest.raises(HubUnavailableError) as info:
        client.list_refs("kernels-test/rotary")
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert message.startswith("kernels-test/rotary: the Hub at http://127.0.0.1:")
    assert "is rate-limiting requests (HTTP 429 after" in message and "the 3 s budget of KERNELS_HUB_BUDGET" in message
    assert "asked to wait" not in message
    assert proxy.total_requests() > 2  # retried past retries=1
    assert elapsed < 12


@pytest.mark.parametrize(
    ("value", "expected"),
    [("7", 7.0), (" 0 ", 0.0), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("soon", None), ("-3", None),
     ("1.5", None), ("", None), (None, None), ("Wed, 21 Oct 2015 07:28:00", None), ("٣", None)],
)  # fmt: skip
def test_retry_after_is_read_strictly(value, expected) -> None:
    assert retry_after_seconds(value) == expected


def test_retry_after_dates_count_from_now() -> None:
    now = 1_800_000_000.0
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now=now) == 30.0
