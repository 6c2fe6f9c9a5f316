"""The img2gray sample kernel: a real TORCH_LIBRARY op, compiled here and published.

A build's op namespace can be registered once per process, so every check that loads a
variant runs in a fresh interpreter (one per group of checks) and reports back as JSON;
the pytest process itself never loads the library.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.fixtures.builder import build_repo, git_blob_id, lfs_pointer
from tests.fixtures.img2gray_kernel import (
    REPO_ID,
    build_cpu_variant,
    build_cuda_variant,
    build_info,
    cpu_variant_name,
    img2gray_repo,
    ops_namespace,
    reference_img2gray,
    variant_name,
    write_variant,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


def require_cuda(*, toolkit: bool = False) -> None:
    """Fail (not skip) a ``cuda``-marked test run with ``--cuda`` on a machine that cannot run it."""
    if not torch.cuda.is_available():
        pytest.fail("--cuda asks for the CUDA tests, but torch sees no CUDA device", pytrace=False)
    if toolkit and torch.version.cuda is None:
        pytest.fail("--cuda asks for the CUDA tests, but this torch is not a CUDA build", pytrace=False)

# Imports each variant folder given on the command line as a package, in order, then
# runs a check's body; the body hands its result to emit().
_PRELUDE = """
import importlib.util, json, sys
import torch
from tests.fixtures.img2gray_kernel import reference_img2gray

def _load(index, path):
    name = f"img2gray_under_test_{index}"
    spec = importlib.util.spec_from_file_location(name, f"{path}/__init__.py", submodule_search_locations=[path])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

kernels = [_load(index, path) for index, path in enumerate(sys.argv[1:])]
kernel = kernels[0] if kernels else None

def emit(result):
    print("RESULT " + json.dumps(result))

def attempt(call):
    # [exception type, message without the C++ backtrace], or None if nothing was raised.
    try:
        call()
    except Exception as error:
        return [type(error).__name__, str(error).split("\\nException raised from")[0]]
    return None
"""

# (height, width): a single pixel, single rows and columns, odd sizes, an empty image,
# and one large enough to be split across threads.
SHAPES = [(1, 1), (1, 7), (7, 1), (3, 5), (17, 31), (64, 48), (0, 4), (480, 640)]
DTYPES = ["uint8", "float32"]
EAGER_CASES = [(height, width, dtype) for height, width in SHAPES for dtype in DTYPES]

# Checks the op on one image per case; float32 images span negative values and values
# far outside [0, 1] too. Every case must equal the reference bit for bit.
_EAGER_BODY = """
cases = json.loads(CASES)
generator = torch.Generator().manual_seed(20250101)
results = {}
for height, width, dtype, device in cases:
    if dtype == "uint8":
        image = torch.randint(0, 256, (height, width, 3), dtype=torch.uint8, generator=generator)
    else:
        image = (torch.rand((height, width, 3), generator=generator) - 0.25) * 1000
    gray = kernel.img2gray(image.to(device)).cpu()
    expected = reference_img2gray(image)
    results[f"{height}x{width}-{dtype}-{device}"] = {
        "shape": list(gray.shape),
        "dtype": str(gray.dtype),
        "equal": torch.equal(gray, expected),
        "max_diff": (gray.double() - expected.double()).abs().max().item() if gray.numel() else 0.0,
    }
