"""GPU smoke test: the CUDA variant of img2gray, locked, cached and loaded by kernel-deps.

Run on a machine with a CUDA GPU (see bench/gpu_smoke.sh). It builds the CPU and CUDA
variants of the sample img2gray kernel with that machine's torch, places both in a fresh
Hugging Face cache exactly as `kernels download` does (blobs named by content hash,
snapshot symlinks, manifest), writes a kernels.lock pinning their git_lfs_concat hashes,
then with HF_HUB_OFFLINE=1 calls `load_kernel` and checks that:

- this machine is described alike from torch's files and by importing torch (the
  CUDA version and C++ ABI of a real CUDA build);
- the CUDA variant is chosen over the CPU one;
- the op runs on the GPU and matches the pure torch reference (uint8 and float32);
- the time of one call on a 4K (3840x2160) image, against the pure torch version;
- examples/kernelize (the Hugging Face kernels library's `kernelize`, in a process of its
  own) replaces the model's layer by the CUDA build's `Img2Gray`, both with
  `LockedLayerRepository` and with `enforce_lock` over `LayerRepository`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from kernel_deps import load_kernel
from kernel_deps.cache import store as cache
from kernel_deps.core.hashing import git_blob_id, variant_hash
from kernel_deps.core.system import system_from_files, system_from_torch
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock, write_lockfile
from tests.fixtures.img2gray_kernel import REPO_ID, build_cpu_variant, build_cuda_variant, reference_img2gray, variant_name

VERSION = "1.0.0"


def place(root: Path, commit: str, variant: str, files: dict[str, bytes]) -> str:
    """Put one variant into the cache as `kernels download` does; returns its lock hash."""
    repo = cache.repo_dir(REPO_ID, root=root)
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    names = {}
    for rel, data in files.items():
        name = hashlib.sha256(data).hexdigest() if rel.endswith(".so") else git_blob_id(data)
        (repo / "blobs" / name).write_bytes(data)
        names[rel] = name
    cache.place_variant(repo, commit, variant, names)
    return variant_hash(names.items())


def time_call(fn, image: torch.Tensor, repeat: int = 50) -> float:
    """Median milliseconds of one call, timed with CUDA events."""
    for _ in range(5):
        fn(image)
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(image)
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return sorted(samples)[len(samples) // 2]


def main() -> int:
    assert torch.cuda.is_available(), "needs a CUDA GPU"
    from_files, from_torch = system_from_files(), system_from_torch()
    print(f"this machine: {from_torch.describe()} (from torch's files: {from_files and from_files.describe()})")
    assert from_files == from_torch, f"torch's files say {from_files}, the imported torch {from_torch}"
    assert from_torch.backend == "cuda", from_torch
    variants = {variant_name("cpu"): build_cpu_variant(VERSION), variant_name("cuda"): build_cuda_variant(VERSION)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cache"
        commit = hashlib.sha1(b"".join(sorted(b"".join(f.values()) for f in variants.values()))).hexdigest()
        hashes = {name: place(root, commit, name, files) for name, files in variants.items()}
        lockfile = Path(tmp) / "kernels.lock"
        kernel = LockedKernel(
            repo_id=REPO_ID, sha=commit, variants={n: VariantLock(hash=h) for n, h in hashes.items()},
            version=f"v{VERSION}", requirement=">=1",
        )
        write_lockfile(lockfile, Lockfile(kernels=(kernel,)))
        os.environ.update({"KERNELS_CACHE": str(root), "HF_HUB_OFFLINE": "1"})

        module = load_kernel(REPO_ID, lockfile=lockfile)
        origin = module.__kernel_origin__
        print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}")
        print(f"loaded {REPO_ID} {origin.variant} from {origin.path}")
        assert origin.variant == variant_name("cuda"), origin.variant

        generator = torch.Generator(device="cuda").manual_seed(0)
        for dtype in (torch.uint8, torch.float32):
            if dtype == torch.uint8:
                image = torch.randint(0, 256, (2160, 3840, 3), dtype=dtype, device="cuda", generator=generator)
            else:
                image = torch.rand((2160, 3840, 3), dtype=dtype, device="cuda", generator=generator)
            got, want = module.img2gray(image), reference_img2gray(image)
            assert got.device.type == "cuda"
            assert torch.equal(got, want), f"{dtype}: max difference {(got.float() - want.float()).abs().max()}"
            kernel_ms = time_call(module.img2gray, image)
            torch_ms = time_call(reference_img2gray, image)
            print(f"4K {str(dtype):14s} kernel {kernel_ms:7.3f} ms  pure torch {torch_ms:7.3f} ms  "
                  f"speed-up {torch_ms / kernel_ms:5.2f}x  (matches the reference)")
        compiled = torch.compile(module.img2gray, fullgraph=True)
        assert torch.equal(compiled(image), reference_img2gray(image))
        print("torch.compile(fullgraph=True): matches the reference")
        kernelize_example(lockfile, commit)
    return 0


def kernelize_example(lockfile: Path, commit: str) -> None:
    """examples/kernelize on the GPU: the layer comes from the CUDA build the lock pins."""
    assert importlib.util.find_spec("kernels") is not None, (
        "examples/kernelize needs the Hugging Face kernels library: "
        "pip download -d .gpu-wheels/kernels kernels==0.17.2 (see bench/gpu_smoke.sh)"
    )
    example = Path(__file__).resolve().parents[1] / "examples" / "kernelize"
    for args in ([], ["--enforce"]):
        result = subprocess.run(
            [sys.executable, "model.py", "--device", "cuda", *args], cwd=example, capture_output=True, text=True,
            env={**os.environ, "KERNELS_LOCKFILE": str(lockfile)},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"({variant_name('cuda')}, commit {commit[:12]})" in result.stdout, result.stdout
        assert "on cuda; it matches the plain torch model" in result.stdout, result.stdout
        print(f"examples/kernelize {' '.join(args) or '(LockedLayerRepository)'}: {result.stdout.splitlines()[0]}")


if __name__ == "__main__":
    sys.exit(main())
