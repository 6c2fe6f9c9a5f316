"""Describing this machine from torch's files equals describing it by importing torch.

Each case runs in a real subprocess: ``system_from_files`` reads the torch that
``import torch`` would find, then ``system_from_torch`` imports that same torch and asks
it. Synthetic torch installs (a ``torch-X.dist-info`` and a ``torch`` package in a
folder put first on ``PYTHONPATH``) stand in for builds this machine does not have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CXX11_LITERAL = '''
def compiled_with_cxx11_abi() -> bool:
    r"""Returns whether PyTorch was built with _GLIBCXX_USE_CXX11_ABI=1"""
    return True
'''
# torch before 2.7: the ABI is asked of the compiled extension; TorchConfig.cmake records it.
ABI_FROM_EXTENSION = '''
from torch import _C


def compiled_with_cxx11_abi() -> bool:
    r"""Returns whether PyTorch was built with _GLIBCXX_USE_CXX11_ABI=1"""
    return _C._GLIBCXX_USE_CXX11_ABI
'''

COMPARE = """
import dataclasses, json, sys
from kernel_deps.core.system import detect_system, system_from_files, system_from_torch
files = system_from_files()
assert "torch" not in sys.modules, "reading torch's files imported it"
detected = detect_system()
imported = system_from_torch()
as_dict = lambda s: None if s is None else dataclasses.asdict(s)
print(json.dumps({"files": as_dict(files), "detected": as_dict(detected), "imported": as_dict(imported)}))
"""


def describe(site: Path | None) -> dict:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", COMPARE], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def fake_torch(site: Path, version: str, *, cuda=None, hip=None, xpu=None, abi: str = CXX11_LITERAL,
               cmake_abi: int | None = None, extension_abi: bool | None = None, metadata: bool = True) -> Path:
    """A torch install in ``site`` laid out as a wheel lays it out (no compiled code)."""
    package = site / "torch"
    package.mkdir(parents=True)
    if metadata:
        info = site / f"torch-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    (package / "version.py").write_text(
        "from typing import Optional\n\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n"
        f"__version__ = {version!r}\ndebug = False\ncuda: Optional[str] = {cuda!r}\n"
        f"git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'\nhip: Optional[str] = {hip!r}\n"
        f"rocm: Optional[str] = {hip!r}\nxpu: Optional[str] = {xpu!r}\n"
    )
    (package / "__init__.py").write_text(f"from torch import version\nfrom torch.version import __version__\n{abi}")
    if extension_abi is not None:
        (package / "_C").mkdir()
        (package / "_C" / "__init__.py").write_text(f"_GLIBCXX_USE_CXX11_ABI = {extension_abi!r}\n")
    if cmake_abi is not None:
        config = package / "share" / "cmake" / "Torch"
        config.mkdir(parents=True)
        (config / "TorchConfig.cmake").write_text(
            "# When we build libtorch with the old libstdc++ ABI, dependent libraries must too.\n"
            'if(CMAKE_SYSTEM_NAME STREQUAL "Linux")\n'
            f'  set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI={cmake_abi}")\nendif()\n'
        )
    return site


def test_this_machine_is_described_alike_by_files_and_import() -> None:
    found = describe(None)
    assert found["files"] is not None, "this machine's torch could not be read from its files"
    assert found["files"] == found["imported"] == found["detected"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="synthetic wheels of linux torch builds")
@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (dict(version="2.13.0+cpu"), ([2, 13], True, "cpu", None)),
        (dict(version="2.13.0+cu128", cuda="12.8"), ([2, 13], True, "cuda", [12, 8])),
        (dict(version="2.9.1+rocm6.3", hip="6.3.42131-fa1d09cbd"), ([2, 9], True, "rocm", [6, 3])),
        (dict(version="2.13.0+xpu", xpu="20250101"), ([2, 13], True, "xpu", [2025, 1])),
        (dict(version="2.5.1+cu121", cuda="12.1", abi=ABI_FROM_EXTENSION, cmake_abi=0, extension_abi=False),
         ([2, 5], False, "cuda", [12, 1])),
        (dict(version="2.6.0+cu124", cuda="12.4", abi=ABI_FROM_EXTENSION, cmake_abi=1, extension_abi=True),
         ([2, 6], True, "cuda", [12, 4])),
        (dict(version="2.13.0a0+gitabc", metadata=False), ([2, 13], True, "cpu", None)),
    ],
    ids=["cpu", "cuda", "rocm", "xpu", "cxx98-cmake", "cxx11-cmake", "source-build-no-metadata"],
)
def test_synthetic_installs_are_described_alike(tmp_path: Path, build: dict, expected: tuple) -> None:
    found = describe(fake_torch(tmp_path / "site", **build))
    files = found["files"]
    assert files is not None
    assert (files["torch_version"], files["cxx11"], files["backend"], files["backend_version"]) == expected
    assert files == found["imported"] == found["detected"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="synthetic wheels of linux torch builds")
@pytest.mark.parametrize(
    "unreadable",
    ["abi-unknown", "version-computed", "device-extension"],
)
def test_files_that_cannot_tell_fall_back_to_importing_torch(tmp_path: Path, unreadable: str) -> None:
    site = tmp_path / "site"
    if unreadable == "abi-unknown":  # an old torch without its CMake config
        fake_torch(site, "2.5.1+cu121", cuda="12.1", abi=ABI_FROM_EXTENSION, extension_abi=False)
    else:
        fake_torch(site, "2.13.0+cu128", cuda="12.8")
    if unreadable == "version-computed":
        path = site / "torch" / "version.py"
        path.write_text(path.read_text().replace("cuda: Optional[str] = '12.8'", "cuda: Optional[str] = '12.' + '8'"))
    if unreadable == "device-extension":  # torch_npu changes what torch reports once it loads
        (site / "torch_npu").mkdir()
        (site / "torch_npu" / "__init__.py").write_text("")
    found = describe(site)
    assert found["files"] is None
    assert found["detected"] == found["imported"]
    assert found["detected"]["torch_version"] == ([2, 5] if unreadable == "abi-unknown" else [2, 13])


def test_without_torch_both_describe_no_torch(tmp_path: Path) -> None:
    # A folder first on the path whose torch cannot be imported: a `torch.py` that fails.
    site = tmp_path / "site"
    site.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site))
    code = (
        "import dataclasses, json, sys\n"
        "sys.path = [p for p in sys.path if 'site-packages' not in p or 'torch' not in __import__('os').listdir(p)]\n"
        "from kernel_deps.core.system import system_from_files, system_from_torch\n"
        "files, imported = system_from_files(), system_from_torch()\n"
        "print(json.dumps([dataclasses.asdict(files), dataclasses.asdict(imported)]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    files, imported = json.loads(result.stdout)
    assert files == imported
    assert files["torch_version"] is None and files["cxx11"] is None
