#!/usr/bin/env bash
# The GPU smoke test (bench/gpu_smoke.py) on a machine with a CUDA GPU and torch, but no
# package index: kernel-deps comes from src/, its two pure-Python run-time dependencies of
# the loader path from wheels in .gpu-wheels/ (fetch them here with
# `pip download --no-deps -d .gpu-wheels packaging tomlkit`). The system compiler is used:
# a statically linked libstdc++ from a custom CXX breaks torch extensions.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=$(ls .gpu-wheels/*.whl 2>/dev/null | tr '\n' ':')
export PYTHONPATH="src:.:${wheels}${PYTHONPATH:-}"
exec env -u CXX -u CC python3 bench/gpu_smoke.py
