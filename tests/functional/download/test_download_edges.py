"""What `kernels download` and its library functions give users at the edges: the
variants chosen for a system, several --variant names, the locked builds named when a
target has none, the variants named when offline, what a report and a progress receiver
are told, a cache folder given to the library, resumed and restarted partial files
(bytes received, requests made, what stays on disk after a failure), and another
download holding a lock until the time budget is spent. Real repos on the local Hub, the
command run in-process (tests/fixtures/cli.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from filelock import FileLock

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.core.variants import choose_variants
from kernel_deps.fetch.files import check_tree_paths
from kernel_deps.fetch.run import download_lock
from kernel_deps.fetch.tasks import Progress, VariantTask
from kernel_deps.commands.lock import lock_project
from kernel_deps.core.errors import UnsafeRepoContentError
from kernel_deps.core.variants import system_for_variant
from kernel_deps.hub.listing import TreeFile
from kernel_deps.lock.model import LockedKernel
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.rewrites import ops_blob_id_lie

REPO_ID = "kernels-test/dl-edge-main"


@pytest.fixture
def project(hub_env, tmp_path) -> Path:
    """A project locking REPO_ID v1.0.0 (CUDA 12.8, CPU and Metal builds), nothing downloaded."""
    if REPO_ID not in hub_env.repos:
        hub_env.add_repo(KernelRepo(REPO_ID, (Release("1.0.0"),)))
    folder = write_project(tmp_path / "app", f'"{REPO_ID}" = ">=1"')
    lock_project(folder)
    return folder


def _sha(project: Path, repo_id: str = REPO_ID) -> str:
    return read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id).sha


def _cached_variants(project: Path) -> set[str]:
    build = cache.variant_dir(cache.repo_dir(REPO_ID), _sha(project), CPU_VARIANT).parent
    return {p.name for p in build.iterdir()} if build.is_dir() else set()


def _lfs_file(hub_env, repo_id: str = REPO_ID) -> tuple[str, object]:
    """(path relative to the CPU variant, content) of its LFS file."""
    built = hub_env.repos[repo_id]
    path, content = next((p, c) for p, c in built.files["1.0.0"].items() if c.lfs and CPU_VARIANT in p)
    return path.split(f"{CPU_VARIANT}/", 1)[1], content


def _download_json(project: Path) -> dict:
    result = run_kernels("download", str(project), "--variant", CPU_VARIANT, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# Choosing variants


def test_choose_variants_takes_the_system_it_is_given(project) -> None:
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID)
    assert choose_variants(kernel.repo_id, kernel.variants, system=system_for_variant(CUDA_VARIANT)) == [CUDA_VARIANT]
    assert choose_variants(kernel.repo_id, kernel.variants, system=system_for_variant(METAL_VARIANT)) == [METAL_VARIANT]


def test_every_variant_named_is_downloaded(project) -> None:
    result = run_kernels("download", str(project), "--variant", CPU_VARIANT, "--variant", METAL_VARIANT)
    assert result.returncode == 0, result.stderr
    assert _cached_variants(project) == {CPU_VARIANT, METAL_VARIANT}


def test_a_target_no_locked_build_serves_names_every_locked_build(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/dl-edge-gpu-only"
    if repo_id not in hub_env.repos:
        hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CUDA_VARIANT, METAL_VARIANT)),)))
    project = write_project(tmp_path / "gpu", f'"{repo_id}" = ">=1"')
    lock_project(project)
    result = run_kernels("download", str(project), "--target", CPU_VARIANT)
    assert result.returncode == 1
    assert f"{repo_id} v1.0.0 has no build for it (locked: {CUDA_VARIANT}, {METAL_VARIANT});" in result.stderr


def test_offline_the_error_names_every_variant_not_in_the_cache(project) -> None:
    result = run_kernels("download", str(project), "--variant", CPU_VARIANT, "--variant", CUDA_VARIANT,
                         env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode != 0
    first, second = sorted([CPU_VARIANT, CUDA_VARIANT])
    assert f"HF_HUB_OFFLINE is set: {REPO_ID} {first}, {REPO_ID} {second}; run 'kernels download'" in result.stderr


def test_an_unsafe_path_in_a_listing_is_named() -> None:
    task = VariantTask(LockedKernel(repo_id="kernels-test/x", sha="0" * 40, variants={}), CPU_VARIANT)
    listing = [TreeFile(f"build/{CPU_VARIANT}/../evil.py", 1, "b" * 40, None)]
    with pytest.raises(UnsafeRepoContentError, match=re.escape(f"unsafe path {f'build/{CPU_VARIANT}/../evil.py'!r};")):
        check_tree_paths(task, listing)


# What the library reports


class Recorder(Progress):
    """A library caller's progress receiver: what it is told of each variant."""

    def __init__(self) -> None:
        self.done: list[tuple[str, bool, int, int]] = []

    def variant_done(self, task, *, cached, files, size):
        self.done.append((task.label, cached, files, size))


