"""Publisher trust at lock time: every locked kernel comes from a publisher the Hub trusts
(``GET /api/organizations/<org>/overview`` -> ``trustedKernelPublisher``) or one the
project allows in ``[tool.kernels.trust] publishers``; otherwise nothing is written.

The local Hub (olah) has no organizations API, so a front (the fault proxy answering
that API) plays a Hub that has one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import trust_table, write_project

ORG_API = "/api/organizations/"


def overview(trusted: dict[str, object]):
    """An organizations API answering ``trusted[org]`` (a bool, or an HTTP status) for each org."""

    def answer(path: str):
        if not path.startswith(ORG_API):
            return None
        org = path[len(ORG_API):].partition("/")[0]
        found = trusted.get(org, 404)
        if isinstance(found, bool):
            return 200, {"name": org, "trustedKernelPublisher": found}
        return found, {"error": "no such organization"}

    return answer


def files_of(project: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(project.iterdir()) if p.is_file()}


def lock_through(proxy, project: Path, *args: str, **env: str):
    return run_kernels(*args, str(project), env={"HF_ENDPOINT": proxy.url, **env})


@pytest.fixture
def untrusting(tmp_path: Path, hub_env) -> Path:
    """A project asking for layer-norm (which depends on activation) that allows no publisher."""
    return write_project(tmp_path / "app", {"kernels-test/layer-norm": ">=0.1"}, trusted=())


def test_a_publisher_the_hub_trusts_is_locked_and_asked_about_once(untrusting: Path, proxy) -> None:
    proxy.answer_json = overview({"kernels-test": True})
    result = lock_through(proxy, untrusting, "lock")
    assert result.returncode == 0, result.stderr
    assert (untrusting / "kernels.lock").is_file()
    # Two kernels of one organization: its overview is asked for once in the run.
    assert proxy.requests_matching(ORG_API + "kernels-test/overview") == 1


def test_a_publisher_the_hub_does_not_trust_is_refused_naming_the_kernel_who_asked_and_the_line(
    untrusting: Path, proxy
) -> None:
    proxy.answer_json = overview({"kernels-test": False})
    before = files_of(untrusting)
    result = lock_through(proxy, untrusting, "lock")
    assert result.returncode == 1
    line = result.stderr.strip()
    assert "\n" not in line
    assert "kernels-test/layer-norm (asked for by pyproject.toml)" in line
    assert "kernels-test/activation (asked for by kernels-test/layer-norm)" in line
    assert "does not trust kernels-test as a kernel publisher" in line
    assert '[tool.kernels.trust] publishers = ["kernels-test"]' in line
    assert files_of(untrusting) == before


@pytest.mark.parametrize(
    ("status", "said"),
    [(404, "could not say (HTTP 404: no such organization, or no organizations API)"), (500, "HTTP 500")],
)
def test_a_hub_that_cannot_answer_counts_as_not_trusting_and_says_so(
    untrusting: Path, proxy, status: int, said: str
) -> None:
    proxy.answer_json = overview({"kernels-test": status})
    result = lock_through(proxy, untrusting, "lock")
    assert result.returncode == 1
    assert said in result.stderr
    assert "publishers = [\"kernels-test\"]" in result.stderr
    assert not (untrusting / "kernels.lock").exists()


def test_a_hub_without_the_organizations_api_refuses_every_lock_until_the_project_allows_the_org(
    tmp_path: Path, hub_env
) -> None:
    # The local Hub itself (olah) answers no organizations API.
    project = write_project(tmp_path / "app", {"kernels-test/activation": ">=1"}, trusted=())
    refused = run_kernels("lock", str(project))
    assert refused.returncode == 1 and "could not say" in refused.stderr
    assert not (project / "kernels.lock").exists()
    write_project(tmp_path / "app", {"kernels-test/activation": ">=1"})  # allows kernels-test
    assert run_kernels("lock", str(project)).returncode == 0


def test_an_org_or_one_repo_id_the_project_allows_is_locked_without_asking_the_hub(
    tmp_path: Path, proxy, hub_env
) -> None:
    proxy.answer_json = overview({"kernels-test": False})
    by_repo = write_project(
        tmp_path / "one", {"kernels-test/activation": ">=1"}, trusted=("kernels-test/activation",)
    )
    by_org = write_project(tmp_path / "org", {"kernels-test/layer-norm": ">=0.1"}, trusted=("kernels-test",))
    assert lock_through(proxy, by_repo, "lock").returncode == 0
    assert lock_through(proxy, by_org, "lock").returncode == 0
    assert proxy.requests_matching(ORG_API) == 0
    recorded = [e["trusted_by"] for p in (by_repo, by_org) for e in json.loads((p / "kernels.lock").read_text())]
    assert recorded == ["pyproject:kernels-test/activation", "pyproject:kernels-test", "pyproject:kernels-test"]


def test_a_repo_id_allowed_alone_does_not_allow_its_dependency(tmp_path: Path, proxy, hub_env) -> None:
    proxy.answer_json = overview({})
    allowed = ("kernels-test/layer-norm",)
    project = write_project(tmp_path / "app", {"kernels-test/layer-norm": ">=0.1"}, trusted=allowed)
    result = lock_through(proxy, project, "lock")
    assert result.returncode == 1
    assert "kernels-test/activation (asked for by kernels-test/layer-norm)" in result.stderr
    assert "kernels-test/layer-norm (" not in result.stderr


def test_kernels_add_of_an_untrusted_kernel_writes_nothing(tmp_path: Path, proxy, hub_env) -> None:
    proxy.answer_json = overview({"kernels-test": False})
    project = write_project(tmp_path / "app", {}, trusted=())
    before = files_of(project)
    result = lock_through(proxy, project, "add", "kernels-test/activation>=1")
    assert result.returncode == 1, result.stderr
    assert "kernels-test/activation (asked for by pyproject.toml)" in result.stderr
    assert files_of(project) == before


def test_a_hub_slower_than_the_budget_counts_as_not_trusting(untrusting: Path, proxy) -> None:
    proxy.answer_json = overview({"kernels-test": True})
    proxy.only_paths = ORG_API
    proxy.latency = 30.0
    result = lock_through(proxy, untrusting, "lock", KERNELS_HUB_BUDGET="3")
    assert result.returncode == 1
    assert "could not say" in result.stderr and "budget" in result.stderr
    assert not (untrusting / "kernels.lock").exists()


@pytest.mark.parametrize(
    ("table", "line", "said"),
    [
        ('[tool.kernels.trust]\npublishers = "kernels-test"\n', 6, "expected a list like"),
        ('[tool.kernels.trust]\npublishers = ["kernels-test/"]\n', 6, "is neither an organization nor a repo id"),
        ('[tool.kernels.trust]\npublishers = [3]\n', 6, "is neither an organization nor a repo id"),
        ('[tool.kernels.trust]\nallow = ["x"]\n', 5, "unknown key"),
        ('[tool.kernels]\ntrust = "x"\n', 6, "expected a table like"),
    ],
)
def test_a_bad_trust_table_is_bad_input_naming_file_and_line(
    tmp_path: Path, hub_env, table: str, line: int, said: str
) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": ">=1"}, extra=table + "\n", trusted=())
    result = run_kernels("lock", str(project))
    assert result.returncode == 2
    assert f"{project / 'pyproject.toml'}:{line}:" in result.stderr and said in result.stderr
    assert not (project / "kernels.lock").exists()


def test_trust_table_helper_writes_what_the_parser_reads(tmp_path: Path) -> None:
    from kernel_deps.project.pyproject import read_trust

    extra = trust_table(["my-org", "other-org/one-kernel"]) + "\n"
    project = write_project(tmp_path / "app", {}, extra=extra, trusted=())
    assert read_trust(project) == ("my-org", "other-org/one-kernel")


# --- why each kernel is trusted, recorded in the lock --------------------------------------------


def test_the_lock_records_why_each_kernel_is_trusted(tmp_path: Path, proxy, hub_env) -> None:
    proxy.answer_json = overview({"kernels-test": True})
    by_hub = write_project(tmp_path / "hub", {"kernels-test/layer-norm": ">=0.1"}, trusted=())
    by_project = write_project(
        tmp_path / "project", {"kernels-test/layer-norm": ">=0.1"}, trusted=("kernels-test/layer-norm", "kernels-test")
    )
    assert lock_through(proxy, by_hub, "lock").returncode == 0
    assert lock_through(proxy, by_project, "lock").returncode == 0
    assert {e["repo_id"]: e["trusted_by"] for e in json.loads((by_hub / "kernels.lock").read_text())} == {
        "kernels-test/activation": "hub",
        "kernels-test/layer-norm": "hub",
    }
    # A repo id listed is the allowance for that kernel; its organization for the others.
    assert {e["repo_id"]: e["trusted_by"] for e in json.loads((by_project / "kernels.lock").read_text())} == {
        "kernels-test/activation": "pyproject:kernels-test",
        "kernels-test/layer-norm": "pyproject:kernels-test/layer-norm",
    }


def test_lock_check_and_verify_fail_offline_once_an_allowance_the_lock_relied_on_is_removed(
    tmp_path: Path, hub_env
) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": ">=1"}, locked=True)
    offline = {"HF_HUB_OFFLINE": "1"}
    assert run_kernels("lock", "--check", str(project), env=offline).returncode == 0
    assert run_kernels("verify", str(project), env=offline).returncode == 0
    lock_before = (project / "kernels.lock").read_bytes()
    write_project(tmp_path / "app", {"kernels-test/activation": ">=1"}, trusted=())
    check = run_kernels("lock", "--check", str(project), env=offline)
    verify = run_kernels("verify", str(project), env=offline)
    for result in (check, verify):
        assert result.returncode == 1, result.stdout + result.stderr
        out = result.stdout + result.stderr
        assert "kernels-test/activation: kernels.lock trusts it because [tool.kernels.trust] publishers listed " in out
        assert "'kernels-test', which pyproject.toml no longer lists" in out
    assert (project / "kernels.lock").read_bytes() == lock_before


def test_a_lock_without_trusted_by_is_read_as_it_is(tmp_path: Path, hub_env) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": ">=1"}, locked=True)
    entries = json.loads((project / "kernels.lock").read_text())
    for entry in entries:
        del entry["trusted_by"]
    (project / "kernels.lock").write_text(json.dumps(entries, indent=2) + "\n")
    write_project(tmp_path / "app", {"kernels-test/activation": ">=1"}, trusted=())  # nothing it relied on is known
    offline = {"HF_HUB_OFFLINE": "1"}
    assert run_kernels("lock", "--check", str(project), env=offline).returncode == 0
    assert run_kernels("verify", str(project), env=offline).returncode == 0


@pytest.mark.parametrize(
    "value", ["project", "pyproject:other-org", "pyproject:kernels-test/rotary", 1, None]
)
def test_a_trusted_by_that_does_not_fit_its_entry_is_refused_naming_the_key(tmp_path: Path, value: object) -> None:
    from kernel_deps.core.errors import LockfileError
    from kernel_deps.lock.read import read_lock

    entry = {"repo_id": "kernels-test/activation", "sha": "a" * 40, "variants": {}, "dependencies": []}
    for fits in ("hub", "pyproject:kernels-test", "pyproject:kernels-test/activation"):
        (tmp_path / "kernels.lock").write_text(json.dumps([{**entry, "trusted_by": fits}]))
        assert read_lock(tmp_path / "kernels.lock", purpose="use").lock.kernels[0].trusted_by == fits
    (tmp_path / "kernels.lock").write_text(json.dumps([{**entry, "trusted_by": value}]))
    with pytest.raises(LockfileError, match=r"trusted_by.*\[0\]\.trusted_by"):
        read_lock(tmp_path / "kernels.lock", purpose="use")


# --- the loader's unlocked use: trust_remote_code as the Hugging Face library means it ---------


@pytest.fixture
def front(proxy, hub_env, monkeypatch: pytest.MonkeyPatch):
    """The loader pointed at the front, whose organizations API trusts nobody."""
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    proxy.answer_json = overview({"kernels-test": False})
    return proxy


def test_get_kernel_by_default_loads_only_what_the_hub_trusts(front) -> None:
    from kernel_deps import get_kernel, has_kernel
    from kernel_deps.core.errors import UntrustedPublisherError

    with pytest.raises(UntrustedPublisherError) as refused:
        get_kernel("kernels-test/activation", version=1)
    assert "kernels-test/activation is not from a trusted publisher" in str(refused.value)
    assert "trust_remote_code=True" in str(refused.value)
    with pytest.raises(UntrustedPublisherError):
        has_kernel("kernels-test/activation", version=1)
    front.answer_json = overview({"kernels-test": True})
    assert get_kernel("kernels-test/activation", version=1).__kernel_origin__.repo_id == "kernels-test/activation"


def test_get_kernel_with_trust_remote_code_true_or_a_list_naming_the_repo_loads_without_asking(front) -> None:
    from kernel_deps import get_kernel, has_kernel

    assert get_kernel("kernels-test/activation", version=1, trust_remote_code=True) is not None
    assert get_kernel("kernels-test/activation", version=1, trust_remote_code=["kernels-test/activation"]) is not None
    assert has_kernel("kernels-test/activation", version=1, trust_remote_code=["kernels-test/activation"]) is True
    assert front.requests_matching(ORG_API) == 0


def test_get_kernel_with_a_list_not_naming_a_dependency_asks_the_hub_about_it(front) -> None:
    from kernel_deps import get_kernel
    from kernel_deps.core.errors import UntrustedPublisherError

    with pytest.raises(UntrustedPublisherError, match="kernels-test/activation is not from a trusted publisher"):
        get_kernel("kernels-test/layer-norm", version=">=0.1", trust_remote_code=["kernels-test/layer-norm"])


@pytest.mark.parametrize("value", ["yes", ["kernels-test/activation", 1], None])
def test_get_kernel_with_a_trust_remote_code_of_another_kind_is_bad_input(front, value: object) -> None:
    from kernel_deps import get_kernel
    from kernel_deps.core.errors import UsageError

    with pytest.raises(UsageError, match="trust_remote_code=.*expected True, False, or a list of repo ids"):
        get_kernel("kernels-test/activation", version=1, trust_remote_code=value)


def test_the_hubs_answer_about_a_publisher_is_a_kind_said_where_it_is_shown() -> None:
    from kernel_deps.trust.publishers import PublisherTrust, publisher_trust_text

    hub = "https://hub.example"
    said = {
        PublisherTrust("org", True, PublisherTrust.TRUSTED, hub): f"the Hub at {hub} trusts org",
        PublisherTrust("org", False, PublisherTrust.NOT_TRUSTED, hub):
            f"the Hub at {hub} does not trust org as a kernel publisher",
        PublisherTrust("org", False, PublisherTrust.NO_ORGANIZATION, hub):
            f"the Hub at {hub} could not say (HTTP 404: no such organization, or no organizations API)",
        PublisherTrust("org", False, PublisherTrust.HUB_ERROR, hub, "HTTP 503 after 3 tries"):
            f"the Hub at {hub} could not say (HTTP 503 after 3 tries)",
        PublisherTrust("org", False, PublisherTrust.BAD_ANSWER, hub, "not JSON"):
            f"the Hub at {hub} could not say (its answer: not JSON)",
    }  # fmt: skip
    assert {answer: publisher_trust_text(answer) for answer in said} == said
