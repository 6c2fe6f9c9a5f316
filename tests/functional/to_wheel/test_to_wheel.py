"""`kernels to-wheel`: the locked variants as wheels, served by a real index, installed by real pip.

The round trip runs what a fleet that installs only from a package index runs: the
example app is locked against the local Hub, ``kernels to-wheel`` writes its kernel's
wheel and a hash-pinned requirements.txt, pypiserver (from PyPI, unmodified) serves the
wheel on 127.0.0.1, the environment's pip installs it with ``--require-hashes`` into a
fresh folder from that index alone, and the app, in a process of its own with
``HF_HUB_OFFLINE=1`` and an empty Hub cache, loads the native img2gray op from the
installed wheel and checks it against pure torch.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from kernel_deps.core.hashing import variant_hash
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import UNIVERSAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.img2gray_kernel import REPO_ID, cpu_variant_name
from tests.fixtures.package_index import PackageIndex, pip_env, pip_install
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
IMPORT_NAME = "kernels_test_img2gray_o2"


def app_env(tmp_path: Path, target: Path) -> dict[str, str]:
    """The app's environment: offline, an empty Hub cache, the installed wheels on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELS_"))}
    empty = tmp_path / "empty-hf-cache"
    empty.mkdir(exist_ok=True)
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(empty), HF_ENDPOINT="http://127.0.0.1:9",
               PYTHONPATH=os.pathsep.join([str(SRC), str(target)]))  # fmt: skip
    return env


@pytest.fixture
def app_wheels(img2gray_hub, hub_env, tmp_path) -> tuple[Path, Path]:
    """The example app locked, and ``kernels to-wheel`` run on it: (app, wheels folder)."""
    app = tmp_path / "app"
    shutil.copytree(ROOT / "examples" / "app", app)
    assert run_kernels("lock", str(app)).returncode == 0
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(app), "-o", str(wheels))
    assert result.returncode == 0, result.stderr
    return app, wheels


@pytest.fixture
def installed(app_wheels, tmp_path) -> tuple[Path, Path]:
    """The app's kernel wheel served by pypiserver and installed from it by pip: (app, target)."""
    app, wheels = app_wheels
    packages = tmp_path / "index-packages"
    packages.mkdir()
    for wheel in wheels.glob("*.whl"):
        shutil.copy2(wheel, packages / wheel.name)  # the private-index recipe: copy into its folder
    target = tmp_path / "site"
    with PackageIndex(packages, tmp_path / "index") as index:
        result = pip_install(index, wheels / "requirements.txt", target, tmp_path / "pip-home")
        assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{index.log_tail()}"
        assert f"Looking in indexes: {index.url}" in result.stdout, result.stdout  # that index, and no other
    return app, target


