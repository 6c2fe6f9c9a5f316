"""A small torch model whose grayscale layer `kernelize` replaces by the locked kernel's layer.

    python model.py [--device cpu|cuda] [--enforce]

The model (grayscale, then a 2x2 average pool) declares its grayscale layer with the
Hugging Face kernels library's `use_kernel_forward_from_hub("Img2Gray")`. The kernel
mapping names kernel-deps' `LockedLayerRepository`, or, with --enforce, the Hugging Face
`LayerRepository` that `kernel_deps.layers.enforce_lock()` then pins to kernels.lock.
Either way the layer is loaded through kernel-deps' loader: the commit kernels.lock pins,
every file verified before it is imported. The output is checked against the model's own
plain torch forward; the exit status is 1 if they differ or the kernel is refused.
"""

from __future__ import annotations

import argparse
import sys

import torch
from kernels import LayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping
from torch import nn

from kernel_deps.core.errors import KernelDepsError
from kernel_deps.layers import LockedLayerRepository, enforce_lock

KERNEL = "kernels-test/img2gray"


@use_kernel_forward_from_hub("Img2Gray")
class Grayscale(nn.Module):
    """(H, W, 3) RGB to (H, W) grayscale in plain torch: 0.2989 R + 0.5870 G + 0.1140 B."""

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        red, green, blue = image.to(torch.float32).unbind(-1)
        gray = red * 0.2989 + green * 0.5870 + blue * 0.1140
        return gray.round().clamp(0, 255).to(torch.uint8) if image.dtype == torch.uint8 else gray


class Thumbnail(nn.Module):
    """A grayscale thumbnail at half the size."""

    def __init__(self) -> None:
        super().__init__()
        self.gray = Grayscale()
        self.pool = nn.AvgPool2d(2)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.pool(self.gray(image).to(torch.float32)[None])[0]


def kernelized(device: str, enforce: bool) -> Thumbnail:
    """The model with its grayscale layer replaced by the locked kernel's."""
    model = Thumbnail()
    if enforce:
        # The Hub repository a library (transformers, say) registers, held to kernels.lock.
        repo = LayerRepository(KERNEL, layer_name="Img2Gray", version=1)
    else:
        repo = LockedLayerRepository(KERNEL, layer_name="Img2Gray")  # the lock beside pyproject.toml
    with use_kernel_mapping({"Img2Gray": {device: repo}}):
        if enforce:
            enforce_lock()
        return kernelize(model, mode=Mode.INFERENCE, device=device)


def layer_origin(module: nn.Module) -> str:
    """Which kernel the layer's forward comes from: the loaded kernel's __kernel_origin__."""
    layers = sys.modules[module.forward.__func__.__module__]
    kernel = sys.modules[layers.__name__.rpartition(".")[0]]
    origin = kernel.__kernel_origin__
    return f"{origin.repo_id} {kernel.__version__} ({origin.variant}, commit {origin.commit[:12]})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--enforce", action="store_true", help="map Hugging Face's LayerRepository, then enforce_lock()")
    args = parser.parse_args(argv)

    generator = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (480, 640, 3), dtype=torch.uint8, generator=generator).to(args.device)
    expected = Thumbnail().to(args.device)(image)  # before kernelize: the plain torch forward
    try:
        model = kernelized(args.device, args.enforce)
        output = model(image)
    except KernelDepsError as exc:
        print(f"kernelize: {exc}", file=sys.stderr)
        return 1
    forward = getattr(model.gray.forward, "__func__", None)
    if forward is None or not forward.__module__.startswith("_kernel_deps_loaded."):
        print("the grayscale layer was not replaced by the locked kernel's", file=sys.stderr)
        return 1
    print(f"layer Img2Gray: {layer_origin(model.gray)}")
    if not torch.equal(output, expected):
        print("the kernelized model differs from the plain torch model", file=sys.stderr)
        return 1
    height, width = output.shape
    print(f"made a {width}x{height} thumbnail on {args.device}; it matches the plain torch model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