# A strided view: the wrapper packs it before calling the kernel.
wide = torch.randint(0, 256, (9, 22, 3), dtype=torch.uint8, generator=generator)
results["view"] = {"equal": torch.equal(kernel.img2gray(wide[:, ::2]), reference_img2gray(wide[:, ::2]))}
emit(results)
"""


def run_with_variants(body: str, *variant_dirs: Path, timeout: float = 600) -> dict:
    """Run ``body`` in a fresh interpreter with ``variant_dirs`` imported; returns what it emitted."""
    result = subprocess.run(
        [sys.executable, "-c", _PRELUDE + body, *map(str, variant_dirs)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.fixture(scope="module")
def cpu_variant() -> dict[str, bytes]:
    """The CPU variant of img2gray 1.0.0 for this machine (compiled once per cache key)."""
    return build_cpu_variant("1.0.0")


@pytest.fixture(scope="module")
def cpu_variant_dir(cpu_variant: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_variant(cpu_variant, tmp_path_factory.mktemp("img2gray") / cpu_variant_name())


@pytest.fixture(scope="module")
def eager_results(cpu_variant_dir: Path) -> dict:
    cases = json.dumps([[h, w, dtype, "cpu"] for h, w, dtype in EAGER_CASES])
    return run_with_variants(f"CASES = {cases!r}\n" + _EAGER_BODY, cpu_variant_dir)


def test_variant_files_and_metadata(cpu_variant: dict[str, bytes]) -> None:
    namespace = ops_namespace("1.0.0")
    assert re.fullmatch(r"_img2gray_[0-9a-f]{10}", namespace)
    assert set(cpu_variant) == {"__init__.py", "_ops.py", "metadata.json", f"{namespace}.abi3.so"}
    metadata = json.loads(cpu_variant["metadata.json"])
    assert metadata == {
        "name": "img2gray",
        "id": namespace,
        "version": "1.0.0",
        "license": "apache-2.0",
        "python-depends": [],
        "kernel-depends": [],
        "backend": {"type": "cpu"},
    }
    assert f'OPS_NAMESPACE = "{namespace}"'.encode() in cpu_variant["_ops.py"]
    for placeholder in (b"@OPS_NAMESPACE@", b"@DEVICES@", b"@VERSION@"):
        assert placeholder not in cpu_variant["_ops.py"] + cpu_variant["__init__.py"]
    assert cpu_variant[f"{namespace}.abi3.so"].startswith(b"\x7fELF")
    # A torch op library, not a Python extension module.
    assert b"PyInit_" not in cpu_variant[f"{namespace}.abi3.so"]


def test_builds_are_cached_per_version(cpu_variant: dict[str, bytes]) -> None:
    started = time.perf_counter()
    assert build_cpu_variant("1.0.0") == cpu_variant
    assert time.perf_counter() - started < 10, "a cached build must not recompile"
    info = build_info("1.0.0")
    assert info["namespace"] == ops_namespace("1.0.0") and info["variant"] == cpu_variant_name()
    assert info["torch"] == torch.__version__ and info["compile_seconds"] > 0
    assert ops_namespace("1.0.0") != ops_namespace("1.1.0")


def test_variant_name_follows_torch() -> None:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    assert re.fullmatch(rf"torch{major}{minor}-cxx(11|98)-cpu-[a-z0-9_]+-[a-z]+", cpu_variant_name())
    if torch.__version__.startswith("2.13.") and sys.platform == "linux" and cpu_variant_name().endswith("x86_64-linux"):
        assert cpu_variant_name() == "torch213-cxx11-cpu-x86_64-linux"
    if torch.version.cuda is None:
        with pytest.raises(RuntimeError, match="not a CUDA build"):
            variant_name("cuda")


@pytest.mark.parametrize("height,width,dtype", EAGER_CASES, ids=[f"{h}x{w}-{d}" for h, w, d in EAGER_CASES])
def test_op_matches_reference(eager_results: dict, height: int, width: int, dtype: str) -> None:
    result = eager_results[f"{height}x{width}-{dtype}-cpu"]
    assert result["shape"] == [height, width]
    assert result["dtype"] == f"torch.{dtype}"
    assert result["equal"], f"max difference from the reference: {result['max_diff']}"


def test_op_accepts_strided_views(eager_results: dict) -> None:
    assert eager_results["view"]["equal"]


_COMPILE_BODY = """
import time
from torch.library import opcheck
results = {}
generator = torch.Generator().manual_seed(7)
images = [
    image.to(DEVICE)
    for image in (
        torch.randint(0, 256, (31, 17, 3), dtype=torch.uint8, generator=generator),
        torch.randint(0, 256, (5, 9, 3), dtype=torch.uint8, generator=generator),
        torch.rand((12, 20, 3), generator=generator),
    )
]

# The op's registrations (schema, fake impl, functionalization) as torch's own checker sees them.
for image in images:
    output = torch.empty(image.shape[:2], dtype=image.dtype, device=image.device)
    failures = {k: v for k, v in opcheck(kernel.ops.img2gray.default, (image, output)).items() if v != "SUCCESS"}
    results.setdefault("opcheck_failures", []).extend(failures.items())

def to_unit_gray(image):
    # The op between other ops, so the compiler has something to fuse around it.
    return kernel.img2gray(image.float() * (1.0 / 255.0)).clamp(0.0, 1.0) * 2.0 - 1.0

explanation = torch._dynamo.explain(to_unit_gray)(images[0])
results["graph_breaks"] = explanation.graph_break_count
results["op_in_graph"] = any(kernel.OPS_NAMESPACE in graph.code for graph in explanation.graphs)

