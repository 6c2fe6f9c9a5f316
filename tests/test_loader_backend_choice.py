"""get_kernel(backend="cpu") on a CUDA machine loads the CPU build, as the Hugging Face
library does, rather than the CUDA build this machine would otherwise get.

The CUDA machine is a synthetic CUDA torch install (a ``torch`` package and its
``.dist-info``, no compiled code) put first on ``sys.path``, which kernel-deps describes
from its files, as it describes any torch it has not imported; the real torch is hidden
from ``sys.modules`` for the test and the process's description is taken afresh before
and after it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernel_deps import get_kernel, loader
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release


def _cuda_torch(site: Path) -> Path:
    """A torch 2.13 + CUDA 12.8 install in ``site``, laid out as its wheel lays it out."""
    package = site / "torch"
    package.mkdir(parents=True)
    info = site / "torch-2.13.0+cu128.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cu128\n")
    (package / "version.py").write_text(
        "from typing import Optional\n\n"
        "__version__ = '2.13.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n"
        "hip: Optional[str] = None\nrocm: Optional[str] = None\nxpu: Optional[str] = None\n"
    )
    (package / "__init__.py").write_text(
        "from torch.version import __version__\n\n\n"
        "def compiled_with_cxx11_abi() -> bool:\n    return True\n"
    )
    return site


@pytest.fixture
def cuda_machine(tmp_path, monkeypatch):
    if not sys.platform.startswith("linux") or loader._this_system().arch != "x86_64":
        pytest.skip("the synthetic torch is a linux x86_64 wheel")
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(_cuda_torch(tmp_path / "cuda-site")))
    loader._this_system.cache_clear()
    try:
        system = loader._this_system()
        assert (system.backend, system.backend_version) == ("cuda", (12, 8))
        yield system
    finally:
        # Whatever the test imported of the synthetic torch goes (monkeypatch then puts back
        # the real torch modules it hid), and the real machine is described again.
        fake = str(tmp_path)
        for name in [m for m, module in sys.modules.items() if (m == "torch" or m.startswith("torch."))
                     and (getattr(module, "__file__", None) or "").startswith(fake)]:  # fmt: skip
            del sys.modules[name]
        loader._this_system.cache_clear()


def test_get_kernel_with_backend_cpu_loads_the_cpu_build_on_a_cuda_machine(hub_env, cuda_machine, monkeypatch) -> None:
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    repo_id = "kernels-test/backendchoice-both"
    if repo_id not in hub_env.repos:
        hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CUDA_VARIANT, CPU_VARIANT)),)))
    assert get_kernel(repo_id, version=1, backend="cpu").__kernel_origin__.variant == CPU_VARIANT