def test_the_app_loads_its_kernel_offline_from_a_wheel_installed_from_a_real_index(
    installed, img2gray_hub, tmp_path
) -> None:
    app, target = installed
    output = tmp_path / "gray.pgm"
    result = subprocess.run([sys.executable, "grayscale.py", "--output", str(output)], cwd=app,
                            env=app_env(tmp_path, target), capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    commit = img2gray_hub.repos[REPO_ID].commits["1.1.0"]
    assert f"kernel: {REPO_ID} 1.1.0 ({cpu_variant_name()}, commit {commit[:12]})" in result.stdout
    assert "matches the pure torch reference" in result.stdout
    assert output.read_bytes().startswith(b"P5\n640 480\n255\n")
    assert not list((tmp_path / "empty-hf-cache").iterdir())  # nothing came from (or went to) the Hub cache
    # Loaded from the installed wheel's own files, through the verified import.
    probe = (
        "from kernel_deps import load_kernel; m = load_kernel('kernels-test/img2gray'); "
        "print(m.__kernel_origin__.path); print(m.__file__)"
    )
    shown = subprocess.run([sys.executable, "-c", probe], cwd=app, env=app_env(tmp_path, target),
                           capture_output=True, text=True)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [str(target / IMPORT_NAME), str(target / IMPORT_NAME / "__init__.py")]


def test_the_bytecode_pip_compiled_beside_the_installed_wheel_is_never_run(installed, tmp_path) -> None:
    import py_compile

    UNCHECKED = py_compile.PycInvalidationMode.UNCHECKED_HASH
    app, target = installed
    planted = tmp_path / "planted.py"
    planted.write_text("raise SystemExit('planted bytecode ran')\n")
    compiled = sorted((target / IMPORT_NAME / "__pycache__").glob("*.pyc"))
    assert compiled  # pip compiled the package's sources at install time
    for pyc in compiled:  # bytecode Python would run without looking at the source again
        py_compile.compile(str(planted), cfile=str(pyc), invalidation_mode=UNCHECKED)
    env = app_env(tmp_path, target)
    plain = subprocess.run([sys.executable, "-c", f"import {IMPORT_NAME}"], env=env, capture_output=True, text=True)
    assert "planted bytecode ran" in plain.stderr  # a plain import takes it
    result = subprocess.run([sys.executable, "grayscale.py"], cwd=app, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "matches the pure torch reference" in result.stdout


def test_the_installed_wheel_is_importable_as_a_plain_package(installed, app_wheels, tmp_path) -> None:
    _, target = installed
    # The install line requirements.txt carries for its wheels, run as written from another
    # folder into a fresh environment, offline: the file finds the wheels in its own folder.
    _, wheels = app_wheels
    requirements = wheels / "requirements.txt"
    written = [line for line in requirements.read_text().splitlines() if line.startswith("# The wheels beside this file: ")]
    command = written[0].split(": ", 1)[1].split()
    assert command[:2] == ["pip", "install"] and command[-2:] == ["-r", "requirements.txt"], written
    venv, elsewhere = tmp_path / "fresh-venv", tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *command[1:-1], str(requirements)],
                         cwd=elsewhere, env=pip_env(tmp_path / "fresh-pip-home"), capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert f"Looking in links: {wheels}" in pip.stdout, pip.stdout
    probe = "import importlib.metadata as m; print(m.version('kernels-test-img2gray-o2'))"
    version = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=elsewhere)
    assert version.stdout.startswith("1.1.0+"), version.stdout + version.stderr
    probe = (
        f"import torch, {IMPORT_NAME} as k; from tests.fixtures.img2gray_kernel import reference_img2gray; "
        "x = torch.randint(0, 256, (5, 7, 3), dtype=torch.uint8); "
        "print(k.__version__, torch.equal(k.img2gray(x), reference_img2gray(x)))"
    )
    env = app_env(tmp_path, target)
    env["PYTHONPATH"] += os.pathsep + str(ROOT)
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1.1.0", "True"]


def test_a_changed_installed_file_is_refused_naming_it(installed, tmp_path) -> None:
    app, target = installed
    init = target / IMPORT_NAME / "__init__.py"
    init.write_text(init.read_text() + "\nprint('planted')\n")
    result = subprocess.run([sys.executable, "grayscale.py"], cwd=app, env=app_env(tmp_path, target),
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 1
    assert "refusing to load kernels-test/img2gray" in result.stderr
    assert f"the installed wheel kernels-test-img2gray-o2 1.1.0+" in result.stderr
    assert "__init__.py modified (expected " in result.stderr
    assert "planted" not in result.stdout and "Traceback" not in result.stderr


def test_a_file_added_to_the_installed_package_is_refused_naming_it(installed, tmp_path) -> None:
    app, target = installed
    (target / IMPORT_NAME / "planted.py").write_text("raise SystemExit('PLANTED-RAN')\n")
    result = subprocess.run([sys.executable, "grayscale.py"], cwd=app, env=app_env(tmp_path, target),
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 1
    assert "planted.py extra" in result.stderr and "PLANTED-RAN" not in result.stderr


def test_the_wheels_and_requirements_are_byte_identical_from_the_same_lock(app_wheels, tmp_path, monkeypatch) -> None:
    app, first = app_wheels
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "second-cache"))  # downloaded again, from nothing
    second = tmp_path / "again"
    assert run_kernels("to-wheel", str(app), "-o", str(second)).returncode == 0
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir()) and len(names) == 3  # the wheel, requirements, pylock
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_the_wheel_holds_exactly_the_locked_bytes_with_a_valid_record(app_wheels, img2gray_hub) -> None:
    app, wheels = app_wheels
    (wheel,) = wheels.glob("*.whl")
    name, version, build, tags = parse_wheel_filename(wheel.name)
    variant = cpu_variant_name()
    assert name == canonicalize_name("kernels-test-img2gray-o2")
    assert version == Version(f"1.1.0+{variant.removesuffix('-x86_64-linux').replace('-', '.')}")
    assert {str(t) for t in tags} == {"cp39-abi3-manylinux_2_28_x86_64"}
    assert tags & set(sys_tags())  # pip on this machine takes it
    locked = read_lock(app / "kernels.lock", purpose="use").lock.get(REPO_ID)
    with zipfile.ZipFile(wheel) as archive:
        infos = archive.infolist()
        info_dir = f"{IMPORT_NAME}-{version}.dist-info"
        record = json.loads(archive.read(f"{info_dir}/kernel_deps.json"))
        metadata = archive.read(f"{info_dir}/METADATA").decode()
        rows = list(csv.reader(io.StringIO(archive.read(f"{info_dir}/RECORD").decode())))
        package = {i.filename.removeprefix(f"{IMPORT_NAME}/"): archive.read(i) for i in infos
                   if i.filename.startswith(f"{IMPORT_NAME}/")}  # fmt: skip
        import base64
        import hashlib

        for path, digest, size in rows[:-1]:
            data = archive.read(path)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert int(size) == len(data)
    assert rows[-1] == [f"{info_dir}/RECORD", "", ""] and infos[-1].filename == f"{info_dir}/RECORD"
    assert [i.filename for i in infos[:-1]] == sorted(i.filename for i in infos[:-1])
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in infos}
    assert {m for f, m in modes.items() if f.endswith(".so")} == {0o755}
    assert {m for f, m in modes.items() if not f.endswith(".so")} == {0o644}
    assert (record["repo_id"], record["commit"], record["variant"]) == (REPO_ID, locked.sha, variant)
    assert record["hash"] == locked.variants[variant].hash == variant_hash(record["files"].items())
    assert sorted(package) == sorted(record["files"])  # exactly the variant's files, no bytecode
    assert "Requires-Dist: torch==2.13.*" in metadata.splitlines()
    assert "Name: kernels-test-img2gray-o2" in metadata.splitlines()


