"""kernel_deps.hub.client through the real huggingface_hub client and a local olah Hub."""

from __future__ import annotations

import hashlib
import json

import pytest
from huggingface_hub import hf_hub_download

from kernel_deps.core.errors import (
    HubUnavailableError,
    InvalidRepoIdError,
    OfflineError,
    PathNotFoundError,
    RepoNotFoundError,
    RevisionNotFoundError,
)
from kernel_deps.hub.client import HubClient
from kernel_deps.hub.index import KernelIndex
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, git_blob_id
from tests.fixtures.localhub import free_port


def test_list_refs_of_a_kernel_repo(hub_env) -> None:
    built = hub_env.repos["kernels-test/activation"]
    listing = HubClient().list_refs("kernels-test/activation")
    assert listing.repo_type == "kernel"
    got = {(r.name, r.kind): r.commit for r in listing.refs}
    # Annotated tags are peeled to the commit they name.
    assert got[("v1.1.0", "tag")] == built.commits["1.1.0"]
    assert got[("v1.0.0", "tag")] == built.commits["1.0.0"]
    assert got[("v1", "branch")] == built.commits["1.2.0"]
    assert got[("main", "branch")] == built.commits["2.0.0"]


def test_legacy_model_repo_is_found(hub_env) -> None:
    listing = HubClient().list_refs("kernels-test/legacy-gelu")
    assert listing.repo_type == "model"
    assert {r.name for r in listing.refs} >= {"v0.1.0", "v0.2.0", "v0", "main"}


def test_variant_tree_has_blob_ids_and_lfs_sha256(hub_env) -> None:
    built = hub_env.repos["kernels-test/activation"]
    commit = built.commits["1.2.0"]
    client = HubClient()
    files = client.list_variant_files("kernels-test/activation", commit, CPU_VARIANT)
    expected = {p: c for p, c in built.files["1.2.0"].items() if p.startswith(f"build/{CPU_VARIANT}/")}
    assert {f.path for f in files} == set(expected)
    for f in files:
        content = expected[f.path]
        assert f.blob_id == git_blob_id(content.committed)
        assert f.lfs_sha256 == (hashlib.sha256(content.data).hexdigest() if content.lfs else None)
        assert f.size == len(content.data)
    assert any(f.lfs_sha256 for f in files)
    assert sorted(client.list_variants("kernels-test/activation", commit)) == sorted(
        {p.split("/")[1] for p in built.files["1.2.0"]}
    )


def test_lfs_file_downloads_with_original_bytes(hub_env, tmp_path) -> None:
    built = hub_env.repos["kernels-test/activation"]
    commit = built.commits["2.0.0"]
    path, content = next((p, c) for p, c in built.files["2.0.0"].items() if c.lfs and CUDA_VARIANT in p)
    local = hf_hub_download(
        "kernels-test/activation", path, repo_type="kernel", revision=commit,
        endpoint=hub_env.url, cache_dir=tmp_path / "cache",
    )
    with open(local, "rb") as fh:
        assert fh.read() == content.data


def test_metadata_is_read_as_bytes_and_parsed_by_the_index(hub_env) -> None:
    # The Hub client reads raw bytes; the index, metadata's only user, parses them.
    built = hub_env.repos["kernels-test/attention"]
    commit, path = built.commits["1.4.0"], f"build/{CPU_VARIANT}/metadata.json"
    client = HubClient()
    assert client.read_small_file("kernels-test/attention", commit, path) == built.files["1.4.0"][path].data
    with KernelIndex(client) as index:
        metadata = index.metadata("kernels-test/attention", commit, CPU_VARIANT)
    assert metadata["kernel-depends"] == [{"repo-id": "kernels-test/rotary", "version": ">=2"}]
    assert metadata == json.loads(built.files["1.4.0"][path].data)


def test_commit_without_build_folder_has_no_variants(hub_env) -> None:
    # The first commit of a repo with no build/ at all: an empty variant list, not an error.
    from tests.fixtures.builder import KernelRepo, Release

    built = hub_env.add_repo(KernelRepo("kernels-test/hub-empty-variants", (Release("1.0.0", variants=()),)))
    client = HubClient()
    assert client.list_variants("kernels-test/hub-empty-variants", built.commits["1.0.0"]) == []
    assert client.list_variant_files("kernels-test/hub-empty-variants", built.commits["1.0.0"]) == []


def test_a_missing_variant_folder_is_not_an_empty_one(hub_env) -> None:
    from tests.fixtures.builder import KernelRepo, Release

    built = hub_env.add_repo(KernelRepo("kernels-test/hub-one-variant", (Release("1.0.0", variants=(CPU_VARIANT,)),)))
    commit = built.commits["1.0.0"]
    client = HubClient()
    with pytest.raises(PathNotFoundError, match=rf"^kernels-test/hub-one-variant: the Hub has no build/{CUDA_VARIANT} at {commit[:12]}$"):
        client.list_variant_files("kernels-test/hub-one-variant", commit, CUDA_VARIANT)
    assert {f.path.split("/")[1] for f in client.list_variant_files("kernels-test/hub-one-variant", commit)} == {CPU_VARIANT}


