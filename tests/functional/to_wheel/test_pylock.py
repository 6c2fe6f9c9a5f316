"""``pylock.toml`` (PEP 751): what ``kernels to-wheel`` writes beside requirements.txt, and its merge.

The file is held to ``packaging.pylock`` (the model pip itself vendors) and to one golden
text; then real installers take it, offline, into fresh virtual environments: the
environment's own pip (26.x, ``pip install -r pylock.toml``) from a pypiserver on
127.0.0.1, and uv 0.13 (the ``uv`` of the test extra) from the wheels folder and from a
project's own ``uv export`` merged with ``kernels export --format pylock``. The kernel is
then loaded there through kernel-deps, verified against the lock, and a wheel changed after
writing (a valid wheel of the same size) is refused by both installers.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.pylock import Pylock
from packaging.tags import parse_tag
from packaging.version import Version

from kernel_deps.core import pylock
from kernel_deps.core.system import SystemInfo
from kernel_deps.core.wheels import wheel_spec
from kernel_deps.lock.model import VariantSigner
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.img2gray_kernel import REPO_ID, cpu_variant_name
from tests.fixtures.package_index import PackageIndex, pip_env
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
IMPORT_NAME = "kernels_test_img2gray_o2"
GITHUB = "https://token.actions.githubusercontent.com"
LINUX_X86 = "sys_platform == 'linux' and platform_machine == 'x86_64'"


# -- the document ---------------------------------------------------------------------------

COMMIT_A, COMMIT_B = "a" * 40, "b" * 40
HASH_A, HASH_B = "sha256-" + "1" * 64, "sha256-" + "2" * 64
SIGNER = VariantSigner(issuer=GITHUB, identity="https://github.com/org/layer/.github/workflows/build.yml@refs/tags/v1",
                       repository="org/layer", workflow=".github/workflows/build.yml", ref="refs/tags/v1",
                       metadata_sha256="3" * 64)  # fmt: skip
GOLDEN = '''\
# Kernel wheels for the machine they were written on, written by kernels to-wheel.
# pip install --no-deps -r pylock.toml, or uv pip install -r pylock.toml (torch comes from your own index or image)
lock-version = "1.0"
environments = ["sys_platform == 'linux' and platform_machine == 'x86_64'"]
created-by = "kernel-deps"

[[packages]]
name = "org-layer-o1"
version = "1.2.0+torch213.cxx11.cu128"
marker = "sys_platform == 'linux' and platform_machine == 'x86_64'"
requires-python = ">=3.9"
wheels = [{ name = "org_layer_o1-1.2.0+torch213.cxx11.cu128-cp39-abi3-manylinux_2_28_x86_64.whl", \
path = "org_layer_o1-1.2.0+torch213.cxx11.cu128-cp39-abi3-manylinux_2_28_x86_64.whl", size = 4096, \
hashes = { sha256 = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc" } }]
attestation-identities = [{ kind = "GitHub", repository = "org/layer", workflow = "build.yml", ref = "refs/tags/v1" }]

[packages.tool.kernel-deps]
repo-id = "org/layer"
commit = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
variant = "torch213-cxx11-cu128-x86_64-linux"
variant-hash = "sha256-1111111111111111111111111111111111111111111111111111111111111111"

[[packages]]
name = "org-norm-o1"
version = "0+gbbbbbbbbbbbb"
requires-python = ">=3"
wheels = [{ name = "org_norm_o1-0+gbbbbbbbbbbbb-py3-none-any.whl", path = "org_norm_o1-0+gbbbbbbbbbbbb-py3-none-any.whl", \
size = 512, hashes = { sha256 = "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd" } }]

[packages.tool.kernel-deps]
repo-id = "org/norm"
commit = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
variant = "torch-universal"
variant-hash = "sha256-2222222222222222222222222222222222222222222222222222222222222222"
'''


def sample_wheels():
    layer = wheel_spec("org/layer", COMMIT_A, "v1.2.0", "torch213-cxx11-cu128-x86_64-linux", HASH_A,
                       ["__init__.py", "_ops.abi3.so"], {"org/norm": None})  # fmt: skip
    norm = wheel_spec("org/norm", COMMIT_B, None, "torch-universal", HASH_B, ["__init__.py"])
    return [(norm, "d" * 64, 512), (layer, "c" * 64, 4096)], {("org/layer", layer.variant): SIGNER}


def test_the_written_file_has_exactly_this_shape_and_is_a_valid_pep_751_lock() -> None:
    wheels, signers = sample_wheels()
    first = "# Kernel wheels for the machine they were written on, written by kernels to-wheel."
    machine = SystemInfo((2, 13), True, "cuda", (12, 8), "x86_64", "linux")
    text = pylock.kernel_pylock(wheels, signers, name="pylock.toml", first_line=first, machine=machine)
    assert text == GOLDEN
    lock = Pylock.from_dict(tomllib.loads(text))
    assert [(p.name, str(p.version), p.wheels[0].filename, dict(p.wheels[0].hashes)) for p in lock.packages] == [
        (spec.distribution, spec.version, spec.filename, {"sha256": digest}) for spec, digest, _ in reversed(wheels)
    ]
    linux = {"sys_platform": "linux", "platform_machine": "x86_64", "python_full_version": "3.12.1"}
    tags = [*parse_tag("cp39-abi3-manylinux_2_28_x86_64"), *parse_tag("py3-none-any")]
    selected = lock.select(environment=linux, tags=tags)
    assert [package.name for package, _ in selected] == ["org-layer-o1", "org-norm-o1"]
    # Published under a URL instead: the file name percent-encoded, read back whole.
    url_text = pylock.kernel_pylock(wheels, signers, name="pylock.toml", first_line=first,
                                    wheel_url="https://index.internal/packages/")  # fmt: skip
    (wheel,) = Pylock.from_dict(tomllib.loads(url_text)).packages[0].wheels
    assert wheel.url == "https://index.internal/packages/org_layer_o1-1.2.0%2Btorch213.cxx11.cu128-cp39-abi3-" \
                        "manylinux_2_28_x86_64.whl" and wheel.path is None  # fmt: skip
    assert wheel.filename == wheels[1][0].filename and "environments" not in tomllib.loads(url_text)


@pytest.mark.parametrize(
    ("variant", "marker"),
    [
        ("torch213-cxx11-cu128-x86_64-linux", LINUX_X86),
        ("torch213-cxx11-cpu-aarch64-linux", "sys_platform == 'linux' and platform_machine == 'aarch64'"),
        ("torch213-metal-aarch64-darwin", "sys_platform == 'darwin' and platform_machine == 'arm64'"),
        ("torch213-cpu-x86_64-darwin", "sys_platform == 'darwin' and platform_machine == 'x86_64'"),
        ("torch213-cpu-x86_64-windows", "sys_platform == 'win32' and platform_machine == 'AMD64'"),
        ("torch213-cpu-amd64-windows", "sys_platform == 'win32' and platform_machine == 'AMD64'"),
        ("torch213-cpu-aarch64-windows", "sys_platform == 'win32' and platform_machine == 'ARM64'"),
        ("torch213-cxx11-cpu-riscv64-linux", "sys_platform == 'linux'"),  # no known Python spelling: the os alone
        ("torch-universal", None),
        ("torch-cuda", None),
    ],
)
def test_each_build_is_marked_for_the_machines_python_names_it_runs_on(variant: str, marker: str | None) -> None:
    assert pylock.variant_marker(variant) == marker


@pytest.mark.parametrize(
    ("python", "abi", "expected"),
    [("cp39", "abi3", ">=3.9"), ("cp312", "cp312", "==3.12.*"), ("py3", "none", ">=3")],
)
def test_requires_python_follows_the_wheels_python_tag(python: str, abi: str, expected: str) -> None:
    assert pylock.requires_python(python, abi) == expected


def test_attestation_identities_take_pypis_publisher_form_with_kind() -> None:
    assert pylock.attestation_identity(SIGNER) == {
        "kind": "GitHub", "repository": "org/layer", "workflow": "build.yml", "ref": "refs/tags/v1",
    }  # fmt: skip
    nested = VariantSigner(issuer=GITHUB, identity="https://github.com/o/r/tools/ci/sign.yml@refs/heads/main",
                           repository="o/r", workflow="tools/ci/sign.yml", ref="refs/heads/main",
                           metadata_sha256="3" * 64)  # fmt: skip
    assert pylock.attestation_identity(nested)["workflow"] == "tools/ci/sign.yml"  # not a file name: kept whole
    other = VariantSigner(issuer="https://gitlab.com", identity="https://gitlab.com/o/r//.gitlab-ci.yml@refs/heads/main",
                          metadata_sha256="3" * 64)  # fmt: skip
    assert pylock.attestation_identity(other) == {"kind": "https://gitlab.com", "identity": other.identity}


def test_strings_are_escaped_as_toml_reads_them() -> None:
    hostile = 'a "quoted" \\ back\tslash\nnew\x00line\x7fdel é ✓'
    text = pylock.pylock_text([{"name": "x", "version": "1", "wheels": [{"url": "https://h/x-1-py3-none-any.whl",
                                "hashes": {"sha256": hostile}}], "tool": {"k d": {"weird key": hostile}}}])  # fmt: skip
    doc = tomllib.loads(text)
    assert doc["packages"][0]["wheels"][0]["hashes"]["sha256"] == hostile
    assert doc["packages"][0]["tool"]["k d"] == {"weird key": hostile}


# -- the merge into another tool's lock -----------------------------------------------------

THEIRS = '''\
# This file was autogenerated by uv via the following command:
#    uv export --format pylock.toml -o pylock.toml
lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.10"

[[packages]]
name = "tinydep"
version = "1.0.0"
index = "http://127.0.0.1:1/simple/"
wheels = [{ url = "http://127.0.0.1:1/packages/tinydep-1.0.0-py3-none-any.whl", hashes = { sha256 = "%s" } }]

[tool.uv]
note = "theirs"''' % ("e" * 64)


def kernel_packages() -> list[dict]:
    wheels, signers = sample_wheels()
    return [pylock.kernel_package(spec, digest, size, path=f"wheels/{spec.filename}",
                                  signer=signers.get((spec.repo_id, spec.variant))) for spec, digest, size in wheels]  # fmt: skip


def test_a_merge_keeps_every_byte_of_theirs_and_a_second_merge_replaces_only_what_the_first_added() -> None:
    merged = pylock.merge_pylock(THEIRS, kernel_packages())
    assert merged.startswith(THEIRS + "\n\n" + pylock.MERGE_MARKER + "\n")  # theirs had no final newline: one added
    doc = Pylock.from_dict(tomllib.loads(merged))
    assert [p.name for p in doc.packages] == ["tinydep", "org-layer-o1", "org-norm-o1"]
    assert doc.created_by == "uv" and doc.tool == {"uv": {"note": "theirs"}}
    assert tomllib.loads(merged)["packages"][0] == tomllib.loads(THEIRS)["packages"][0]
    assert pylock.merge_pylock(merged, kernel_packages()) == merged  # the same bytes again
    fewer = pylock.merge_pylock(merged, kernel_packages()[:1])
    assert fewer.startswith(THEIRS + "\n") and "org-layer-o1" not in fewer and "org-norm-o1" in fewer


@pytest.mark.parametrize(
    ("theirs", "says"),
    [
        (THEIRS.replace('"tinydep"', '"org-norm-o1"').replace("tinydep-1.0.0", "org_norm_o1-1.0.0"),
         "it already has a package 'org-norm-o1'"),
        ('lock-version = "1.0"\ncreated-by = "pip"\npackages = []\n', "cannot be added to it"),
        ('lock-version = "2.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\ndirectory = { path = "." }\n',
         "pylock version 2.0 is not supported"),
        ("lock-version = ", "not valid TOML"),
        (THEIRS + "\n\n" + pylock.MERGE_MARKER + '\n\n[[packages]]\nname = "mine"\ndirectory = { path = "." }\n',
         "packages[1] ('mine') is below the line kernel-deps replaces but is not a kernel wheel"),
    ],
)
def test_a_lock_that_cannot_take_the_kernels_unchanged_is_refused_saying_why(theirs: str, says: str) -> None:
    with pytest.raises(pylock.PylockError, match=re.escape(says)):
        pylock.merge_pylock(theirs, kernel_packages())


# -- kernels to-wheel writes it -------------------------------------------------------------

def test_to_wheel_locks_the_same_wheels_by_the_same_hashes_per_target_with_markers(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/layer-norm": ">=0.1"}, locked=True)
    wheels = tmp_path / "wheels"
    targets = ["torch213-cxx11-cu128-x86_64-linux", "torch29-metal-aarch64-darwin"]
    result = run_kernels("to-wheel", str(project), "-o", str(wheels), *[a for t in targets for a in ("--target", t)],
                         "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = validated(result, "to-wheel")
    assert [p["file"] for p in report["pylock"]] == [f"pylock.{t}.toml" for t in targets]
    assert not (wheels / "pylock.toml").exists()
    by_file = {w["file"]: w for w in report["wheels"]}
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    for entry, requirements, target in zip(report["pylock"], report["requirements"], targets):
        assert entry["target"] == target and entry["wheels"] == requirements["wheels"]
        text = (wheels / entry["file"]).read_text()
        doc = tomllib.loads(text)
        Pylock.from_dict(doc)
        pinned = re.findall(r"^(\S+)==(\S+) \\\n    --hash=sha256:([0-9a-f]{64})$",
                            (wheels / requirements["file"]).read_text(), re.M)  # fmt: skip
        assert sorted((p["name"], p["version"], p["wheels"][0]["hashes"]["sha256"]) for p in doc["packages"]) == \
            sorted(pinned)  # fmt: skip
        machine = "sys_platform == 'darwin' and platform_machine == 'arm64'" if "darwin" in target else LINUX_X86
        assert doc["environments"] == [machine] and doc["created-by"] == "kernel-deps"
        for package in doc["packages"]:
            (wheel,) = package["wheels"]
            written = by_file[wheel["path"]]
            assert (wheel["name"], wheel["size"]) == (written["file"], written["bytes"])
            assert wheel["size"] == (wheels / wheel["path"]).stat().st_size
            assert hashlib.sha256((wheels / wheel["path"]).read_bytes()).hexdigest() == wheel["hashes"]["sha256"]
            tool = package["tool"]["kernel-deps"]
            locked = lock.get(tool["repo-id"])
            assert (tool["commit"], tool["variant-hash"]) == (locked.sha, locked.variants[tool["variant"]].hash)
            assert package.get("marker") == pylock.variant_marker(tool["variant"])
            assert "attestation-identities" not in package  # the catalogue's builds are unsigned
    # --all-variants: no requirements file, no pylock.toml (several builds of one kernel in one lock).
    every = run_kernels("to-wheel", str(project), "-o", str(tmp_path / "every"), "--all-variants", "--json")
    assert every.returncode == 0 and validated(every, "to-wheel")["pylock"] == []
    assert not list((tmp_path / "every").glob("pylock*"))


def test_a_signed_build_is_attested_by_the_signer_the_lock_records(hub_env, local_sigstore, tmp_path) -> None:
    from tests.fixtures.sigstore_ca import Identity

    repo_id = "kernels-test/pylock-attested"
    identity = Identity(repo_id)
    sign = lambda data, variant: local_sigstore.sign(data, identity)  # noqa: E731
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT, CUDA_VARIANT), sign=sign,
                                                  digest="sha256"),)))  # fmt: skip
    folder = tmp_path / "app"
    folder.mkdir()
    local_sigstore.write_trusted_root(folder / "trusted_root.json")
    trust = '[tool.kernels.trust]\npublishers = ["kernels-test"]\ntrusted-root = "trusted_root.json"\n\n'
    project = write_project(folder, {repo_id: ">=1"}, extra=trust, trusted=())
    assert run_kernels("lock", str(project)).returncode == 0
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(project), "-o", str(wheels), "--target", CUDA_VARIANT)
    assert result.returncode == 0, result.stderr
    (package,) = Pylock.from_dict(tomllib.loads((wheels / "pylock.toml").read_text())).packages
    signer = read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id).signatures[CUDA_VARIANT]
    assert signer.workflow == ".github/workflows/build.yml" and signer.issuer == GITHUB
    assert package.attestation_identities == [
        {"kind": "GitHub", "repository": repo_id, "workflow": "build.yml", "ref": signer.ref}
    ]


def test_a_pylock_file_it_did_not_write_is_never_replaced_nor_written_through_a_link(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    own = 'lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = "numpy"\n'
    (project / "pylock.toml").write_text(own)
    result = run_kernels("to-wheel", ".", "-o", ".", cwd=project)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "pylock.toml is not a pylock file to-wheel wrote, and it is not replaced" in result.stderr
    assert (project / "pylock.toml").read_text() == own and not (project / "requirements.txt").exists()
    assert not list((tmp_path / "hf-cache").rglob("snapshots"))  # refused before anything was fetched
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "pylock.toml").symlink_to(project / "pylock.toml")
    result = run_kernels("to-wheel", str(project), "-o", str(wheels))
    assert result.returncode == 2 and f"{wheels / 'pylock.toml'} is a symbolic link" in result.stderr
    assert (project / "pylock.toml").read_text() == own
    (wheels / "pylock.toml").unlink()
    assert run_kernels("to-wheel", str(project), "-o", str(wheels)).returncode == 0
    stale = (wheels / "pylock.toml").read_text()
    (wheels / "pylock.toml").write_text(stale + "# an old line\n")
    assert run_kernels("to-wheel", str(project), "-o", str(wheels)).returncode == 0  # its own: replaced
    assert (wheels / "pylock.toml").read_text() == stale


def test_a_wheel_url_that_is_no_url_is_bad_input_and_nothing_is_fetched(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    result = run_kernels("to-wheel", str(project), "-o", str(tmp_path / "wheels"), "--wheel-url", "index.internal/pkgs")
    assert result.returncode == 2
    assert result.stderr == "error: --wheel-url index.internal/pkgs: expected the http(s):// or file:// URL the " \
                            "wheels are published under\n"  # fmt: skip
    assert not (tmp_path / "wheels").exists() and not list((tmp_path / "hf-cache").rglob("snapshots"))


# -- real installers ------------------------------------------------------------------------

def uv_binary() -> str:
    """The uv of the test extra (``uv==0.13.9``): beside this Python, else on PATH."""
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if found is None:
        pytest.fail("uv is not installed: pip install -e '.[test]' installs the uv these tests run", pytrace=False)
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout.split()[1]
    assert Version(version).release[:2] == (0, 13), f"{found} is uv {version}; the tests are written for uv 0.13"
    return found


def uv_env(workdir: Path) -> dict[str, str]:
    """uv with no configuration file, a cache of its own and no Python downloads."""
    env = {k: v for k, v in pip_env(workdir).items() if not k.startswith("UV_")}
    env.update(UV_NO_CONFIG="1", UV_CACHE_DIR=str(workdir / "uv-cache"), UV_PYTHON_DOWNLOADS="never")
    return env


def loaded_in(venv: Path, app: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    """The app run by the venv's Python, offline with an empty Hub cache: kernel-deps from this
    checkout and torch from the test environment on the path, the kernel wheel only in the venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELS_"))}
    empty = tmp_path / "empty-hf-cache"
    empty.mkdir(exist_ok=True)
    outer = sysconfig.get_paths()["purelib"]  # torch, huggingface_hub, ... (no kernel wheel)
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(empty), HF_ENDPOINT="http://127.0.0.1:9",
               PYTHONPATH=os.pathsep.join([str(SRC), outer]))  # fmt: skip
    probe = (
        "import runpy, sys; from kernel_deps import load_kernel\n"
        "m = load_kernel('kernels-test/img2gray'); print('origin', m.__kernel_origin__.path)\n"
        f"{''.join(f'import {name}; print({name}.__name__, {name}.__file__)' + chr(10) for name in extra)}"
        "sys.argv = ['grayscale.py']; runpy.run_path('grayscale.py', run_name='__main__')\n"
    )
    return subprocess.run([str(venv / "bin" / "python"), "-c", probe], cwd=app, env=env, capture_output=True, text=True)