started = time.perf_counter()
compiled_op = torch.compile(kernel.img2gray, fullgraph=True, backend=BACKEND)
compiled_pipeline = torch.compile(to_unit_gray, fullgraph=True, backend=BACKEND)
results["op_equal"] = [torch.equal(compiled_op(image), reference_img2gray(image)) for image in images]
results["pipeline_close"] = [
    torch.allclose(compiled_pipeline(image), reference_img2gray(image.float() / 255).clamp(0, 1) * 2 - 1, atol=1e-6)
    for image in images[:2]
]
results["seconds"] = time.perf_counter() - started
emit(results)
"""


# Inductor takes about 20 s cold on a 2-core machine (a few seconds with its cache warm).
@pytest.mark.parametrize("backend", ["inductor"])
def test_op_under_torch_compile_fullgraph(cpu_variant_dir: Path, backend: str) -> None:
    results = run_with_variants(f"BACKEND = {backend!r}\nDEVICE = 'cpu'\n" + _COMPILE_BODY, cpu_variant_dir)
    assert results["opcheck_failures"] == []
    assert results["graph_breaks"] == 0 and results["op_in_graph"]
    assert all(results["op_equal"]), results
    assert all(results["pipeline_close"]), results
    print(f"torch.compile(fullgraph=True, backend={backend!r}): {results['seconds']:.1f} s")


# (label, expression building the argument, exception type, message fragment)
BAD_INPUTS = [
    ("list", "[[[0, 0, 0]]]", "TypeError", "expected a torch.Tensor of shape (H, W, 3), got list"),
    ("int", "3", "TypeError", "got int"),
    ("2-d", "torch.zeros(4, 4, dtype=torch.uint8)", "ValueError", "shape (H, W, 3), got shape (4, 4)"),
    ("4 channels", "torch.zeros(4, 4, 4, dtype=torch.uint8)", "ValueError", "got shape (4, 4, 4)"),
    ("batched", "torch.zeros(2, 4, 4, 3)", "ValueError", "got shape (2, 4, 4, 3)"),
    ("channels first", "torch.zeros(3, 4, 4)", "ValueError", "got shape (3, 4, 4)"),
    ("float64", "torch.zeros(4, 4, 3, dtype=torch.float64)", "TypeError", "unsupported dtype torch.float64"),
    ("int32", "torch.zeros(4, 4, 3, dtype=torch.int32)", "TypeError", "unsupported dtype torch.int32"),
    ("meta device", "torch.zeros(4, 4, 3, device='meta')", "ValueError", "device 'meta' is not supported by this build"),
]

# The native op checks its arguments too, for callers that bypass the wrapper.
BAD_OP_CALLS = [
    ("output shape", "torch.zeros(4, 4, 3), torch.empty(4, 5)", "expected an output of shape (4, 4)"),
    ("output dtype", "torch.zeros(4, 4, 3), torch.empty(4, 4, dtype=torch.uint8)", "output dtype Byte differs"),
    ("non-contiguous", "torch.zeros(4, 8, 3)[:, ::2], torch.empty(4, 4)", "must be contiguous"),
    ("dtype", "torch.zeros(4, 4, 3, dtype=torch.int16), torch.empty(4, 4, dtype=torch.int16)", "unsupported dtype Short"),
]

_ERRORS_BODY = """
results = {}
for label, expression in WRAPPER:
    results[label] = attempt(lambda: kernel.img2gray(eval(expression)))
for label, expression in OP:
    results["op: " + label] = attempt(lambda: kernel.ops.img2gray(*eval(expression)))
emit(results)
"""


@pytest.fixture(scope="module")
def error_results(cpu_variant_dir: Path) -> dict:
    wrapper = [(label, expression) for label, expression, _, _ in BAD_INPUTS]
    op = [(label, expression) for label, expression, _ in BAD_OP_CALLS]
    return run_with_variants(f"WRAPPER = {wrapper!r}\nOP = {op!r}\n" + _ERRORS_BODY, cpu_variant_dir)


@pytest.mark.parametrize("label,expression,kind,fragment", BAD_INPUTS, ids=[case[0] for case in BAD_INPUTS])
def test_wrapper_rejects_bad_input(error_results: dict, label: str, expression: str, kind: str, fragment: str) -> None:
    error = error_results[label]
    assert error is not None, f"img2gray({expression}) raised nothing"
    assert error[0] == kind and fragment in error[1], error
    assert error[1].startswith("img2gray: ") and "\n" not in error[1]


@pytest.mark.parametrize("label,expression,fragment", BAD_OP_CALLS, ids=[case[0] for case in BAD_OP_CALLS])
def test_native_op_checks_arguments(error_results: dict, label: str, expression: str, fragment: str) -> None:
    error = error_results[f"op: {label}"]
    assert error is not None and error[0] == "RuntimeError" and fragment in error[1], error


@pytest.mark.cuda
def test_cpu_build_rejects_cuda_tensor(cpu_variant_dir: Path) -> None:
    require_cuda()
    body = "emit(attempt(lambda: kernel.img2gray(torch.zeros(4, 4, 3, device='cuda'))))"
    error = run_with_variants(body, cpu_variant_dir)
    assert error[0] == "ValueError" and "device 'cuda' is not supported by this build" in error[1]


def test_two_versions_load_side_by_side(cpu_variant_dir: Path, tmp_path: Path) -> None:
    other = write_variant(build_cpu_variant("1.1.0"), tmp_path / "1.1.0")
    body = """