def test_unknown_repo(hub_env) -> None:
    with pytest.raises(RepoNotFoundError, match="kernels-test/does-not-exist"):
        HubClient().list_refs("kernels-test/does-not-exist")


def test_unknown_commit(hub_env) -> None:
    client = HubClient()
    client.list_refs("kernels-test/activation")
    with pytest.raises(RevisionNotFoundError, match="'f{40}'"):
        client.list_variant_files("kernels-test/activation", "f" * 40, CPU_VARIANT)


def test_invalid_repo_id_is_rejected_before_any_request(hub_env) -> None:
    for bad in ["activation", "a/b/c", "-a/b", "a/b-", "a//b", "a/b..c", ""]:
        with pytest.raises(InvalidRepoIdError):
            HubClient().list_refs(bad)


def test_hub_down_fails_after_bounded_retries() -> None:
    client = HubClient(endpoint=f"http://127.0.0.1:{free_port()}", retries=2, backoff=0.01)
    with pytest.raises(HubUnavailableError, match="cannot reach the Hub"):
        client.list_refs("kernels-test/activation")


def test_offline_mode_refuses_network(hub_env, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="HF_HUB_OFFLINE"):
        HubClient().list_refs("kernels-test/activation")


def test_transient_5xx_are_retried(hub_env, proxy) -> None:
    proxy.error_schedule = [503, 502]
    listing = HubClient(endpoint=proxy.url, backoff=0.01).list_refs("kernels-test/rotary")
    assert {r.name for r in listing.refs} >= {"v1.0.0", "v2"}
    assert proxy.counts[("GET", "/api/kernels/kernels-test/rotary/refs")] == 3


def test_persistent_5xx_fail_clearly_after_bounded_retries(hub_env, proxy) -> None:
    proxy.fail_all()
    with pytest.raises(HubUnavailableError, match=r"kept failing \(HTTP 503 after 3 attempts\)"):
        HubClient(endpoint=proxy.url, retries=2, backoff=0.01).list_refs("kernels-test/rotary")
    assert proxy.total_requests() == 3


def test_tree_listing_retries_are_ours_alone(hub_env, proxy) -> None:
    commit = hub_env.repos["kernels-test/rotary"].commits["1.0.0"]
    client = HubClient(endpoint=proxy.url, retries=2, backoff=0.01)
    client.list_refs("kernels-test/rotary")
    proxy.only_paths = "/tree/"
    proxy.fail_all()
    with pytest.raises(HubUnavailableError, match=r"HTTP 503 after 3 attempts"):
        client.list_variant_files("kernels-test/rotary", commit, CPU_VARIANT)
    assert proxy.requests_matching("/tree/") == 3


@pytest.mark.parametrize(("status", "token"), [(403, None), (401, "hf_not_a_real_token")])
def test_refused_access_is_an_auth_error(hub_env, proxy, status, token) -> None:
    from kernel_deps.core.errors import HubAuthError

    proxy.error_status = status
    proxy.fail_all()
    with pytest.raises(HubAuthError, match=rf"refused access \(HTTP {status}\); check HF_TOKEN"):
        HubClient(endpoint=proxy.url, token=token).list_refs("kernels-test/rotary")
    assert proxy.total_requests() == 1  # not retried: waiting does not fix credentials


def test_a_cut_download_resumes_with_a_range_request(tmp_path) -> None:
    """olah ignores Range (a retry starts over, which the fault tests cover); this server
    honours it, as the Hub's file storage does."""
    import http.server
    import threading

    data = bytes(range(256)) * 4096  # 1 MiB
    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.endswith("/refs"):
                body = b'{"branches": [], "tags": [], "converts": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            wanted = self.headers.get("Range")
            seen.append(wanted)
            if wanted:
                start = int(wanted.removeprefix("bytes=").rstrip("-"))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                self.wfile.write(data[start:])
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 3])  # then the connection drops
            self.wfile.flush()
            self.close_connection = True

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = HubClient(endpoint=f"http://127.0.0.1:{server.server_port}", backoff=0.01)
        target = tmp_path / "blob.part"
        client.download_to("kernels-test/resume", "a" * 40, "build/x/_ops.so", target, size=len(data))
    finally:
        server.shutdown()
    assert target.read_bytes() == data
    assert seen[0] is None and seen[1] is not None and int(seen[1].removeprefix("bytes=").rstrip("-")) > 0
