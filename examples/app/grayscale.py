"""Convert an RGB image to grayscale with the img2gray kernel that kernels.lock pins.

    python grayscale.py [--input photo.ppm] [--output gray.pgm]

Without --input a synthetic 480x640 test image is used. The result is checked against a
pure torch implementation of the same formula; the exit status is 1 if they differ.
The kernel comes from the Hugging Face cache only (`load_kernel` never downloads): run
`kernels download .` (or `kernels sync .`) first; the Dockerfile runs `kernels sync` at build time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from kernel_deps import load_kernel
from kernel_deps.core.errors import KernelDepsError

KERNEL = "kernels-test/img2gray"


def read_ppm(path: Path) -> torch.Tensor:
    """An 8-bit binary PPM (P6) as an (H, W, 3) uint8 tensor."""
    data = path.read_bytes()
    fields, offset = [], 0
    while len(fields) < 4:
        while data[offset:offset + 1].isspace():
            offset += 1
        if data[offset:offset + 1] == b"#":
            offset = data.index(b"\n", offset) + 1
            continue
        end = offset
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[offset:end])
        offset = end
    magic, width, height, maxval = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    if magic != b"P6" or maxval != 255:
        raise ValueError(f"{path}: expected an 8-bit binary PPM (P6, maxval 255)")
    pixels = data[offset + 1:offset + 1 + width * height * 3]
    return torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(height, width, 3)


def write_pgm(path: Path, gray: torch.Tensor) -> None:
    """An (H, W) uint8 tensor as a binary PGM (P5)."""
    height, width = gray.shape
    path.write_bytes(f"P5\n{width} {height}\n255\n".encode() + bytes(gray.contiguous().flatten().tolist()))


def synthetic_image(height: int = 480, width: int = 640) -> torch.Tensor:
    """A colourful gradient with some noise, reproducible."""
    rows = torch.linspace(0, 255, height).unsqueeze(1).expand(height, width)
    cols = torch.linspace(0, 255, width).unsqueeze(0).expand(height, width)
    noise = torch.rand(height, width, generator=torch.Generator().manual_seed(0)) * 32
    return torch.stack([rows, cols, (rows + cols) / 2 + noise], dim=-1).clamp(0, 255).to(torch.uint8)


def reference_gray(image: torch.Tensor) -> torch.Tensor:
    """The same conversion in plain torch: 0.2989 R + 0.5870 G + 0.1140 B, rounded."""
    red, green, blue = image.to(torch.float32).unbind(-1)
    return (red * 0.2989 + green * 0.5870 + blue * 0.1140).round().clamp(0, 255).to(torch.uint8)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, help="an 8-bit binary PPM image (default: a synthetic one)")
    parser.add_argument("--output", type=Path, help="where to write the grayscale image (PGM)")
    args = parser.parse_args(argv)

    try:
        img2gray = load_kernel(KERNEL)  # the lock beside pyproject.toml, walking up from here
    except KernelDepsError as exc:
        print(f"grayscale: {exc}", file=sys.stderr)
        return 1
    origin = img2gray.__kernel_origin__
    image = read_ppm(args.input) if args.input else synthetic_image()
    gray = img2gray.img2gray(image)
    if args.output:
        write_pgm(args.output, gray)
    print(f"kernel: {KERNEL} {img2gray.__version__} ({origin.variant}, commit {origin.commit[:12]})")
    print(f"lock:   {origin.lock_path}")
    if not torch.equal(gray, reference_gray(image)):
        print("grayscale image differs from the pure torch reference", file=sys.stderr)
        return 1
    height, width = gray.shape
    print(f"converted a {width}x{height} image; it matches the pure torch reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