def test_requirements_pin_every_wheel_by_version_and_hash(app_wheels) -> None:
    import hashlib

    _, wheels = app_wheels
    (wheel,) = wheels.glob("*.whl")
    _, version, _, _ = parse_wheel_filename(wheel.name)
    text = (wheels / "requirements.txt").read_text()
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert f"kernels-test-img2gray-o2=={version} \\\n    --hash=sha256:{digest}\n" in text


def test_transitive_kernels_get_wheels_that_require_each_other(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/layer-norm": ">=0.1"}, locked=True)
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(project), "-o", str(wheels), "--target", "torch213-cxx11-cu128-x86_64-linux",
                         "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = validated(result, "to-wheel")
    by_repo = {w["repo_id"]: w for w in report["wheels"]}
    assert sorted(by_repo) == ["kernels-test/activation", "kernels-test/layer-norm"]
    assert by_repo["kernels-test/layer-norm"]["requires"] == ["torch==2.13.*", "kernels-test-activation-o2==1.2.0"]
    # activation 1.2.0's stable-ABI build serves the target before its exact one, as the loader picks.
    assert by_repo["kernels-test/activation"]["variant"] == "torch-stable-abi29-cu128-x86_64-linux"
    assert by_repo["kernels-test/activation"]["requires"] == ["torch>=2.9"]
    locals_ = {"kernels-test/activation": "torch.stable.abi29.cu128", "kernels-test/layer-norm": "torch213.cxx11.cu128"}
    for wheel in report["wheels"]:
        name, version, _, tags = parse_wheel_filename(wheel["file"])
        assert str(name) == wheel["name"] and str(version) == wheel["version"]
        assert version.local == locals_[wheel["repo_id"]]
        assert {str(t) for t in tags} == {wheel["tag"]} == {"cp39-abi3-manylinux_2_28_x86_64"}
    assert [r["file"] for r in report["requirements"]] == ["requirements.txt"]
    lines = (wheels / "requirements.txt").read_text()
    assert lines.count("--hash=sha256:") == 2


def test_several_targets_get_one_requirements_file_each(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    wheels = tmp_path / "wheels"
    targets = ["torch213-cxx11-cu128-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux"]
    result = run_kernels("to-wheel", str(project), "-o", str(wheels), *[a for t in targets for a in ("--target", t)],
                         "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = validated(result, "to-wheel")
    assert sorted(r["file"] for r in report["requirements"]) == sorted(f"requirements-{t}.txt" for t in targets)
    assert not (wheels / "requirements.txt").exists()
    for target in targets:
        text = (wheels / f"requirements-{target}.txt").read_text()
        assert f"for the deployment target {target}" in text and f"-r requirements-{target}.txt" in text
        assert text.count("--hash=sha256:") == 1


def test_a_kernel_outside_any_project_gets_its_wheels(img2gray_hub, hub_env, tmp_path) -> None:
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", f"{REPO_ID}@v1.0.0", "-o", str(wheels), "--trust", "kernels-test")
    assert result.returncode == 0, result.stderr
    (wheel,) = wheels.glob("*.whl")
    assert parse_wheel_filename(wheel.name)[1].public == "1.0.0"
    assert (wheels / "requirements.txt").is_file()


def test_a_kernel_from_a_publisher_nobody_trusts_is_refused_and_nothing_written(
    img2gray_hub, hub_env, tmp_path
) -> None:
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", f"{REPO_ID}@v1.0.0", "-o", str(wheels))
    assert result.returncode == 1
    assert "kernels-test/img2gray is not from a publisher the Hub trusts" in result.stderr
    assert "--trust" in result.stderr and not wheels.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--all-variants", "--target", "torch213-cxx11-cpu-x86_64-linux"],
         "--all-variants writes a wheel of every variant; drop --target and --all-targets"),
        (["--trust", "kernels-test"], "--trust is for ORG/NAME@REVISION"),
    ],
)
def test_bad_options_are_one_line_exit_2_and_nothing_written(hub_env, tmp_path, args, message) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(project), "-o", str(wheels), *args)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not wheels.exists()