def test_the_report_and_progress_name_each_variant_as_fetched_or_cached(project) -> None:
    label = f"{REPO_ID} {CPU_VARIANT}"
    first = Recorder()
    report = download_project(project, variants=[CPU_VARIANT], progress=first)
    assert [t.label for t in report.fetched] == [label] and report.already_cached == []
    assert first.done == [(label, False, report.files_fetched, report.bytes_fetched)]
    assert report.files_fetched > 0 and report.bytes_fetched > 0

    second = Recorder()
    report = download_project(project, variants=[CPU_VARIANT], progress=second)
    assert [t.label for t in report.already_cached] == [label] and report.fetched == []
    assert second.done == [(label, True, 0, 0)]

    # The variant folder gone, its blobs still there: placed again with nothing fetched.
    import shutil

    shutil.rmtree(cache.variant_dir(cache.repo_dir(REPO_ID), _sha(project), CPU_VARIANT))
    report = download_project(project, variants=[CPU_VARIANT])
    assert [t.label for t in report.already_cached] == [label] and report.fetched == []
    assert report.files_fetched == 0


def test_a_cache_folder_given_to_the_library_is_where_it_looks_for_cached_variants(project, tmp_path, monkeypatch) -> None:
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    root = tmp_path / "own-cache"
    first = download_lock(lock, variants_for=lambda kernel: [CPU_VARIANT], root=root)
    assert [t.variant for t in first.fetched] == [CPU_VARIANT]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a second run needs no network: all is in root
    second = download_lock(lock, variants_for=lambda kernel: [CPU_VARIANT], root=root)
    assert [t.variant for t in second.already_cached] == [CPU_VARIANT]
    assert not cache.variant_dir(cache.repo_dir(REPO_ID), _sha(project), CPU_VARIANT).exists()  # nor the default cache


# Partial files