image = torch.randint(0, 256, (6, 10, 3), dtype=torch.uint8)
emit({
    "namespaces": [k.OPS_NAMESPACE for k in kernels],
    "equal": [torch.equal(k.img2gray(image), reference_img2gray(image)) for k in kernels],
})
"""
    results = run_with_variants(body, cpu_variant_dir, other)
    assert results["namespaces"] == [ops_namespace("1.0.0"), ops_namespace("1.1.0")]
    assert results["equal"] == [True, True]


def test_same_namespace_from_two_paths_aborts(cpu_variant_dir: Path, tmp_path: Path) -> None:
    # Why builds get unique namespaces, and why these tests load variants in subprocesses:
    # a second TORCH_LIBRARY for one namespace aborts the process during dlopen.
    copy = write_variant(build_cpu_variant("1.0.0"), tmp_path / "copy")
    result = subprocess.run(
        [sys.executable, "-c", _PRELUDE + "emit('both loaded')", str(cpu_variant_dir), str(copy)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == -signal.SIGABRT, result
    assert "Only a single TORCH_LIBRARY can be used to register the namespace" in result.stderr


def test_published_repo_stores_library_in_lfs(cpu_variant: dict[str, bytes], tmp_path: Path) -> None:
    spec = img2gray_repo({"1.1.0": build_cpu_variant("1.1.0"), "1.0.0": cpu_variant})
    assert spec.repo_id == REPO_ID
    built = build_repo(tmp_path / "mirrors", spec)
    assert list(built.commits) == ["1.0.0", "1.1.0"] and set(built.tags) == {"v1.0.0", "v1.1.0"}
    assert built.branches["v1"] == built.commits["1.1.0"]

    variant = cpu_variant_name()
    commit = built.commits["1.0.0"]
    listed = built.git("ls-tree", "-r", commit, "build/")
    blobs = {line.split("\t")[1]: line.split()[2] for line in listed.splitlines()}
    assert set(blobs) == {f"build/{variant}/{path}" for path in cpu_variant}
    library = f"{ops_namespace('1.0.0')}.abi3.so"
    for path, data in cpu_variant.items():
        committed = built.files["1.0.0"][f"build/{variant}/{path}"]
        assert committed.data == data and committed.lfs == (path == library)
        expected = lfs_pointer(data) if path == library else data
        assert blobs[f"build/{variant}/{path}"] == git_blob_id(expected)
    oid = built.files["1.0.0"][f"build/{variant}/{library}"].lfs_sha256
    assert (built.path / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid).read_bytes() == cpu_variant[library]
    # The release after it carries its own build, under its own namespace.
    later = built.git("ls-tree", "-r", "--name-only", built.commits["1.1.0"], "build/").splitlines()
    assert f"build/{variant}/{ops_namespace('1.1.0')}.abi3.so" in later and f"build/{variant}/{library}" not in later


@pytest.mark.cuda
def test_cuda_variant_matches_reference(tmp_path: Path) -> None:
    require_cuda(toolkit=True)
    files = build_cuda_variant("1.0.0")
    assert json.loads(files["metadata.json"])["backend"] == {"type": "cuda"}
    variant_dir = write_variant(files, tmp_path / variant_name("cuda"))
    cases = json.dumps([[h, w, dtype, device] for h, w, dtype in EAGER_CASES for device in ("cuda", "cpu")])
    results = run_with_variants(f"CASES = {cases!r}\n" + _EAGER_BODY, variant_dir)
    mismatched = {case: result for case, result in results.items() if not result["equal"]}
    assert not mismatched
    compiled = run_with_variants("BACKEND = 'inductor'\nDEVICE = 'cuda'\n" + _COMPILE_BODY, variant_dir)
    assert compiled["opcheck_failures"] == [] and compiled["graph_breaks"] == 0, compiled
    assert all(compiled["op_equal"]) and all(compiled["pipeline_close"]), compiled