def test_an_output_that_is_a_file_is_bad_input_and_nothing_is_fetched(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    output = tmp_path / "wheels"
    output.write_text("not a folder\n")
    result = run_kernels("to-wheel", str(project), "-o", str(output))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: -o {output}: is not a folder; pass the folder the wheels go into"
    assert not list((tmp_path / "hf-cache").rglob("snapshots"))  # nothing downloaded


def test_all_variants_writes_every_locked_build_and_no_requirements_file(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(project), "-o", str(wheels), "--all-variants", "--json")
    assert result.returncode == 0, result.stderr
    report = validated(result, "to-wheel")
    locked = read_lock(project / "kernels.lock", purpose="use").lock.get("kernels-test/activation")
    assert sorted(w["variant"] for w in report["wheels"]) == sorted(locked.variants)
    assert report["requirements"] == [] and sorted(p.name for p in wheels.iterdir()) == sorted(
        w["file"] for w in report["wheels"]
    )
    assert "Wrote 4 wheels to" in run_kernels("to-wheel", str(project), "-o", str(wheels), "--all-variants").stdout


# Repo ids whose wheels the old rule ("/" as "-", PEP 503-normalized) gave one name: one wheel
# lost, requirements.txt pinning one name twice, both packages in one site-packages folder.
CONFUSABLE = {"kt/kernels-x": "kt-kernels-x-o1", "kt-kernels/x": "kt-kernels-x-o2",
              "kt/dot.x": "kt-dot-x-o1x68", "kt/dot_x": "kt-dot-x-o1x4g"}  # fmt: skip


def test_repos_the_old_names_confused_install_side_by_side_from_an_index_and_each_loads(hub_env, tmp_path) -> None:
    for repo_id in CONFUSABLE:  # one of them ships a file whose name needs quoting in RECORD
        extra = ((("a,b.py", b"COMMA = True\n"),) if repo_id == "kt/kernels-x" else ())
        hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(UNIVERSAL_VARIANT,), extra_files=extra),)))
    project = write_project(tmp_path / "app", {repo_id: ">=1" for repo_id in CONFUSABLE}, locked=True,
                            trusted=("kt", "kt-kernels"))  # fmt: skip
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(project), "-o", str(wheels), "--json")
    assert result.returncode == 0, result.stderr
    report = validated(result, "to-wheel")
    assert {w["repo_id"]: w["name"] for w in report["wheels"]} == CONFUSABLE
    assert len({w["file"] for w in report["wheels"]}) == 4 == len(list(wheels.glob("*.whl")))
    pins = [line.split("==")[0] for line in (wheels / "requirements.txt").read_text().splitlines() if "==" in line]
    assert sorted(pins) == sorted(CONFUSABLE.values())  # each name pinned once
    (comma,) = [w["file"] for w in report["wheels"] if w["repo_id"] == "kt/kernels-x"]
    with zipfile.ZipFile(wheels / comma) as archive:
        (record,) = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
        rows = list(csv.reader(io.StringIO(archive.read(record).decode())))
    assert {len(row) for row in rows} == {3} and "kt_kernels_x_o1/a,b.py" in [row[0] for row in rows]

    packages = tmp_path / "index-packages"
    shutil.copytree(wheels, packages, ignore=shutil.ignore_patterns("*.txt"))
    target = tmp_path / "site"
    with PackageIndex(packages, tmp_path / "index") as index:
        installed = pip_install(index, wheels / "requirements.txt", target, tmp_path / "pip-home")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "WARNING" not in installed.stdout + installed.stderr  # pip reads every RECORD row as three fields
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info")) == sorted(
        name.replace("-", "_") for name in CONFUSABLE.values())  # fmt: skip
    probe = (
        "import sys; from kernel_deps import load_kernel\n"
        "for repo_id in sys.argv[2:]:\n"
        "    m = load_kernel(repo_id, lockfile=sys.argv[1]); print(m.describe(), m.__kernel_origin__.path)\n"
    )
    loaded = subprocess.run([sys.executable, "-c", probe, str(project / "kernels.lock"), *CONFUSABLE],
                            env=app_env(tmp_path, target), capture_output=True, text=True)  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.splitlines() == [
        f"{repo_id} 1.0.0 {UNIVERSAL_VARIANT} {target / name.replace('-', '_')}" for repo_id, name in CONFUSABLE.items()
    ]


