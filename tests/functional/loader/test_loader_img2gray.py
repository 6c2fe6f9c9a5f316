"""The loader with a real native op: img2gray, compiled for this machine, locked and loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernel_deps import load_kernel
from kernel_deps.commands.download import download_project
from kernel_deps.commands.lock import lock_project
from tests.fixtures.img2gray_kernel import REPO_ID, cpu_variant_name, reference_img2gray
from tests.fixtures.projects import TEST_PUBLISHERS, trust_table


def locked(tmp_path: Path, requirement: str, name: str) -> Path:
    project = tmp_path / name
    project.mkdir()
    (project / "pyproject.toml").write_text(f'{trust_table(TEST_PUBLISHERS)}[tool.kernels.dependencies]\n"{REPO_ID}" = "{requirement}"\n')
    lock_project(project)
    download_project(project)
    return project


@pytest.fixture
def img2gray(img2gray_hub, hub_env, tmp_path):
    project = locked(tmp_path, ">=1.1,<2", "app")
    return load_kernel(REPO_ID, lockfile=project / "kernels.lock")


def test_locked_op_is_a_native_torch_op_matching_the_reference(img2gray, img2gray_hub) -> None:
    origin = img2gray.__kernel_origin__
    assert (origin.variant, origin.commit) == (cpu_variant_name(), img2gray_hub.repos[REPO_ID].commits["1.1.0"])
    namespace = getattr(torch.ops, img2gray._ops.OPS_NAMESPACE)
    assert hasattr(namespace, "img2gray")
    generator = torch.Generator().manual_seed(0)
    for shape in [(1, 1, 3), (7, 5, 3), (480, 640, 3)]:
        rgb = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
        assert torch.equal(img2gray.img2gray(rgb), reference_img2gray(rgb))
        rgb = torch.rand(shape, generator=generator)
        assert torch.equal(img2gray.img2gray(rgb), reference_img2gray(rgb))


def test_locked_op_works_under_torch_compile_fullgraph(img2gray) -> None:
    compiled = torch.compile(lambda image: img2gray.img2gray(image) * 2, fullgraph=True)
    image = torch.rand(32, 48, 3)
    assert torch.allclose(compiled(image), reference_img2gray(image) * 2)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ([[1, 2, 3]], TypeError, "expected a torch.Tensor of shape (H, W, 3), got list"),
        (torch.zeros(4, 4), ValueError, "expected an image of shape (H, W, 3), got shape (4, 4)"),
        (torch.zeros(4, 4, 3, dtype=torch.float64), TypeError, "unsupported dtype torch.float64"),
    ],
)
def test_bad_input_gives_a_clear_error(img2gray, value, error, message) -> None:
    with pytest.raises(error) as info:
        img2gray.img2gray(value)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_two_versions_of_the_op_live_side_by_side(img2gray_hub, hub_env, tmp_path) -> None:
    old = load_kernel(REPO_ID, lockfile=locked(tmp_path, "<1.1", "old") / "kernels.lock")
    new = load_kernel(REPO_ID, lockfile=locked(tmp_path, ">=1.1,<2", "new") / "kernels.lock")
    assert (old.__version__, new.__version__) == ("1.0.0", "1.1.0")
    assert old._ops.OPS_NAMESPACE != new._ops.OPS_NAMESPACE
    image = torch.randint(0, 256, (9, 11, 3), dtype=torch.uint8)
    assert torch.equal(old.img2gray(image), new.img2gray(image))