class RangeHub:
    """The local Hub behind a front that honours Range requests for files, as the Hub's
    file storage does (olah itself ignores Range); ``cut`` names a path suffix whose
    downloads end after the headers, before their first byte."""

    def __init__(self, upstream: str) -> None:
        import http.server
        import threading
        from urllib.parse import urlsplit

        up = urlsplit(upstream)
        self.cut: str | None = None
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self, head: bool) -> None:
                import http.client

                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "range", "accept-encoding")}
                conn.request(self.command, self.path, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                wanted = self.headers.get("Range")
                status, extra = resp.status, {}
                if wanted and status == 200 and not head:
                    start = int(wanted.removeprefix("bytes=").rstrip("-"))
                    extra["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
                    status, body = 206, body[start:]
                self.send_response(status)
                for name, value in resp.getheaders():
                    if name.lower() in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                        continue
                    if name.lower() == "location":
                        value = value.replace(upstream, front.url)
                    self.send_header(name, value)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                if front.cut and self.path.split("?")[0].endswith(front.cut) and status in (200, 206) and not head:
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    return
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer(head=False)

            def do_HEAD(self) -> None:
                self._answer(head=True)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def range_hub(hub_env, monkeypatch):
    front = RangeHub(hub_env.url)
    monkeypatch.setenv("HF_ENDPOINT", front.url)
    yield front
    front.stop()


def _leave_partial(hub_env, project: Path, data_of) -> tuple[bytes, Path]:
    """Download, then leave the LFS file only as a partial file holding ``data_of(content)``."""
    _download_json(project)
    rel, content = _lfs_file(hub_env)
    repo = cache.repo_dir(REPO_ID)
    import shutil

    shutil.rmtree(cache.variant_dir(repo, _sha(project), CPU_VARIANT))
    cache.blob_path(repo, content.lfs_sha256).unlink()
    partial = cache.partial_path(repo, content.lfs_sha256)
    partial.write_bytes(data_of(content.data))
    return content.data, cache.blob_path(repo, content.lfs_sha256)


def test_a_partial_file_of_one_byte_is_resumed(hub_env, project, range_hub) -> None:
    data, blob = _leave_partial(hub_env, project, lambda data: data[:1])
    report = _download_json(project)
    assert [(v["state"], v["files"], v["bytes"]) for v in report["variants"]] == [("downloaded", 1, len(data) - 1)]
    assert blob.read_bytes() == data


def test_a_resumed_partial_file_that_fails_verification_counts_both_downloads(hub_env, project, range_hub) -> None:
    half = 100
    data, blob = _leave_partial(hub_env, project, lambda data: b"\0" * half)
    report = _download_json(project)
    # the rest after the wrong first bytes, then the whole file again
    assert [(v["state"], v["files"], v["bytes"]) for v in report["variants"]] == [
        ("downloaded", 1, (len(data) - half) + len(data))
    ]
    assert blob.read_bytes() == data


def test_a_download_cut_before_its_first_byte_leaves_no_empty_partial_file(hub_env, project, range_hub, monkeypatch) -> None:
    monkeypatch.setenv("KERNELS_HUB_BUDGET", "20")
    range_hub.cut = ".abi3.so"
    result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
    assert result.returncode != 0
    rel, content = _lfs_file(hub_env)
    partial = cache.partial_path(cache.repo_dir(REPO_ID), content.lfs_sha256)
    assert not partial.exists()
    assert list(partial.parent.iterdir()) == []


LYING_ID = "kernels-test/dl-edge-lying"
FAKE = "1" * 40



@pytest.fixture
def lying(hub_env, proxy, tmp_path, monkeypatch) -> Path:
    """A project locking a repo whose listing gives _ops.py a git blob id its bytes lack."""
    if LYING_ID not in hub_env.repos:
        hub_env.add_repo(KernelRepo(LYING_ID, (Release("1.0.0", variants=(CPU_VARIANT,)),)))

    proxy.rewrite_json = ops_blob_id_lie(FAKE)
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    folder = write_project(tmp_path / "lying", f'"{LYING_ID}" = ">=1"')
    lock_project(folder)
    return folder


def test_a_file_failing_verification_is_fetched_once_and_removed_even_after_an_empty_partial(lying, proxy) -> None:
    repo = cache.repo_dir(LYING_ID)
    partial = cache.partial_path(repo, FAKE)
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"")  # an earlier run that got no byte of it
    proxy.reset_counts()
    result = run_kernels("download", str(lying), "--variant", CPU_VARIANT)
    assert result.returncode != 0
    assert "_ops.py does not match the Hub's listing" in result.stderr and result.stderr.rstrip().endswith("removed it")
    gets = sum(n for (method, path), n in proxy.counts.items() if method == "GET" and path.endswith("/_ops.py"))
    assert gets == 1
    assert not partial.exists()
    assert list(partial.parent.iterdir()) == []


# Another download holding a lock


def test_a_variant_another_download_holds_is_waited_for_then_named(project, monkeypatch) -> None:
    repo = cache.repo_dir(REPO_ID)
    lock_file = cache.variant_lock_path(repo, _sha(project), CPU_VARIANT)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("KERNELS_HUB_BUDGET", "1")
    with FileLock(str(lock_file)):
        result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
    assert result.returncode != 0
    assert f"waiting for another kernels download of {REPO_ID} {CPU_VARIANT} (lock {lock_file}) ..." in result.stderr
    assert f"{REPO_ID} {CPU_VARIANT}: another kernels download held {lock_file} until the 1 s budget" in result.stderr
    assert not _cached_variants(project)


def test_a_file_another_download_holds_is_waited_for_then_named(hub_env, project, monkeypatch) -> None:
    rel, content = _lfs_file(hub_env)
    lock_file = cache.partial_lock_path(cache.repo_dir(REPO_ID), content.lfs_sha256)
    monkeypatch.setenv("KERNELS_HUB_BUDGET", "1")
    with FileLock(str(lock_file)):
        result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
    assert result.returncode != 0
    label = f"{REPO_ID} {CPU_VARIANT} {rel}"
    assert f"waiting for another kernels download of {label} (lock {lock_file}) ..." in result.stderr
    assert f"{label}: another kernels download held {lock_file} until the 1 s budget" in result.stderr
    assert not _cached_variants(project)


def test_a_blob_removed_while_the_download_runs_is_fetched_again_and_never_reported_verified_missing(
    hub_env, project, proxy, monkeypatch
) -> None:
    """The world moves: a blob the download found valid, and so did not fetch, is deleted
    while the download is fetching another file (as a prune or a person who does not wait
    for the variant's lock would). What the download places is checked again while it holds
    the lock: it fetches the blob again and reports a variant that is complete, or fails."""
    import os
    import shutil

    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    assert run_kernels("download", str(project), "--variant", CPU_VARIANT).returncode == 0
    repo = cache.repo_dir(REPO_ID)
    folder = cache.variant_dir(repo, _sha(project), CPU_VARIANT)
    ops = Path(os.readlink(folder / "_ops.py")).name
    rel, content = _lfs_file(hub_env)
    shutil.rmtree(folder)
    cache.blob_path(repo, content.lfs_sha256).unlink()  # the next download fetches this one only

    removed: list[str] = []

    def remove_ops_blob(path: str) -> None:
        if path.endswith(f"/{CPU_VARIANT}/{rel}") and not removed:  # the shared object is on its way
            cache.blob_path(repo, ops).unlink()
            removed.append(path)

    proxy.answer_json = remove_ops_blob
    result = run_kernels("download", "--json", str(project), "--variant", CPU_VARIANT)
    assert removed, proxy.counts
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"] == 2  # the shared object, then _ops.py again
    assert cache.blob_path(repo, ops).is_file()
    locked = read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID).variants[CPU_VARIANT].hash
    assert cache.check_variant(REPO_ID, _sha(project), CPU_VARIANT, locked).ok