def test_two_builds_that_would_be_one_wheel_are_refused_naming_both_before_anything_is_fetched(
    hub_env, tmp_path
) -> None:
    # windows x86_64 and amd64 are one platform tag, win_amd64: one wheel file would overwrite the other.
    builds = ("torch213-cpu-x86_64-windows", "torch213-cpu-amd64-windows")
    hub_env.add_repo(KernelRepo("kernels-test/two-windows", (Release("1.0.0", variants=builds),)))
    project = write_project(tmp_path / "app", {"kernels-test/two-windows": ">=1"}, locked=True)
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(project), "-o", str(wheels), "--all-variants")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "error: no wheels written: kernels-test/two-windows torch213-cpu-amd64-windows and kernels-test/two-windows "
        "torch213-cpu-x86_64-windows would both be the wheel kernels_test_two_windows_o2-1.0.0+torch213.cpu-*-"
        "win_amd64.whl; choose the builds with --target"
    ]
    assert not wheels.exists() and not list((tmp_path / "hf-cache").rglob("snapshots"))


@pytest.mark.cuda
def test_a_cuda_build_as_a_wheel_is_installed_by_pip_and_loaded_on_the_gpu(tmp_path, monkeypatch) -> None:
    # The CUDA variant compiled on this machine, placed in the cache as kernels download places it.
    import hashlib

    import torch

    from kernel_deps.cache import store as cache
    from kernel_deps.core.hashing import git_blob_id
    from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock, write_lockfile
    from tests.fixtures.img2gray_kernel import build_cuda_variant, variant_name
    from tests.fixtures.package_index import pip_env

    if not torch.cuda.is_available() or torch.version.cuda is None:
        pytest.fail("--cuda asks for the CUDA tests, but torch sees no CUDA device", pytrace=False)
    files, variant = build_cuda_variant("1.1.0"), variant_name("cuda")
    root = tmp_path / "cache"
    monkeypatch.setenv("KERNELS_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = cache.repo_dir(REPO_ID, root=root)
    names = {}
    for rel, data in files.items():
        names[rel] = hashlib.sha256(data).hexdigest() if rel.endswith(".so") else git_blob_id(data)  # .so in LFS
        cache.blob_path(repo, names[rel]).parent.mkdir(parents=True, exist_ok=True)
        cache.blob_path(repo, names[rel]).write_bytes(data)
    commit = "c0ffee" + "0" * 34
    cache.place_variant(repo, commit, variant, names)
    locked = {variant: VariantLock(hash=variant_hash(names.items()))}
    kernel = LockedKernel(repo_id=REPO_ID, sha=commit, variants=locked, version="v1.1.0", requirement=">=1")
    project = write_project(tmp_path / "app", {REPO_ID: ">=1"})
    write_lockfile(project / "kernels.lock", Lockfile(kernels=(kernel,)))

    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(project), "-o", str(wheels))
    assert result.returncode == 0, result.stderr
    (wheel,) = wheels.glob("*.whl")
    cuda = "cu" + "".join(torch.version.cuda.split(".")[:2])
    assert parse_wheel_filename(wheel.name)[1].local.endswith(f".{cuda}")  # the CUDA version is in the version
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--require-hashes", "--no-deps", "--no-index",
                          "--find-links", str(wheels), "--target", str(target), "-r", str(wheels / "requirements.txt")],
                         env=pip_env(tmp_path), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert pip.returncode == 0, pip.stdout + pip.stderr
    shutil.rmtree(root)
    probe = (
        "import torch; from kernel_deps import load_kernel\n"
        "from tests.fixtures.img2gray_kernel import reference_img2gray\n"
        f"k = load_kernel({REPO_ID!r}, lockfile={str(project / 'kernels.lock')!r})\n"
        "x = torch.randint(0, 256, (480, 640, 3), dtype=torch.uint8, device='cuda')\n"
        "y = k.img2gray(x); torch.cuda.synchronize()\n"
        "print(y.device.type, torch.equal(y.cpu(), reference_img2gray(x.cpu())), k.__kernel_origin__.path)\n"
    )
    env = app_env(tmp_path, target)
    env["PYTHONPATH"] += os.pathsep + str(ROOT)
    shown = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["cuda", "True", str(target / IMPORT_NAME)]