def site_packages(venv: Path) -> Path:
    (found,) = venv.glob("lib/python3*/site-packages")
    return found


def tampered(wheel: Path) -> None:
    """Replace ``wheel`` by a valid wheel of the same size whose ``__init__.py`` is another
    (its RECORD updated to match), so only the recorded hash tells it from the one written."""
    original = wheel.read_bytes()
    with zipfile.ZipFile(io.BytesIO(original)) as archive:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    planted = b"raise SystemExit('planted')\n"
    init = f"{IMPORT_NAME}/__init__.py"
    digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(planted).digest()).rstrip(b"=").decode()
    changed = []
    for info, data in entries:
        if info.filename == init:
            data = planted
        elif info.filename.endswith(".dist-info/RECORD"):
            rows = [f"{init},{digest},{len(planted)}" if line.startswith(f"{init},") else line
                    for line in data.decode().splitlines()]  # fmt: skip
            data = ("\n".join(rows) + "\n").encode()
        changed.append((info, data))

    def archive_of(comment: bytes) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as out:
            for info, data in changed:
                out.writestr(info, data)
            out.comment = comment
        return buffer.getvalue()

    data = archive_of(b"x" * (len(original) - len(archive_of(b""))))  # padded to the same size
    assert len(data) == len(original) and data != original
    wheel.write_bytes(data)


