"""How ``kernels`` finds the Hugging Face CLI on ``sys.path``: its ``.dist-info`` folder's
name is matched ignoring case, the first match in name order wins, and other folders
that only resemble it are passed over.

The real kernels 0.17.2 release (``.venv/compat/``) is laid out under other folder names in
a temporary ``sys.path`` entry, and the real ``kernels --version`` of this checkout reads it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.peers import env_with_peer, peer_path
from tests.fixtures.processes import KERNELS


def version_line(location: Path) -> str:
    env = env_with_peer(None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(location), os.environ.get("PYTHONPATH")]))
    result = subprocess.run([KERNELS, "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[1]


def lay_out(location: Path, *dist_infos: str) -> None:
    """The 0.17.2 release's CLI module under ``location``, with its .dist-info as each of ``dist_infos``."""
    release = peer_path("0.17")
    (location / "kernels").symlink_to(release / "kernels", target_is_directory=True)
    for name in dist_infos:
        shutil.copytree(release / "kernels-0.17.2.dist-info", location / name)


@pytest.mark.parametrize("name", ["kernels-0.17.2.dist-info", "KERNELS-0.17.2.DIST-INFO", "Kernels-0.17.2.Dist-Info"])
def test_the_dist_info_is_found_in_any_case(tmp_path: Path, name: str) -> None:
    lay_out(tmp_path, name)
    line = version_line(tmp_path)
    assert line.startswith(f"Hugging Face kernels 0.17.2 ({tmp_path}): runs ") and "verify-signature" in line


def test_folders_that_only_resemble_it_are_passed_over(tmp_path: Path) -> None:
    # Sorted first, but not a distribution named kernels: no version, a dash in it, no suffix.
    lay_out(tmp_path, "kernels-.dist-info", "kernels-0-1.dist-info", "kernels-0.1.dist-info.old", "kernels-9.9.dist-info")
    (tmp_path / "kernels-9.9.dist-info" / "entry_points.txt").write_text("[console_scripts]\nother = x:y\n")
    assert version_line(tmp_path).startswith("Hugging Face kernels: not installed")
    shutil.copytree(peer_path("0.17") / "kernels-0.17.2.dist-info", tmp_path / "kernels-0.17.2.dist-info")
    assert version_line(tmp_path).startswith(f"Hugging Face kernels 0.17.2 ({tmp_path}): runs ")
