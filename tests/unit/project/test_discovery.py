"""The one error of a walk for the project that found none names where it looked and why it stopped."""

from __future__ import annotations

from pathlib import Path

from kernel_deps.project.discovery import ProjectSearch, no_project_found, search_project


def test_a_walk_to_the_file_system_root_says_so(tmp_path) -> None:
    # A folder that does not exist, just below the file-system root: every folder of the walk is looked in.
    outside = Path(tmp_path.anchor) / f"kernel-deps-no-such-folder-{tmp_path.name}" / "app"
    search = search_project(outside)
    assert (search.folder, search.start, search.last, search.stop) == (
        None, outside, Path(outside.anchor), ProjectSearch.FILE_SYSTEM_ROOT,
    )  # fmt: skip
    assert no_project_found(search).message == (
        f"no pyproject.toml or kernels.lock in {outside} or above it up to {outside.anchor} (the search stops "
        "there: the file-system root); run the command in the project folder, or pass the folder as PROJECT_DIR"
    )
    (tmp_path / "pyproject.toml").write_text("")
    assert search_project(tmp_path / "never-made" / "app").folder == tmp_path  # missing folders are walked through


def test_a_repository_root_is_where_it_stops(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    search = search_project(checkout / "src")
    assert (search.folder, search.last, search.stop) == (None, checkout, ProjectSearch.REPOSITORY_ROOT)
    assert no_project_found(search).exit_code == 2
