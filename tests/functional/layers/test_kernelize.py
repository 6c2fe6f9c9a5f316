"""kernelize with the real Hugging Face kernels 0.17.2 and torch, through kernel-deps' loader.

The img2gray kernel (a real native op, compiled for this machine) exports an ``Img2Gray``
layer (``can_torch_compile = True``, ``has_backward = False``). Each check runs in a fresh
interpreter with kernels 0.17.2 installed beside kernel-deps (``tests/fixtures/peers.py``):
a kernel's op namespace is registered once per process, and a layer ``kernelize`` loaded
once is remembered by the Hugging Face library for the life of the process. The model's
own forward returns zeros, so an output equal to the reference is the kernel's; the
forward's module (kernel-deps' private import of the verified build) and the op the
profiler saw are the marker of which build ran.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.commands.lock import lock_project
from kernel_deps.core.errors import KernelDepsError, KernelNotLockedError
from kernel_deps.layers import LockedFuncRepository, LockedLayerRepository
from kernel_deps.lock.read import read_lock
from tests.fixtures.img2gray_kernel import REPO_ID, cpu_variant_name
from tests.fixtures.peers import env_with_peer
from tests.fixtures.projects import TEST_PUBLISHERS, trust_table

# What every check script starts with: a model whose layer kernelize may replace; argv[1] the lock.
PRELUDE = """
import json, os, sys, warnings
import torch
from torch import nn
from kernels import (
    CUDAProperties, Device, FuncRepository, KernelizeFallback, LayerRepository, LocalLayerRepository, Mode, kernelize,
    register_kernel_mapping, use_kernel_forward_from_hub, use_kernel_mapping,
)
from kernel_deps.core.errors import KernelDepsError, KernelNotLockedError
from kernel_deps.layers import LockedFuncRepository, LockedLayerRepository, enforce_lock
LOCK = sys.argv[1]
REPO = "kernels-test/img2gray"

@use_kernel_forward_from_hub("Img2Gray")
class Gray(nn.Module):
    def forward(self, image):
        return torch.zeros(image.shape[:2], dtype=image.dtype)

def reference(image):
    red, green, blue = image.to(torch.float32).unbind(-1)
    return (red * 0.2989 + green * 0.5870 + blue * 0.1140).round().clamp(0, 255).to(torch.uint8)

IMAGE = torch.randint(0, 256, (24, 32, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))

def run(model):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        out = model(IMAGE)
    forward = model.forward.__func__.__module__
    origin = None
    if forward.startswith("_kernel_deps_loaded."):
        kernel = sys.modules[forward.rpartition(".")[0]]
        origin = [kernel.__kernel_origin__.commit, kernel.__kernel_origin__.variant]
    ops = sorted({e.name for e in profile.events() if e.name.endswith("::img2gray")})
    return {"kernel": torch.equal(out, reference(IMAGE)), "origin": origin, "ops": ops,
            "own": torch.equal(out, torch.zeros_like(out))}

def loaded():
    return sorted(name for name in sys.modules if name.startswith("_kernel_deps_loaded."))

out = {}
"""


def check(lock: Path, body: str, **env: str) -> dict:
    """Run ``PRELUDE + body`` with kernels 0.17.2 beside kernel-deps; the ``out`` dict it prints."""
    code = PRELUDE + body + "\nprint(json.dumps(out))\n"
    result = subprocess.run(
        [sys.executable, "-c", code, str(lock)], env=env_with_peer("0.17", **env), capture_output=True, text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def project(img2gray_hub, hub_env, tmp_path) -> Path:
    """A project locking img2gray 1.1, its build downloaded (verified) into the test's cache."""
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "pyproject.toml").write_text(
        f'{trust_table(TEST_PUBLISHERS)}[tool.kernels.dependencies]\n"{REPO_ID}" = ">=1.1,<2"\n'
    )
    lock_project(folder)
    download_project(folder)
    return folder


def locked_commit(project: Path) -> str:
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID)
    assert kernel is not None
    return kernel.sha


# Offline, with a Hub address that answers nothing: Hugging Face's own loader cannot resolve
# or fetch anything, so whatever runs came from the cache through kernel-deps' loader.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}


