#!/usr/bin/env bash
# The GPU smoke test (bench/gpu_smoke.py) on a machine with a CUDA GPU and torch, but no
# package index: kernel-deps comes from src/, its two pure-Python run-time dependencies of
# the loader path from wheels in .gpu-wheels/, and the Hugging Face kernels library (for
# examples/kernelize) with its dependencies installed from .gpu-wheels/ into .gpu-site/.
# Fetch them on a machine with an index:
#   pip download --no-deps -d .gpu-wheels packaging tomlkit
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_17_x86_64 \
#       -d .gpu-wheels/kernels kernels==0.17.2
# (its own dependencies, huggingface_hub and pyyaml, are taken from the machine's python3;
# sigstore is imported only by its signature checks, which the example does not use).
# The system compiler is used: a statically linked libstdc++ from a custom CXX breaks
# torch extensions.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)  # absolute paths: examples/kernelize runs in a folder of its own
if [ -d .gpu-wheels/kernels ] && [ ! -d .gpu-site ]; then
    python3 -m pip install --quiet --no-index --no-deps --find-links .gpu-wheels/kernels --target .gpu-site kernels==0.17.2
fi
wheels=$(ls "$root"/.gpu-wheels/*.whl 2>/dev/null | tr '\n' ':')
site=$([ -d .gpu-site ] && echo "$root/.gpu-site:" || true)
export PYTHONPATH="$root/src:$root:${wheels}${site}${PYTHONPATH:-}"
exec env -u CXX -u CC python3 bench/gpu_smoke.py
