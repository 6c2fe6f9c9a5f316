#!/usr/bin/env bash
# The GPU smoke test (bench/gpu_smoke.py) on a machine with a CUDA GPU and torch, but no
# package index: kernel-deps comes from src/, its two pure-Python run-time dependencies of
# the loader path from wheels in .gpu-wheels/, and the Hugging Face kernels library (for
# examples/kernelize) with its dependencies installed from .gpu-wheels/ into .gpu-site/.
# Fetch them on a machine with an index:
#   pip download --no-deps -d .gpu-wheels packaging tomlkit
#   pip download -d .gpu-wheels/kernels kernels==0.17.2
# The system compiler is used: a statically linked libstdc++ from a custom CXX breaks
# torch extensions.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .gpu-wheels/kernels ] && [ ! -d .gpu-site ]; then
    python3 -m pip install --quiet --no-index --find-links .gpu-wheels/kernels --target .gpu-site kernels==0.17.2
fi
wheels=$(ls .gpu-wheels/*.whl 2>/dev/null | tr '\n' ':')
site=$([ -d .gpu-site ] && echo ".gpu-site:" || true)
export PYTHONPATH="src:.:${wheels}${site}${PYTHONPATH:-}"
exec env -u CXX -u CC python3 bench/gpu_smoke.py