SIGNED = "kernels-test/pylock-signed"


@pytest.fixture
def app(img2gray_hub, hub_env, local_sigstore, tmp_path) -> Path:
    """The example app, also depending on a signed kernel (under the tests' own Sigstore), locked."""
    from tests.fixtures.sigstore_ca import Identity

    if SIGNED not in hub_env.repos:
        sign = lambda data, variant: local_sigstore.sign(data, Identity(SIGNED))  # noqa: E731
        hub_env.add_repo(KernelRepo(SIGNED, (Release("1.0.0", variants=(CPU_VARIANT, CUDA_VARIANT), sign=sign,
                                                     digest="sha256"),)))  # fmt: skip
    app = tmp_path / "app"
    shutil.copytree(ROOT / "examples" / "app", app)
    local_sigstore.write_trusted_root(app / "trusted_root.json")
    pyproject = app / "pyproject.toml"
    text = pyproject.read_text().replace('publishers = ["kernels-test"]\n',
                                         'publishers = ["kernels-test"]\ntrusted-root = "trusted_root.json"\n')
    pyproject.write_text(text + f'"{SIGNED}" = ">=1"\n')
    assert run_kernels("lock", str(app)).returncode == 0
    return app


def attested(doc: dict) -> dict[str, list]:
    """Each package's attestation identities, by name (the signed kernel's from its signer)."""
    return {p["name"]: p.get("attestation-identities", []) for p in doc["packages"]}


