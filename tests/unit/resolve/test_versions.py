"""Refs become ordered candidate versions."""

from __future__ import annotations

import pytest

from kernel_deps.core.versions import GitRef, parse_version_ref, versions_from_refs


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("v1.2.0", "tag", "1.2.0"),
        ("v1.2", "tag", "1.2"),
        ("v2.0.0rc1", "tag", "2.0.0rc1"),
        ("v1", "branch", "1"),
        ("v10", "branch", "10"),
        ("main", "branch", None),
        ("v1.2", "branch", None),
        ("v1", "tag", None),
        ("release-1.0", "tag", None),
        ("v1.2.3.4.5", "tag", None),
        ("vx.y", "tag", None),
    ],
)
def test_parse_version_ref(name: str, kind: str, expected: str | None) -> None:
    parsed = parse_version_ref(GitRef(name, kind, "0" * 40))
    assert (str(parsed.version) if parsed else None) == expected


def test_newest_first_with_major_branch_above_its_tags() -> None:
    refs = [
        GitRef("v1.0.0", "tag", "a" * 40),
        GitRef("main", "branch", "b" * 40),
        GitRef("v2", "branch", "c" * 40),
        GitRef("v1", "branch", "d" * 40),
        GitRef("v1.10.0", "tag", "e" * 40),
        GitRef("v1.9.0", "tag", "f" * 40),
        GitRef("v2.0.0", "tag", "c" * 40),
    ]
    assert [v.ref.name for v in versions_from_refs(refs)] == ["v2", "v2.0.0", "v1", "v1.10.0", "v1.9.0", "v1.0.0"]