def test_a_requirements_file_it_did_not_write_is_never_replaced(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    own = "numpy==2.1.0\nrequests==2.32.3\n"
    (project / "requirements.txt").write_text(own)
    result = run_kernels("to-wheel", ".", "-o", ".", cwd=project)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "requirements.txt is not a requirements file to-wheel wrote" in result.stderr
    assert (project / "requirements.txt").read_text() == own and not list(project.glob("*.whl"))
    assert not list((tmp_path / "hf-cache").rglob("snapshots"))  # refused before anything was fetched
    # Per target, the same: a requirements-<target>.txt of the project's own stays.
    targets = ["torch213-cxx11-cu128-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux"]
    (project / f"requirements-{targets[1]}.txt").write_text(own)
    result = run_kernels("to-wheel", ".", "-o", ".", *[a for t in targets for a in ("--target", t)], cwd=project)
    assert result.returncode == 2 and f"requirements-{targets[1]}.txt is not a requirements file" in result.stderr
    assert (project / f"requirements-{targets[1]}.txt").read_text() == own
    # One it wrote itself is replaced by the next run.
    wheels = tmp_path / "wheels"
    assert run_kernels("to-wheel", str(project), "-o", str(wheels)).returncode == 0
    (wheels / "requirements.txt").write_text((wheels / "requirements.txt").read_text() + "# an old line\n")
    again = run_kernels("to-wheel", str(project), "-o", str(wheels))
    assert again.returncode == 0, again.stderr
    assert "# an old line" not in (wheels / "requirements.txt").read_text()


def test_to_wheel_writes_nothing_through_a_planted_link(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/activation": "==1.2.0"}, locked=True)
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.parent.mkdir()
    bashrc.write_text("export PATH=$HOME/bin:$PATH\n")
    # A checkout commits wheels/requirements.txt -> ~/.bashrc.
    wheels = project / "wheels"
    wheels.mkdir()
    (wheels / "requirements.txt").symlink_to(bashrc)
    result = run_kernels("to-wheel", str(project), "-o", str(wheels))
    assert result.returncode == 2 and f"{wheels / 'requirements.txt'} is a symbolic link" in result.stderr
    assert bashrc.read_text() == "export PATH=$HOME/bin:$PATH\n" and not list(wheels.glob("*.whl"))
    # A wheel's own name planted as a link: refused before any wheel or requirements file is written.
    first = tmp_path / "first"
    assert run_kernels("to-wheel", str(project), "-o", str(first)).returncode == 0
    (wheel,) = first.glob("*.whl")
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / wheel.name).symlink_to(bashrc)
    result = run_kernels("to-wheel", str(project), "-o", str(planted))
    assert result.returncode == 2 and f"{planted / wheel.name} is a symbolic link" in result.stderr, result.stderr
    assert bashrc.read_text() == "export PATH=$HOME/bin:$PATH\n"
    assert sorted(p.name for p in planted.iterdir()) == [wheel.name]
    # -o itself a link to a folder elsewhere.
    (tmp_path / "linked").symlink_to(bashrc.parent)
    result = run_kernels("to-wheel", str(project), "-o", str(tmp_path / "linked"))
    assert result.returncode == 2 and "is a symbolic link" in result.stderr
    assert sorted(p.name for p in bashrc.parent.iterdir()) == [".bashrc"]