SIGNED_IDENTITY = [{"kind": "GitHub", "repository": SIGNED, "workflow": "build.yml", "ref": "refs/heads/main"}]


def test_pip_installs_the_pylock_from_a_real_index_into_a_fresh_venv_and_refuses_a_changed_wheel(
    app, tmp_path
) -> None:
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=True)
    assert Version(pip.stdout.split()[1]) >= Version("26.1"), f"pip install -r pylock.toml needs pip 26.1: {pip.stdout}"
    packages = tmp_path / "index-packages"
    wheels = tmp_path / "wheels"
    with PackageIndex(packages, tmp_path / "index") as index:
        published = index.url.removesuffix("simple/") + "packages/"
        result = run_kernels("to-wheel", str(app), "-o", str(wheels), "--wheel-url", published)
        assert result.returncode == 0, result.stderr
        for written in wheels.glob("*.whl"):
            shutil.copy2(written, packages / written.name)  # published: copied into the index's folder
        (wheel,) = wheels.glob(f"{IMPORT_NAME}-*.whl")
        doc = tomllib.loads((wheels / "pylock.toml").read_text())
        assert attested(doc) == {"kernels-test-img2gray-o2": [], "kernels-test-pylock-signed-o2": SIGNED_IDENTITY}
        (entry,) = next(p for p in doc["packages"] if p["name"] == "kernels-test-img2gray-o2")["wheels"]
        assert entry["url"] == published + wheel.name.replace("+", "%2B") and "path" not in entry

        def install(venv: Path) -> subprocess.CompletedProcess:
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
            command = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-index",
                       "--no-deps", "-r", str(wheels / "pylock.toml")]  # fmt: skip
            return subprocess.run(command, env=pip_env(tmp_path / "pip-home"), capture_output=True, text=True,
                                  timeout=300)  # fmt: skip

        venv = tmp_path / "venv"
        installed = install(venv)
        assert installed.returncode == 0, f"{installed.stdout}\n{installed.stderr}\n{index.log_tail()}"
        assert "Successfully installed kernels-test-img2gray-o2-1.1.0+" in installed.stdout
        assert "kernels-test-pylock-signed-o2-1.0.0+" in installed.stdout.splitlines()[-1]
        assert f"Downloading {wheel.name.replace('+', '%2B')}" in installed.stdout  # from the index, by its url
        assert "Using pylock.toml as a requirements source is an experimental feature" in installed.stderr
        tampered(packages / wheel.name)
        refused = install(tmp_path / "venv-changed")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.stderr
    assert f"Expected sha256 {entry['hashes']['sha256']}" in refused.stderr
    assert not list(site_packages(tmp_path / "venv-changed").glob(f"{IMPORT_NAME}*"))
    loaded = loaded_in(venv, app, tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert f"origin {site_packages(venv) / IMPORT_NAME}" in loaded.stdout
    assert f"kernel: {REPO_ID} 1.1.0 ({cpu_variant_name()}" in loaded.stdout
    assert "matches the pure torch reference" in loaded.stdout


def tiny_wheel(folder: Path, name: str = "tinydep", version: str = "1.0.0") -> Path:
    """A pure-Python wheel the project depends on, built here (no index has it)."""
    files = {f"{name}/__init__.py": b"VALUE = 42\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                                                  b"Tag: py3-none-any\n"}  # fmt: skip
    rows = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
            for path, data in files.items()] + [f"{name}-{version}.dist-info/RECORD,,"]  # fmt: skip
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(rows) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(zipfile.ZipInfo(member, (1980, 1, 1, 0, 0, 0)), data)
    return path


def test_uv_installs_the_kernels_merged_into_the_projects_own_uv_export_and_refuses_a_changed_wheel(
    app, tmp_path
) -> None:
    uv, env = uv_binary(), uv_env(tmp_path / "uv-home")
    pyproject = app / "pyproject.toml"  # the app's Python dependency: a wheel built here, from a local index
    pyproject.write_text(pyproject.read_text().replace('dependencies = ["kernel-deps[torch]"]',
                                                       'dependencies = ["tinydep==1.0.0"]'))  # fmt: skip
    packages = tmp_path / "index-packages"
    tiny_wheel(packages)
    wheels = tmp_path / "wheels"
    assert run_kernels("to-wheel", str(app), "-o", str(wheels)).returncode == 0
    with PackageIndex(packages, tmp_path / "index") as index:
        python = ["--python", sys.executable]
        for command in (["lock", "--default-index", index.url, *python],
                        ["export", "--format", "pylock.toml", "-o", "pylock.toml", "--default-index", index.url,
                         *python]):  # fmt: skip
            done = subprocess.run([uv, *command], cwd=app, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
        theirs = (app / "pylock.toml").read_text()
        assert tomllib.loads(theirs)["created-by"] == "uv"
        merged = run_kernels("export", str(app), "--format", "pylock", "--wheels", str(wheels / "pylock.toml"),
                             "-o", str(app / "pylock.toml"))  # fmt: skip
        assert merged.returncode == 0, merged.stderr
        assert merged.stderr == f"Wrote {app / 'pylock.toml'} (pylock format, 2 kernels)\n"
        text = (app / "pylock.toml").read_text()
        assert text.startswith(theirs + "\n" + pylock.MERGE_MARKER + "\n")  # theirs byte for byte
        doc = Pylock.from_dict(tomllib.loads(text))
        assert [p.name for p in doc.packages] == ["tinydep", "kernels-test-img2gray-o2", "kernels-test-pylock-signed-o2"]
        assert attested(tomllib.loads(text))["kernels-test-pylock-signed-o2"] == SIGNED_IDENTITY
        (wheel,) = wheels.glob(f"{IMPORT_NAME}-*.whl")
        assert doc.packages[1].wheels[0].path == f"../wheels/{wheel.name}"  # relative to the merged file

        def install(venv: Path) -> subprocess.CompletedProcess:
            made = subprocess.run([uv, "venv", *python, str(venv)], env=env, capture_output=True, text=True)
            assert made.returncode == 0, made.stderr
            command = [uv, "pip", "install", "--python", str(venv / "bin" / "python"), "-r", str(app / "pylock.toml")]
            return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

        venv = tmp_path / "venv"
        installed = install(venv)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        assert " + kernels-test-img2gray-o2==1.1.0+" in installed.stderr and " + tinydep==1.0.0" in installed.stderr
        assert " + kernels-test-pylock-signed-o2==1.0.0+" in installed.stderr
        assert "The `--pylock` option is experimental" in installed.stderr  # uv 0.13 says so, and installs it
        expected = doc.packages[1].wheels[0].hashes["sha256"]
        tampered(wheel)
        refused = install(tmp_path / "venv-changed")
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "Hash mismatch for `kernels-test-img2gray-o2==1.1.0+" in refused.stderr
    assert f"sha256:{expected}" in refused.stderr
    assert not list(site_packages(tmp_path / "venv-changed").glob(f"{IMPORT_NAME}*"))
    loaded = loaded_in(venv, app, tmp_path, "tinydep")
    assert loaded.returncode == 0, loaded.stderr
    assert f"origin {site_packages(venv) / IMPORT_NAME}" in loaded.stdout
    assert f"tinydep {site_packages(venv) / 'tinydep' / '__init__.py'}" in loaded.stdout
    assert "matches the pure torch reference" in loaded.stdout
    # Exported again (the wheels rewritten): what it added is replaced, theirs stays as it was.
    assert run_kernels("to-wheel", str(app), "-o", str(wheels)).returncode == 0
    again = run_kernels("export", str(app), "--format", "pylock", "--wheels", str(wheels / "pylock.toml"),
                        "-o", str(app / "pylock.toml"))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (app / "pylock.toml").read_text() == text


def test_export_refuses_wheels_that_are_not_the_locks_or_changed_since_written(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    wheels = tmp_path / "wheels"
    assert run_kernels("to-wheel", str(project), "-o", str(wheels)).returncode == 0
    out = tmp_path / "out" / "pylock.toml"
    out.parent.mkdir()

    def export(*args: str):
        return run_kernels("export", str(project), "--format", "pylock", *args)

    alone = export("--wheels", str(wheels / "pylock.toml"), "-o", str(out))
    assert alone.returncode == 0, alone.stderr  # no lock there yet: the kernels alone, mergeable later
    doc = Pylock.from_dict(tomllib.loads(out.read_text()))
    assert doc.created_by == "kernel-deps" and doc.packages[0].wheels[0].path.startswith("../wheels/")
    assert export("--wheels", str(wheels / "pylock.toml"), "-o", str(out)).returncode == 0
    assert Pylock.from_dict(tomllib.loads(out.read_text())) == doc
    bad = [
        (("-o", str(out)), "--format pylock takes --wheels PYLOCK"),
        (("--wheels", str(wheels / "pylock.toml"), "-o", str(tmp_path / "deps.toml")), "only by the name pylock.toml"),
        (("--wheels", str(wheels / "requirements.txt"), "-o", str(out)), "not a valid pylock.toml (not valid TOML"),
    ]
    for args, says in bad:
        result = export(*args)
        assert result.returncode == 2 and says in result.stderr, result.stderr
    # Another lock: the wheels of activation 1.2.0 are not what it pins.
    relocked = write_project(tmp_path / "other", {"kernels-test/activation": "==1.1.0"}, locked=True)
    stale = run_kernels("export", str(relocked), "--format", "pylock", "--wheels", str(wheels / "pylock.toml"),
                        "-o", str(out))  # fmt: skip
    assert stale.returncode == 2 and "run 'kernels to-wheel' again, then export" in stale.stderr, stale.stderr
    (wheel,) = wheels.glob("*.whl")
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    changed = export("--wheels", str(wheels / "pylock.toml"), "-o", str(out))
    assert changed.returncode == 1 and f"the wheel {wheel} is not the file kernels to-wheel wrote" in changed.stderr
    assert Pylock.from_dict(tomllib.loads(out.read_text())) == doc  # left as it was
    assert json.loads(json.dumps(doc.to_dict()))  # plain data all the way down
