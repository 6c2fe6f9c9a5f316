"""The Python examples of docs/library.md and the README, run as written against the local Hub.

Only the organisation is swapped: the examples name ``kernels-community`` kernels, the
sample catalogue serves the same names under ``kernels-test``. The loading example runs
after the commands one, which downloads what it loads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernel_deps.lock.read import read_lock
from tests.fixtures.projects import write_project

ROOT = Path(__file__).resolve().parents[3]
LIBRARY = ROOT / "docs" / "library.md"
README = ROOT / "README.md"


def python_blocks(path: Path) -> dict[str, str]:
    """Each fenced python block of ``path`` by the heading it sits under."""
    blocks: dict[str, str] = {}
    heading = ""
    for part in re.split(r"^(## .*|```python\n(?:.*\n)*?```)$", path.read_text(), flags=re.MULTILINE):
        if part.startswith("## "):
            heading = part[3:].strip()
        elif part.startswith("```python"):
            blocks[heading] = part.removeprefix("```python\n").removesuffix("```")
    return blocks


def test_every_python_example_of_the_library_page_and_the_readme_runs(
    hub_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = python_blocks(LIBRARY)
    assert list(blocks) == ["Loading kernels", "Commands from Python", "Lower-level pieces"]
    project = write_project(tmp_path / "app", '"kernels-test/activation" = ">=1.2,<2"')
    monkeypatch.chdir(project)
    ran = {}
    for heading in ("Commands from Python", "Loading kernels", "Lower-level pieces"):
        code = blocks[heading].replace("kernels-community/", "kernels-test/")
        ran[heading] = {"__name__": "docs_example"}
        exec(compile(code, f"docs/library.md ({heading})", "exec"), ran[heading])
    quick_start = python_blocks(README)["Quick start"].replace("kernels-community/", "kernels-test/")
    readme = {"__name__": "docs_example"}
    exec(compile(quick_start, "README.md (Quick start)", "exec"), readme)
    library = python_blocks(README)["Library"]
    exec(compile(library, "README.md (Library)", "exec"), {"__name__": "docs_example"})
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"\['\+ kernels-test/activation v1\.2\.0 \([0-9a-f]{12}\)'\]", out[0])  # as its comment shows
    assert out[1].startswith("True False ")  # written, not up to date before
    assert re.fullmatch(r"added [0-9a-f]{12}", out[2])  # the change as a record
    assert out[3].startswith("1 0 ")  # one variant fetched
    assert out[4] == "True"  # verify: nothing disagrees
    assert out[-2:] == ["kernel", "True"]  # README's Library block: the lock is up to date, verify passes
    origin = ran["Loading kernels"]["activation"].__kernel_origin__
    # The locked build: an earlier test of this process may have imported the same commit already.
    locked = read_lock(project / "kernels.lock", purpose="use").lock.get("kernels-test/activation")
    assert (origin.repo_id, origin.commit) == ("kernels-test/activation", locked.sha)
    assert readme["activation"] is ran["Loading kernels"]["activation"]  # the same locked build, loaded once
    assert (project / "kernels.lock").is_file()
