"""examples/app/Dockerfile built for real with podman; `make container-test` runs it.

The image is built from a Debian bookworm base made with debootstrap
(tests/container/prepare.sh), with kernel-deps installed from a wheel of this checkout and
the kernel downloaded at build time from the local Hub (127.0.0.1, reached with
``--network host``). `podman run` does not work on these machines (cgroups), so a last
build stage on top of the app image runs the app as a ``RUN`` step, with the Hub out of
reach, and the test reads what it printed.

Marked ``container``: deselected unless pytest is given ``--container``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernel_deps.lock.read import read_lock
from tests.fixtures.processes import KERNELS

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[3]
BASE_IMAGE = os.environ.get("BASE_IMAGE", "localhost/kernel-deps-test/bookworm-python:1")
APP_IMAGE = "localhost/kernel-deps-test/grayscale-app:latest"
CHECK_IMAGE = "localhost/kernel-deps-test/grayscale-app-check:latest"
# Where the host's pip settings are mounted in the build (never part of an image layer).
PIP_DIR = "/run/kernel-deps-pip"


def podman_build(context: Path, *args: str, containerfile: Path | None = None) -> subprocess.CompletedProcess:
    command = [
        "podman", "build", "--isolation=chroot", "--network", "host", "--ulimit", "nofile=20000:20000",
        "--layers", *args, "-f", str(containerfile or context / "Dockerfile"), str(context),
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=3600)


def host_pip_settings(folder: Path) -> list[str]:
    """``-v`` options giving pip in the build this machine's CA bundle, local wheels and torch.

    pip inside the image reaches the package index only through this machine's CA; the
    CPU build of torch comes from its local wheel folder, pinned to the version the
    img2gray op was compiled against.
    """
    folder.mkdir(parents=True, exist_ok=True)
    ca = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
    mounts = ["-v", f"{folder}:{PIP_DIR}:ro"]
    lines = ["[global]", "no-cache-dir = true", f"constraint = {PIP_DIR}/constraints.txt"]
    if Path(ca).is_file():
        shutil.copyfile(ca, folder / "ca.crt")
        lines.append(f"cert = {PIP_DIR}/ca.crt")
    links = pip_setting("find-links")
    local = [link for link in links.split() if Path(link).is_dir()]
    if local:
        lines.append("find-links = " + " ".join(local))
        for link in local:
            mounts += ["-v", f"{link}:{link}:ro"]
    (folder / "constraints.txt").write_text(f"torch=={torch.__version__}\n")
    (folder / "pip.conf").write_text("\n".join(lines) + "\n")
    return [*mounts, "-v", f"{folder / 'pip.conf'}:/etc/pip.conf:ro"]


def pip_setting(name: str) -> str:
    """A pip setting as this machine's pip sees it (environment first, then its config files)."""
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env:
        return env
    result = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in result.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.split(".", 1)[-1] == name:
            return value.strip().strip("'\"")
    return ""


@pytest.fixture
def podman_images():
    """podman and the base image; the images a test builds (and their layers) removed after it."""
    if shutil.which("podman") is None or subprocess.run(["podman", "image", "exists", BASE_IMAGE]).returncode:
        pytest.fail(f"podman and the base image {BASE_IMAGE} are needed: run 'make container-test'")
    yield
    subprocess.run(["podman", "rmi", "--force", "--ignore", APP_IMAGE, CHECK_IMAGE], capture_output=True)
    subprocess.run(["podman", "image", "prune", "--force"], capture_output=True)  # the layers they left


def test_dockerfile_downloads_at_build_time_and_runs_offline(podman_images, img2gray_hub, hub_env, tmp_path) -> None:
    context = tmp_path / "app"
    shutil.copytree(ROOT / "examples" / "app", context)
    locked = subprocess.run([KERNELS, "lock", str(context)], capture_output=True, text=True)
    assert locked.returncode == 0, locked.stderr
    wheel = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(context / "wheels"), str(ROOT)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert wheel.returncode == 0, wheel.stderr
    (wheel_file,) = (context / "wheels").glob("kernel_deps-*.whl")

    settings = host_pip_settings(tmp_path / "pip")
    build_args = [
        "-t", APP_IMAGE,
        "--build-arg", f"BASE={BASE_IMAGE}",
        "--build-arg", f"KERNEL_DEPS=/context/wheels/{wheel_file.name}[torch]",
        "--build-arg", f"HF_ENDPOINT={hub_env.url}",
        *settings,
    ]  # fmt: skip
    # --no-cache: every step runs and prints, whatever an earlier run left in the layer
    # cache. The kernel cache mount may hold the kernel from an earlier run already.
    build = podman_build(context, "--no-cache", *build_args)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    lock = read_lock(context / "kernels.lock", purpose="use").lock.get("kernels-test/img2gray")
    synced = r"^Synced 1 kernel: kernels.lock used as it is; 1 variant present, verified \([01] downloaded"
    assert re.search(synced, build.stdout, re.M), build.stdout[-4000:]
    assert "; placed in /opt/kernels-cache, verified" in build.stdout

    # A rebuild after an edit before the download step reruns it: the cache mount holds
    # the kernel, so nothing is downloaded again.
    with (context / "pyproject.toml").open("a") as pyproject:
        pyproject.write("# edited\n")
    rebuild = podman_build(context, *build_args)
    assert rebuild.returncode == 0, rebuild.stdout[-4000:] + rebuild.stderr[-4000:]
    assert re.search(r"^kernels-test/img2gray \S+: already in the cache, verified$", rebuild.stdout, re.M), rebuild.stdout
    assert "1 variant present, verified (0 downloaded, 0 files, 0 bytes); placed in /opt/kernels-cache" in rebuild.stdout

    # The last stage: the app as the image runs it (HF_HUB_OFFLINE=1 from the image, and
    # a Hub address that answers nothing), then verify against the image's cache.
    check = tmp_path / "check"
    check.mkdir()
    (check / "Containerfile").write_text(
        f"FROM {APP_IMAGE}\n"
        "ENV HF_ENDPOINT=http://127.0.0.1:9\n"
        'RUN test "$HF_HUB_OFFLINE" = 1 && python grayscale.py --output /tmp/gray.pgm && test -s /tmp/gray.pgm\n'
        "RUN kernels verify . --require-cached\n"
    )
    ran = podman_build(check, "--no-cache", "-t", CHECK_IMAGE, containerfile=check / "Containerfile")
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    shown = re.search(r"^kernel: kernels-test/img2gray 1\.1\.0 \((\S+), commit ([0-9a-f]{12})\)$", ran.stdout, re.M)
    assert shown is not None, ran.stdout[-4000:]
    assert shown.group(2) == lock.sha[:12] and shown.group(1) in lock.variants
    assert "lock:   /app/kernels.lock" in ran.stdout
    assert "converted a 640x480 image; it matches the pure torch reference" in ran.stdout
    assert "kernels.lock, pyproject.toml and the cache agree" in ran.stdout