def test_locked_layer_repository_runs_the_locked_kernels_forward(project, img2gray_hub) -> None:
    out = check(project / "kernels.lock", """
repo = LockedLayerRepository(REPO, layer_name="Img2Gray", lockfile=LOCK)
with use_kernel_mapping({"Img2Gray": {"cpu": repo}}):
    out["kernelized"] = run(kernelize(Gray(), mode=Mode.INFERENCE, device="cpu"))
out["outside"] = run(kernelize(Gray(), mode=Mode.INFERENCE, device="cpu"))  # the context closed: no mapping
""", **OFFLINE)
    commit = locked_commit(project)
    assert commit == img2gray_hub.repos[REPO_ID].commits["1.1.0"]
    kernelized = out["kernelized"]
    assert kernelized["kernel"] and not kernelized["own"]
    assert kernelized["origin"] == [commit, cpu_variant_name()]
    assert len(kernelized["ops"]) == 1 and kernelized["ops"][0].startswith("_img2gray_")
    assert out["outside"] == {"kernel": False, "origin": None, "ops": [], "own": True}


def test_enforce_lock_pins_hugging_faces_repositories_in_every_device_and_mode(project) -> None:
    out = check(project / "kernels.lock", """
hub = LayerRepository(REPO, layer_name="Img2Gray", version=1)
register_kernel_mapping({"Img2Gray": {
    "cpu": {Mode.INFERENCE: hub, Mode.TRAINING | Mode.TORCH_COMPILE: hub},
    Device(type="cuda", properties=CUDAProperties(min_capability=80, max_capability=90)): hub,
    "cuda": hub,
}, "Gray2": {"cpu": FuncRepository(REPO, func_name="img2gray", version=1)}})
with use_kernel_mapping({"Img2Gray": {"cpu": LayerRepository(REPO, layer_name="Img2Gray", revision="main")}}):
    out["replaced_in_context"] = enforce_lock(LOCK)
    out["context"] = run(kernelize(Gray(), mode=Mode.INFERENCE, device="cpu"))
from kernels.layer.globals import _KERNEL_MAPPING
def kinds():
    found = []
    for devices in _KERNEL_MAPPING.get().values():
        for device, repos in devices.items():
            tree = getattr(repos, "repos_by_capability", None)
            nodes = [tree.root] if tree is not None else []
            dicts = [repos._repos] if tree is None else []
            while nodes:
                node = nodes.pop()
                if node is not None:
                    dicts.append(node.data)
                    nodes += [node.left, node.right]
            found += sorted(f"{device}:{type(r).__name__}" for d in dicts for r in d.values())
    return found
out["global_after_context"] = kinds()
out["replaced"] = enforce_lock(LOCK)
out["global_enforced"] = kinds()
out["inference"] = run(kernelize(Gray(), mode=Mode.INFERENCE, device="cpu"))
""", **OFFLINE)
    # The context's entry was pinned and ran the locked build; the global mapping was left alone until enforced.
    assert out["replaced_in_context"] == 4  # the context's own cpu entry, the two cuda ranges and the function it inherited
    assert out["context"]["kernel"] and out["context"]["origin"][0] == locked_commit(project)
    assert out["global_after_context"] == ["cpu:LayerRepository"] * 2 + ["cuda:LayerRepository"] * 2 + ["cpu:FuncRepository"]
    assert out["replaced"] == 5
    assert out["global_enforced"] == (
        ["cpu:LockedLayerRepository"] * 2 + ["cuda:LockedLayerRepository"] * 2 + ["cpu:LockedFuncRepository"]
    )
    assert out["inference"]["kernel"] and out["inference"]["origin"][0] == locked_commit(project)


