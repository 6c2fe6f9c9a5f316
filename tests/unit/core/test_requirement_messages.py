"""What a bad requirement's one-line message says: the value as TOML shows it, and the hint.

A problem that carries its own advice (an ambiguous version, a bad revision, a bad repo
id, a kernel listed twice) ends with that advice; the others end with the forms expected.
"""

from __future__ import annotations

import pytest

from kernel_deps.core.errors import PyprojectError, UsageError
from kernel_deps.core.errors import InvalidRepoIdError
from kernel_deps.core.spec import (
    parse_add_argument,
    parse_kernel_depends,
    parse_requirement,
    requirement_from_value,
    show_toml,
    validate_repo_id,
)

EXPECTED = 'expected a PEP 440 range like ">=1.2,<2", a major version like 1, or { revision = "..." }'
EXPECTED_DEPENDS = 'expected {"repo-id": "org/name", "version": ">=1.2,<2"} or { ..., "revision": "..." }'


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, "true"),
        (False, "false"),
        ("é", '"é"'),  # as written, not as a \u escape
        ({"version": "1"}, '{ version = "1" }'),
        ({"a b": 1}, '{ "a b" = 1 }'),  # a key that is not bare is quoted
        ({}, "{}"),
        ([1, "x"], '[1, "x"]'),
        ("a" * 78, '"' + "a" * 78 + '"'),  # 80 characters: shown whole
        ("a" * 79, '"' + "a" * 76 + "..."),  # 81: shortened to 80
    ],
)
def test_values_are_shown_as_toml_on_one_line(value: object, shown: str) -> None:
    assert show_toml(value) == shown


def entry_message(repo_id: str, value: object) -> str:
    with pytest.raises(PyprojectError) as caught:
        parse_requirement(repo_id, value, source="app/pyproject.toml", line=7)
    return str(caught.value)


@pytest.mark.parametrize(
    ("value", "ending"),
    [
        ("1", 'ambiguous version; write 1 (no quotes) for the v1 branch, or a range like ">=1,<2" for its tags'),
        ("v2", 'ambiguous version; write 2 (no quotes) for the v2 branch, or a range like ">=2,<3" for its tags'),
        ({"revision": "a..b"}, 'invalid revision "a..b"; expected a branch, tag or 40-hex commit'),
    ],
)
def test_a_problem_with_its_own_advice_ends_with_it(value: object, ending: str) -> None:
    message = entry_message("org/name", value)
    assert message.startswith("app/pyproject.toml:7: [tool.kernels.dependencies] \"org/name\" = ")
    assert message.endswith(f": {ending}")


def test_a_bad_repo_id_ends_with_the_repo_id_rule() -> None:
    message = entry_message("org/a..b", "1")
    assert message.endswith("invalid kernel repo id 'org/a..b': expected 'org/name' (letters, digits, '-', '_', '.'), "
                            "e.g. 'kernels-community/activation'")  # fmt: skip


def test_other_problems_end_with_the_forms_expected() -> None:
    assert entry_message("org/name", 1.5).endswith(f": a float is not a version; {EXPECTED}")


def test_repo_ids_with_a_double_dot_or_dash_are_invalid() -> None:
    for bad in ("org/a..b", "org/a--b", "o..g/name"):
        with pytest.raises(InvalidRepoIdError):
            validate_repo_id(bad)
    assert validate_repo_id("org/a.b-c_d") == "org/a.b-c_d"


def test_an_add_argument_with_a_bad_revision_ends_with_the_revision_rule() -> None:
    with pytest.raises(UsageError) as caught:
        parse_add_argument("org/name@a..b")
    assert str(caught.value) == ('invalid kernel requirement "org/name@a..b": invalid revision "a..b"; '
                                 "expected a branch, tag or 40-hex commit")  # fmt: skip


def test_arbitrary_equality_takes_any_version_text() -> None:
    assert str(requirement_from_value("org/name", "===2024-build.7").specifier) == "===2024-build.7"


def depends_message(entries: list) -> str:
    with pytest.raises(PyprojectError) as caught:
        parse_kernel_depends(entries, source="org/x@v1 build/torch-universal/metadata.json")
    return str(caught.value)


def test_kernel_depends_messages_name_the_entry_and_what_is_wrong() -> None:
    a = {"repo-id": "org/a", "version": ">=1"}
    assert depends_message([a, a]).endswith(f"kernel-depends[1] = {show_toml(a)}: org/a is listed twice")
    assert depends_message([a, None]).endswith(f"kernel-depends[1] = null: null is not a dependency; {EXPECTED_DEPENDS}")
    assert depends_message([{"version": "1"}]).endswith(f': "repo-id" is missing; {EXPECTED_DEPENDS}')