def test_a_repo_the_lock_lacks_is_refused_before_anything_loads(project) -> None:
    out = check(project / "kernels.lock", """
try:
    LockedLayerRepository("kernels-test/activation", layer_name="SiluAndMul", lockfile=LOCK)
except KernelNotLockedError as error:
    out["constructed"] = str(error)
local = LocalLayerRepository(repo_path=".", layer_name="Img2Gray")
mapping = {
    "Img2Gray": {"cpu": LayerRepository(REPO, layer_name="Img2Gray", version=1)},
    "SiluAndMul": {"cpu": {Mode.INFERENCE: LayerRepository("kernels-test/activation", layer_name="SiluAndMul", version=1)}},
    "Norm": {"cuda": LayerRepository("kernels-test/layer-norm", layer_name="Norm", version=1), "cpu": local},
}
register_kernel_mapping(mapping)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        enforce_lock(LOCK)
    except KernelNotLockedError as error:
        out["enforced"] = str(error)
out["warnings"] = [str(w.message) for w in caught]
out["unchanged"] = type(mapping["Img2Gray"]["cpu"]).__name__
out["loaded"] = loaded()
register_kernel_mapping({"Img2Gray": {"cpu": LayerRepository(REPO, layer_name="Img2Gray", version=2)}}, inherit_mapping=False)
try:
    enforce_lock(LOCK)
except KernelDepsError as error:
    out["major"] = [type(error).__name__, str(error)]
class Custom:
    layer_name = "Img2Gray"
    def load(self):
        raise AssertionError("loaded")
register_kernel_mapping({"Img2Gray": {"cpu": Custom()}}, inherit_mapping=False)
try:
    enforce_lock(LOCK)
except KernelDepsError as error:
    out["custom"] = [type(error).__name__, str(error)]
""", **OFFLINE)
    lock = str(project / "kernels.lock")
    assert out["constructed"] == (
        f"kernels-test/activation is not locked in {lock}; add it to [tool.kernels.dependencies] and run kernels lock"
    )
    message = out["enforced"]
    assert "\n" not in message and f"names 2 repos not locked in {lock}" in message
    assert "kernels-test/activation (layer 'SiluAndMul', device cpu, mode INFERENCE)" in message
    assert "kernels-test/layer-norm (layer 'Norm', device cuda)" in message
    assert REPO_ID not in message
    # Local folders stay, with a warning; nothing was replaced and nothing loaded.
    assert any("local folder no lock vouches for" in w for w in out["warnings"])
    assert out["unchanged"] == "LayerRepository" and out["loaded"] == []
    # A major the lock does not pin is refused rather than loaded in its place.
    assert out["major"] == ["UsageError", (
        f"kernel mapping (layer 'Img2Gray', device cpu): {REPO_ID} is asked for version=2, but {lock} pins v1.1.0; "
        "lock version 2 or map version=1"
    )]
    # A repository of another kind cannot be held to the lock: refused, naming it.
    assert out["custom"][0] == "UsageError"
    assert out["custom"][1].startswith("kernel mapping (layer 'Img2Gray', device cpu): enforce_lock cannot hold Custom")


@pytest.mark.parametrize("form", ["locked", "enforced"])
def test_a_tampered_cached_layer_file_is_refused_and_never_runs(project, tmp_path, form) -> None:
    commit = locked_commit(project)
    folder = cache.variant_dir(cache.find_repo_dir(REPO_ID), commit, cpu_variant_name())
    ran = tmp_path / "ran"
    target = (folder / "layers.py").resolve()
    target.write_text(target.read_text() + f"\nopen({str(ran)!r}, 'w').write('ran')\n")
    repo = (
        'LockedLayerRepository(REPO, layer_name="Img2Gray", lockfile=LOCK)' if form == "locked"
        else 'LayerRepository(REPO, layer_name="Img2Gray", version=1)'
    )
    out = check(project / "kernels.lock", f"""
with use_kernel_mapping({{"Img2Gray": {{"cpu": {repo}}}}}):
    if {form == "enforced"}:
        enforce_lock(LOCK)
    try:
        # transformers kernelizes with KernelizeFallback.ALL: a refusal is still raised, never a fallback.
        kernelize(Gray(), mode=Mode.INFERENCE, device="cpu", use_fallback=KernelizeFallback.ALL)
    except KernelDepsError as error:
        out["refused"] = [type(error).__name__, str(error)]
out["loaded"] = loaded()
""", **OFFLINE)
    name, message = out["refused"]
    assert "layers.py" in message and "\n" not in message, message
    assert out["loaded"] == [] and not ran.exists()


def test_torch_compile_and_training_flags_are_honoured_as_hugging_face_honours_them(project) -> None:
    out = check(project / "kernels.lock", """
layer = LockedLayerRepository(REPO, layer_name="Img2Gray", lockfile=LOCK)
func = LockedFuncRepository(REPO, func_name="img2gray", lockfile=LOCK)
with use_kernel_mapping({"Img2Gray": {"cpu": layer}}):
    model = kernelize(Gray(), mode=Mode.INFERENCE | Mode.TORCH_COMPILE, device="cpu")
    out["compile"] = run(model)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    out["compiled_matches"] = torch.equal(compiled(IMAGE), reference(IMAGE))
    # Training: the layer has no backward, so kernelize keeps the model's own forward, or refuses.
    out["training"] = run(kernelize(Gray(), mode=Mode.TRAINING, device="cpu"))
    try:
        kernelize(Gray(), mode=Mode.TRAINING, device="cpu", use_fallback=False)
    except ValueError as error:
        out["training_strict"] = str(error)
with use_kernel_mapping({"Img2Gray": {"cpu": {Mode.TRAINING: layer}}}):
    try:
        kernelize(Gray(), mode=Mode.TRAINING, device="cpu")
    except ValueError as error:
        out["registered_for_training"] = str(error)
with use_kernel_mapping({"Img2Gray": {"cpu": func}}):
    out["func"] = run(kernelize(Gray(), mode=Mode.INFERENCE, device="cpu"))
    # A function exports no can_torch_compile flag: with torch.compile, the model's own forward stays.
    out["func_compile"] = run(kernelize(Gray(), mode=Mode.INFERENCE | Mode.TORCH_COMPILE, device="cpu"))
""", **OFFLINE)
    assert out["compile"]["kernel"] and out["compiled_matches"]
    assert out["training"]["own"] and out["training"]["ops"] == []
    assert out["training_strict"] == f"Available kernel does not support mode: {'Mode.TRAINING'}"
    assert "does not support backward" in out["registered_for_training"]
    assert out["func"]["kernel"] and out["func"]["ops"]
    assert out["func_compile"]["own"] and out["func_compile"]["ops"] == []


def test_repositories_compare_and_hash_as_hugging_faces_do(project) -> None:
    lock = project / "kernels.lock"
    one = LockedLayerRepository(REPO_ID, layer_name="Img2Gray", lockfile=lock)
    same = LockedLayerRepository(REPO_ID, layer_name="Img2Gray", lockfile=lock)
    other = LockedLayerRepository(REPO_ID, layer_name="Other", lockfile=lock)
    func = LockedFuncRepository(REPO_ID, func_name="Img2Gray", lockfile=lock)
    assert one == same and hash(one) == hash(same) and {one: 1}[same] == 1
    assert one != other and one != func and len({one, same, other, func}) == 3
    assert copy.deepcopy(one) is one and (one.layer_name, func.func_name) == ("Img2Gray", "Img2Gray")
    assert one.commit == locked_commit(project) and f"revision: {one.commit}" in str(one)
    with pytest.raises(KernelNotLockedError) as info:
        LockedFuncRepository("kernels-test/rotary", func_name="rotate", lockfile=lock)
    assert isinstance(info.value, KernelDepsError)


def test_kernel_deps_works_without_hugging_face_kernels(project) -> None:
    code = """
import json, sys
from kernel_deps.layers import LockedLayerRepository, enforce_lock
repo = LockedLayerRepository("kernels-test/img2gray", layer_name="Img2Gray", lockfile=sys.argv[1])
layer = repo.load()
try:
    enforce_lock(sys.argv[1])
except Exception as error:
    refused = [type(error).__name__, str(error)]
print(json.dumps({"layer": layer.__name__, "refused": refused, "hf": "kernels" in sys.modules}))
"""
    result = subprocess.run(
        [sys.executable, "-c", code, str(project / "kernels.lock")], env=env_with_peer(None, **OFFLINE),
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["layer"] == "Img2Gray" and out["hf"] is False
    name, message = out["refused"]
    assert name == "HFKernelsMissingError" and message.endswith("it is not installed: pip install kernels")


def test_a_mapping_registered_later_as_transformers_does_stays_pinned(project) -> None:
    # transformers 5 builds its mapping once (get_kernel_mapping_transformers: per device, one
    # LayerRepository for several modes, dict.fromkeys), registers it again on every
    # from_pretrained(use_kernels=True) and kernelizes with KernelizeFallback.ALL.
    out = check(project / "kernels.lock", """
hub = LayerRepository(REPO, layer_name="Img2Gray", version=1)
TRANSFORMERS_MAPPING = {"Img2Gray": {
    device: dict.fromkeys([Mode.INFERENCE, Mode.TRAINING | Mode.TORCH_COMPILE], hub) for device in ("cpu", "cuda")
}}
def from_pretrained():
    register_kernel_mapping(TRANSFORMERS_MAPPING)
    return kernelize(Gray(), mode=Mode.INFERENCE, device="cpu", use_fallback=KernelizeFallback.ALL)
out["replaced"] = enforce_lock(LOCK, mapping=TRANSFORMERS_MAPPING)
out["first"] = run(from_pretrained())
out["again"] = run(from_pretrained())
out["kinds"] = sorted({type(r).__name__ for d in TRANSFORMERS_MAPPING["Img2Gray"].values() for r in d.values()})
""", **OFFLINE)
    assert out["replaced"] == 4 and out["kinds"] == ["LockedLayerRepository"]
    for run in (out["first"], out["again"]):
        assert run["kernel"] and run["origin"][0] == locked_commit(project)
