"""[tool.kernels.dependencies]: requirement forms, errors that point at the line, edits that keep the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomlkit
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from kernel_deps.core.errors import InvalidRepoIdError, KernelDepsError, PyprojectError, UsageError
from kernel_deps.core.spec import (
    KernelRequirement,
    parse_add_argument,
    parse_kernel_depends,
    parse_requirement,
    validate_repo_id,
)
from kernel_deps.project.pyproject import read_requirements
from kernel_deps.project.toml_edit import add_requirement, remove_requirement

ROTARY = "kernels-test/rotary"
HEAD = '[project]\nname = "demo"\nversion = "0.1.0"\n\n[tool.kernels.dependencies]\n'  # entries start on line 6
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

PYPROJECT = """\
# Demo project; the comments below must survive every edit.
[project]
name = "demo"   # the distribution name
version = "0.1.0"
dependencies = [
  "torch>=2.5",  # for the kernels
]

[tool.kernels.dependencies]
# Activation functions, any 1.x from 1.2 on.
"kernels-community/activation" = ">=1.2,<2"  # tags
"kernels-test/flash" = 1                     # the v1 branch

[tool.ruff]
line-length = 100 # wide
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "pyproject.toml").write_bytes(text.encode())
    return tmp_path


def assert_one_line(error: KernelDepsError) -> str:
    message = str(error)
    assert message == error.message
    assert len(message.splitlines()) == 1, message
    return message


# --- valid forms ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "specifier", "major", "revision", "prereleases", "text"),
    [
        (">=1.2,<2", ">=1.2,<2", None, None, False, "<2,>=1.2"),
        ("<2, >=1.2", ">=1.2,<2", None, None, False, "<2,>=1.2"),
        (" >= 1.2 ", ">=1.2", None, None, False, ">=1.2"),
        ("~=1.1", "~=1.1", None, None, False, "~=1.1"),
        ("==1.1.0", "==1.1.0", None, None, False, "==1.1.0"),
        ("==1.*", "==1.*", None, None, False, "==1.*"),
        ("!=1.3.0,>=1", ">=1,!=1.3.0", None, None, False, "!=1.3.0,>=1"),
        ("<2", "<2", None, None, False, "<2"),
        (">=2.0.0rc1", ">=2.0.0rc1", None, None, True, ">=2.0.0rc1"),
        ("<3,>=2.0.0b1", ">=2.0.0b1,<3", None, None, True, "<3,>=2.0.0b1"),
        ("1.2.0", "==1.2.0", None, None, False, "==1.2.0"),
        ("v1.2.0", "==1.2.0", None, None, False, "==1.2.0"),
        ("1.2", "==1.2", None, None, False, "==1.2"),
        ("2.0.0rc1", "==2.0.0rc1", None, None, True, "==2.0.0rc1"),
        (1, None, 1, None, False, "1"),
        (0, None, 0, None, False, "0"),
        (12, None, 12, None, False, "12"),
        ({"version": ">=1,<2"}, ">=1,<2", None, None, False, "<2,>=1"),
        ({"version": 3}, None, 3, None, False, "3"),
        ({"revision": "v1"}, None, None, "v1", False, "revision=v1"),
        ({"revision": "v1.2.0"}, None, None, "v1.2.0", False, "revision=v1.2.0"),
        ({"revision": "main"}, None, None, "main", False, "revision=main"),
        ({"revision": "feature/x-y_z"}, None, None, "feature/x-y_z", False, "revision=feature/x-y_z"),
        ({"revision": "refs/pr/1"}, None, None, "refs/pr/1", False, "revision=refs/pr/1"),
        ({"revision": "0a1b2c3d" * 5}, None, None, "0a1b2c3d" * 5, False, "revision=" + "0a1b2c3d" * 5),
    ],
)
def test_parse_requirement_valid_forms(
    value: object, specifier: str | None, major: int | None, revision: str | None, prereleases: bool, text: str
) -> None:
    requirement = parse_requirement(ROTARY, value, source="pyproject.toml")
    assert requirement.repo_id == ROTARY
    assert requirement.specifier == (SpecifierSet(specifier) if specifier is not None else None)
    assert (requirement.major, requirement.revision) == (major, revision)
    assert requirement.prereleases is prereleases
    assert requirement.text == text


@pytest.mark.parametrize(
    ("toml_value", "expected"),
    [
        ('">=1.2,<2"', KernelRequirement(ROTARY, specifier=SpecifierSet(">=1.2,<2"))),
        ("1", KernelRequirement(ROTARY, major=1)),
        ("{ version = '~=1.1' }", KernelRequirement(ROTARY, specifier=SpecifierSet("~=1.1"))),
        ('{ revision = "v1.2.0" }  # pinned', KernelRequirement(ROTARY, revision="v1.2.0")),
        ("'1.2.0'", KernelRequirement(ROTARY, specifier=SpecifierSet("==1.2.0"))),
    ],
)
def test_read_requirements_valid_forms(tmp_path: Path, toml_value: str, expected: KernelRequirement) -> None:
    assert read_requirements(write(tmp_path, f'{HEAD}"{ROTARY}" = {toml_value}\n')) == [expected]


@pytest.mark.parametrize(
    "text",
    [
        '[tool.kernels.dependencies]\n"b/b" = 1\n"a/a" = { revision = "v1" }\n"c/c" = "<2"\n',
        '[tool.kernels]\ndependencies = { "c/c" = "<2", "b/b" = 1, "a/a" = { revision = "v1" } }\n',
        '[tool]\nkernels.dependencies."c/c" = "<2"\n'
        'kernels.dependencies."a/a".revision = "v1"\nkernels.dependencies."b/b" = 1\n',
        '[tool.kernels.dependencies."a/a"]\nrevision = "v1"\n[tool.kernels.dependencies]\n"c/c" = "<2"\n"b/b" = 1\n',
    ],
    ids=["table", "inline", "dotted", "sub-tables"],
)
def test_read_requirements_layouts_sorted_by_repo_id(tmp_path: Path, text: str) -> None:
    found = read_requirements(write(tmp_path, text))
    assert [(r.repo_id, r.text) for r in found] == [("a/a", "revision=v1"), ("b/b", "1"), ("c/c", "<2")]


def test_read_requirements_empty_table(tmp_path: Path) -> None:
    assert read_requirements(write(tmp_path, "[tool.kernels.dependencies]\n# none yet\n")) == []


def test_read_requirements_keeps_bytes_as_written(tmp_path: Path) -> None:
    crlf = PYPROJECT.replace("\n", "\r\n")
    assert read_requirements(write(tmp_path, crlf)) == read_requirements(write(tmp_path, PYPROJECT))


# --- invalid entries: one line, file, line number, key, value, what is expected ------


@pytest.mark.parametrize(
    ("toml_value", "problem"),
    [
        ('">=2,,<3"', "invalid version specifier"),
        ('">=2,"', "invalid version specifier"),
        ('"~=1"', "invalid version specifier"),
        ('"latest"', "invalid version specifier"),
        ('"=>1.0"', "invalid version specifier"),
        (f'">={"9" * 5000}"', "invalid version specifier"),  # too long for int(): refused now, not in allows()
        (f'"{"9" * 5000}"', "invalid version specifier"),
        ('""', "empty version specifier"),
        ('"   "', "empty version specifier"),
        ('"1"', "ambiguous version; write 1 (no quotes)"),
        ('"v2"', "ambiguous version; write 2 (no quotes)"),
        ("-1", "a major version cannot be negative"),
        ("1.5", "a float is not a version"),
        ("true", "a boolean is not a version"),
        ("[1, 2]", "an array is not a version"),
        ('[\n  ">=1",\n]', "an array is not a version"),
        ("1979-05-27", "a date or time is not a version"),
        ("{}", "a version or a revision is needed"),
        ('{ version = ">=1", revision = "v1" }', "give a version or a revision, not both"),
        ('{ tag = "v1" }', 'unknown key "tag"'),
        ('{ version = ">=1", prereleases = true }', 'unknown key "prereleases"'),
        ('{ version = "" }', "empty version specifier"),
        ("{ version = 1.5 }", "a float is not a version"),
        ("{ version = -3 }", "a major version cannot be negative"),
        ('{ revision = "" }', 'invalid revision ""'),
        ('{ revision = "a b" }', 'invalid revision "a b"'),
        ('{ revision = "v1..2" }', 'invalid revision "v1..2"'),
        ('{ revision = "-x" }', 'invalid revision "-x"'),
        ('{ revision = "x.lock" }', 'invalid revision "x.lock"'),
        ("{ revision = 1 }", "the revision is an integer, not a string"),
    ],
)
def test_invalid_entry_names_file_line_key_and_value(tmp_path: Path, toml_value: str, problem: str) -> None:
    project = write(tmp_path, f'{HEAD}"kernels-test/ok" = 1\n"{ROTARY}" = {toml_value}\n"kernels-test/z" = 2\n')
    with pytest.raises(PyprojectError) as caught:
        read_requirements(project)
    message = assert_one_line(caught.value)
    assert message.startswith(f"{project / 'pyproject.toml'}:7: [tool.kernels.dependencies] \"{ROTARY}\" = ")
    assert problem in message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ('"not-a-repo"', "invalid kernel repo id 'not-a-repo'"),
        ('"a/b/c"', "invalid kernel repo id 'a/b/c'"),
        ('"org--x/name"', "invalid kernel repo id 'org--x/name'"),
        ('"-org/name"', "invalid kernel repo id '-org/name'"),
        ('"org/name "', "invalid kernel repo id 'org/name '"),
        ("rotary", "invalid kernel repo id 'rotary'"),
        ('""', "invalid kernel repo id ''"),
    ],
)
def test_invalid_repo_id_is_a_pyproject_error(tmp_path: Path, key: str, problem: str) -> None:
    project = write(tmp_path, f"{HEAD}{key} = 1\n")
    with pytest.raises(PyprojectError) as caught:
        read_requirements(project)
    message = assert_one_line(caught.value)
    shown = key if key.startswith('"') else f'"{key}"'  # a bare key is quoted in the message
    assert f"pyproject.toml:6: [tool.kernels.dependencies] {shown} = 1: {problem}" in message


def test_long_values_are_shortened(tmp_path: Path) -> None:
    with pytest.raises(PyprojectError) as caught:
        read_requirements(write(tmp_path, f'{HEAD}"org/{"n" * 100}" = "{"<" * 200}"\n'))
    message = assert_one_line(caught.value)
    assert ':6: [tool.kernels.dependencies] "org/nnn' in message
    assert "...: invalid kernel repo id 'org/nnn" in message and "...: longer than 96 characters" in message
    assert "n" * 100 not in message  # the repo id is quoted briefly in the reason too
    assert "<" * 78 not in message and "<" * 70 in message


def test_message_matches_the_documented_example() -> None:
    with pytest.raises(PyprojectError) as caught:
        parse_requirement(ROTARY, ">=2,,<3", source="pyproject.toml", line=12)
    assert caught.value.message == (
        'pyproject.toml:12: [tool.kernels.dependencies] "kernels-test/rotary" = ">=2,,<3": invalid version '
        'specifier; expected a PEP 440 range like ">=1.2,<2", a major version like 1, or { revision = "..." }'
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('[tool.kernels]\ndependencies = { "a/b" = 1, "x/y" = 1.5 }\n', 2),
        ('[tool]\nkernels.dependencies."a/b" = 1\n\nkernels.dependencies."x/y" = 1.5\n', 4),
        ('[tool.kernels.dependencies]\n"a/b" = """\n>=1\n"""\n"x/y" = 1.5\n', 5),
        ('[tool.kernels.dependencies]\n"a/b" = 1\n\n[tool.kernels.dependencies."x/y"]\n\nversion = 1.5\n', 6),
        ('[tool.kernels.dependencies."x/y"]  # empty\n\n[tool.other]\n"x/y" = 1.5\n', 1),
        ('[tool.other]\n"x/y" = 1.5\n[tool.kernels.dependencies]\n\'x/y\' = 1.5\n', 4),
    ],
    ids=["inline", "dotted", "after-multiline-string", "sub-table", "empty-sub-table", "same-key-elsewhere"],
)
def test_line_numbers_in_every_layout(tmp_path: Path, text: str, line: int) -> None:
    with pytest.raises(PyprojectError) as caught:
        read_requirements(write(tmp_path, text))
    message = assert_one_line(caught.value)
    assert f"pyproject.toml:{line}: [tool.kernels.dependencies] \"x/y\" = " in message


def test_every_bad_entry_is_counted(tmp_path: Path) -> None:
    with pytest.raises(PyprojectError) as caught:
        read_requirements(write(tmp_path, f'{HEAD}"a/a" = 1.5\n"b/b" = true\n"c/c" = []\n"d/d" = 1\n'))
    message = assert_one_line(caught.value)
    assert ':6: [tool.kernels.dependencies] "a/a" = 1.5' in message
    assert message.endswith("(and 2 more invalid entries)")


def test_value_with_line_breaks_is_shown_on_one_line(tmp_path: Path) -> None:
    with pytest.raises(PyprojectError) as caught:
        read_requirements(write(tmp_path, f'{HEAD}"{ROTARY}" = """>=1\n\u2028<2"""\n'))
    assert '= ">=1\\n\\u2028<2": invalid version specifier' in assert_one_line(caught.value)


# --- the file and the table ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[project]\nname = "x"\n', r"pyproject\.toml: no \[tool\.kernels\.dependencies\] table; .*'kernels add "),
        ("[tool.kernels]\nother = 1\n", r"pyproject\.toml: no \[tool\.kernels\.dependencies\] table"),
        ('[project]\nname = "x"\n[tool\n', r"pyproject\.toml:3: invalid TOML: .* at line 3 col \d+$"),
        ('a = 1\nb = "\n', r"pyproject\.toml:2: invalid TOML: "),
        ("a = 1\na = 2\n", r"pyproject\.toml:2: invalid TOML: Key \"a\" already exists"),
        ("tool = 1\n", r"pyproject\.toml:1: tool = 1: expected a table like \[tool\.kernels\.dependencies\]"),
        ('[tool]\nkernels = "yes"\n', r"pyproject\.toml:2: tool\.kernels = \"yes\": expected a table"),
        ('[tool.kernels]\ndependencies = ["a/b"]\n', r':2: tool\.kernels\.dependencies = \["a/b"\]: expected a table'),
        ('[tool.kernels]\ndependencies = "a/b"\n', r":2: tool\.kernels\.dependencies = \"a/b\": expected a table"),
        ("[[tool.kernels.dependencies]]\n", r":1: tool\.kernels\.dependencies = \[\{\}\]: expected a table"),
    ],
)
def test_read_requirements_file_and_table_errors(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(PyprojectError) as caught:
        read_requirements(write(tmp_path, text))
    assert re.search(expected, assert_one_line(caught.value))


def test_missing_pyproject(tmp_path: Path) -> None:
    with pytest.raises(PyprojectError, match=f"^no pyproject.toml in {re.escape(str(tmp_path))}$"):
        read_requirements(tmp_path)
    with pytest.raises(PyprojectError, match="^no pyproject.toml in "):
        read_requirements(tmp_path / "nowhere")


def test_pyproject_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b"[tool]\nx = '\xff'\n")
    with pytest.raises(PyprojectError, match=r"pyproject\.toml: not valid UTF-8 \(byte 12\)"):
        read_requirements(tmp_path)


# --- KernelRequirement ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "description"),
    [
        ("<2", "kernels-test/rotary <2"),
        (">=1.2,<2", "kernels-test/rotary <2,>=1.2"),
        (1, "kernels-test/rotary 1 (branch v1)"),
        ({"revision": "v1.2.0"}, "kernels-test/rotary revision=v1.2.0"),
    ],
)
def test_describe(value: object, description: str) -> None:
    assert parse_requirement(ROTARY, value, source="p").describe() == description


@pytest.mark.parametrize(
    ("value", "version", "allowed"),
    [
        (">=1.2,<2", "1.2.0", True),
        (">=1.2,<2", "1.9.9", True),
        (">=1.2,<2", "2.0.0", False),
        (">=1.2,<2", "1.1.0", False),
        (">=1.2,<2", "1.5.0rc1", False),  # no pre-release unless the range names one
        ("<2", "2.0.0rc1", False),
        (">=2.0.0rc1", "2.0.0rc2", True),
        (">=2.0.0rc1", "2.1.0b1", True),
        (">=2.0.0rc1", "2.0.0", True),
        ("~=1.1", "1.4", True),
        ("~=1.1", "2.0", False),
        ("==1.*", "1.7.1", True),
        ("1.2.0", "1.2", True),
        (1, "1.4.0", True),
        (1, "1", True),
        (1, "2.0.0", False),
        (1, "1.5.0rc1", False),
    ],
)
def test_allows(value: object, version: str, allowed: bool) -> None:
    assert parse_requirement(ROTARY, value, source="p").allows(Version(version)) is allowed


def test_an_empty_range_is_refused() -> None:
    # No pyproject entry parses to an empty range (it is "empty version specifier"
    # there); a requirement built in code must say what it allows, too.
    with pytest.raises(ValueError, match="empty specifier"):
        KernelRequirement(ROTARY, specifier=SpecifierSet(""))


def test_allows_refuses_a_revision_pin() -> None:
    with pytest.raises(ValueError, match="pins a revision"):
        KernelRequirement(ROTARY, revision="v1").allows(Version("1.0"))


@pytest.mark.parametrize("fields", [{}, {"major": 1, "revision": "v1"}, {"specifier": SpecifierSet("<2"), "major": 1}])
def test_exactly_one_form(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        KernelRequirement(ROTARY, **fields)  # type: ignore[arg-type]


def test_requirement_is_frozen_and_hashable() -> None:
    requirement = KernelRequirement(ROTARY, specifier=SpecifierSet(">=1,<2"))
    assert requirement == KernelRequirement(ROTARY, specifier=SpecifierSet("<2,>=1"))
    assert len({requirement, KernelRequirement(ROTARY, specifier=SpecifierSet("<2,>=1"))}) == 1
    with pytest.raises(AttributeError):
        requirement.major = 1  # type: ignore[misc]


def test_validate_repo_id_unchanged() -> None:
    assert validate_repo_id("kernels-community/activation") == "kernels-community/activation"
    with pytest.raises(InvalidRepoIdError, match="expected 'org/name'"):
        validate_repo_id("activation")


# --- metadata.json kernel-depends ----------------------------------------------------


def test_parse_kernel_depends() -> None:
    entries = [{"repo-id": "kernels-test/rotary", "version": ">=1,<2"}, {"repo-id": "kernels-test/x", "revision": "v1"}]
    assert parse_kernel_depends(entries, source="metadata.json") == [
        KernelRequirement("kernels-test/rotary", specifier=SpecifierSet(">=1,<2")),
        KernelRequirement("kernels-test/x", revision="v1"),
    ]
    assert parse_kernel_depends([], source="metadata.json") == []


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ({"repo-id": "a/b"}, 'metadata.json: kernel-depends = { repo-id = "a/b" }: not a list'),
        (["a/b"], 'kernel-depends[0] = "a/b": a string is not a dependency'),
        ([{"version": ">=1"}], 'kernel-depends[0] = { version = ">=1" }: "repo-id" is missing'),
        ([{"repo-id": "a/b", "version": "x"}], "kernel-depends[0] = { repo-id = \"a/b\", version = \"x\" }: invalid"),
        ([{"repo-id": "a/b"}], "a version or a revision is needed"),
        ([{"repo-id": "a/b", "version": "1"}], "ambiguous version"),
        ([{"repo-id": "a/b", "version": ">=1", "revision": "v1"}], "not both"),
        ([{"repo-id": "a", "version": ">=1"}], "invalid kernel repo id 'a'"),
        ([{"repo-id": 3, "version": ">=1"}], "invalid kernel repo id 3"),
        ([{"repo-id": "a/b", "version": "<2"}, {"repo-id": "a/b", "version": ">1"}], "kernel-depends[1] = "),
    ],
)
def test_parse_kernel_depends_errors(entries: object, expected: str) -> None:
    with pytest.raises(PyprojectError) as caught:
        parse_kernel_depends(entries, source="metadata.json")
    message = assert_one_line(caught.value)
    assert message.startswith("metadata.json: kernel-depends")
    assert expected in message


# --- the CLI argument ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("kernels-test/rotary", ("kernels-test/rotary", None)),
        ("kernels-test/rotary>=1.1,<2", ("kernels-test/rotary", ">=1.1,<2")),
        ("kernels-test/rotary==1.1.0", ("kernels-test/rotary", "==1.1.0")),
        ("kernels-test/rotary ~=1.1 ", ("kernels-test/rotary", "~=1.1")),
        ("kernels-test/rotary<2", ("kernels-test/rotary", "<2")),
        ("kernels-test/rotary!=1.3", ("kernels-test/rotary", "!=1.3")),
        ("kernels-test/flash@v1", ("kernels-test/flash", {"revision": "v1"})),
        ("kernels-test/flash@" + "a" * 40, ("kernels-test/flash", {"revision": "a" * 40})),
    ],
)
def test_parse_add_argument(arg: str, expected: tuple[str, object]) -> None:
    assert parse_add_argument(arg) == expected


@pytest.mark.parametrize(
    ("arg", "error", "expected"),
    [
        ("", UsageError, "invalid kernel requirement \"\"; expected ORG/NAME, ORG/NAME<specifier>"),
        ("kernels-test/rotary>=2,,<3", UsageError, "invalid version specifier; expected ORG/NAME"),
        ("kernels-test/rotary==", UsageError, "invalid version specifier"),
        ("kernels-test/flash@", UsageError, 'invalid revision ""'),
        ("kernels-test/flash@a b", UsageError, 'invalid revision "a b"'),
        ("kernels-test/flash@v1 v2", UsageError, 'invalid revision "v1 v2"'),
        ("kernels-test/flash:1", InvalidRepoIdError, "invalid kernel repo id 'kernels-test/flash:1'"),
        ("rotary>=1", InvalidRepoIdError, "invalid kernel repo id 'rotary'"),
        ("kernels-test/rotary 1.2", UsageError, "expected ORG/NAME, ORG/NAME<specifier>"),
        ("kernels-test/rotary>=1\n<2", UsageError, 'requirement "kernels-test/rotary>=1\\n<2": invalid version'),
    ],
)
def test_parse_add_argument_errors(arg: str, error: type[UsageError], expected: str) -> None:
    with pytest.raises(error) as caught:
        parse_add_argument(arg)
    assert expected in assert_one_line(caught.value)
    assert caught.value.exit_code == 2


# --- editing -------------------------------------------------------------------------


def test_add_new_entry_changes_one_line() -> None:
    added = add_requirement(PYPROJECT, ROTARY, ">=1.1,<2", source="pyproject.toml")
    anchor = '"kernels-test/flash" = 1                     # the v1 branch\n'
    assert added == PYPROJECT.replace(anchor, anchor + f'"{ROTARY}" = ">=1.1,<2"\n')
    assert remove_requirement(added, ROTARY, source="pyproject.toml") == PYPROJECT


def test_replace_entry_keeps_its_comment_and_place() -> None:
    replaced = add_requirement(PYPROJECT, "kernels-community/activation", {"revision": "v1.2.0"}, source="p")
    assert replaced == PYPROJECT.replace('= ">=1.2,<2"  # tags', '= { revision = "v1.2.0" }  # tags')


def test_remove_entry_drops_only_its_line() -> None:
    removed = remove_requirement(PYPROJECT, "kernels-test/flash", source="pyproject.toml")
    assert removed == PYPROJECT.replace('"kernels-test/flash" = 1                     # the v1 branch\n', "")


def test_add_creates_the_table_at_the_end() -> None:
    text = '[project]\nname = "demo"  # hi\n'
    assert add_requirement(text, ROTARY, 1, source="p") == text + f'\n[tool.kernels.dependencies]\n"{ROTARY}" = 1\n'
    assert add_requirement("", ROTARY, 1, source="p") == f'[tool.kernels.dependencies]\n"{ROTARY}" = 1\n'
    no_newline = '[project]\nname = "demo"'
    assert add_requirement(no_newline, ROTARY, 1, source="p").startswith(no_newline + "\n\n[tool.kernels")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[tool.ruff]\nx = 1\n",
            f'[tool.ruff]\nx = 1\n\n[tool.kernels.dependencies]\n"{ROTARY}" = {{ version = "<2" }}\n',
        ),
        (
            "[tool.kernels]\nmode = 1\n",
            f'[tool.kernels]\nmode = 1\n\n[tool.kernels.dependencies]\n"{ROTARY}" = {{ version = "<2" }}\n',
        ),
        (
            '[tool]\nkernels.dependencies."a/b" = 1\n',
            f'[tool]\nkernels.dependencies."a/b" = 1\nkernels.dependencies."{ROTARY}" = {{ version = "<2" }}\n',
        ),
    ],
)
def test_add_into_existing_layouts(text: str, expected: str) -> None:
    assert add_requirement(text, ROTARY, {"version": "<2"}, source="p") == expected


def test_edits_keep_crlf() -> None:
    crlf = PYPROJECT.replace("\n", "\r\n")
    added = add_requirement(crlf, ROTARY, "<2", source="p")
    assert "\n" not in added.replace("\r\n", "")
    assert remove_requirement(added, ROTARY, source="p") == crlf
    assert add_requirement('[project]\r\nname = "x"\r\n', ROTARY, 1, source="p").endswith(f'"{ROTARY}" = 1\r\n')


@pytest.mark.parametrize(
    ("value", "problem"), [(">=2,,<3", "invalid version specifier"), (True, "a boolean"), ({"rev": "x"}, "unknown key")]
)
def test_add_validates_the_value(value: object, problem: str) -> None:
    with pytest.raises(PyprojectError, match=f'^p: \\[tool.kernels.dependencies\\] "{ROTARY}" = .*{problem}'):
        add_requirement(PYPROJECT, ROTARY, value, source="p")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[tool]\nkernels = 1\n", r"^p:2: tool\.kernels = 1: expected a table"),
        ("[tool.kernels]\ndependencies = []\n", r"^p:2: tool\.kernels\.dependencies = \[\]: expected a table"),
        ("x = [", r"^p:1: invalid TOML"),
    ],
)
def test_add_refuses_a_broken_file(text: str, expected: str) -> None:
    with pytest.raises(PyprojectError, match=expected):
        add_requirement(text, ROTARY, 1, source="p")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PYPROJECT, r'has no entry "kernels-test/rotary" to remove \(entries: "kernels-community/activation", '),
        ('[project]\nname = "x"\n', r'has no entry "kernels-test/rotary" to remove \(entries: none\)'),
        ("[tool.kernels.dependencies]\n", r"has no entry \"kernels-test/rotary\" to remove \(entries: none\)"),
    ],
)
def test_remove_missing_entry(text: str, expected: str) -> None:
    with pytest.raises(PyprojectError, match=r"^pyproject\.toml: \[tool\.kernels\.dependencies\] " + expected):
        remove_requirement(text, ROTARY, source="pyproject.toml")


def test_remove_the_last_entry_keeps_the_table(tmp_path: Path) -> None:
    text = f'[tool.kernels.dependencies]\n"{ROTARY}" = 1\n'
    assert remove_requirement(text, ROTARY, source="p") == "[tool.kernels.dependencies]\n"
    assert read_requirements(write(tmp_path, "[tool.kernels.dependencies]\n")) == []


# --- properties ----------------------------------------------------------------------

TOML_BITS = st.sampled_from(
    ["[", "]", "[[", "]]", " = ", '"', "'", '"""', "\n", "\r\n", "#", ",", "{", "}", ".", "1", "-1", "1.5", "true",
     "1979-05-27", "tool", "kernels", "dependencies", '"a/b"', '"kernels-test/rotary"', "version", "revision",
     '">=1,<2"', '"v1"', "\\", "é", "\t", " "]
)  # fmt: skip
SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.floats(), st.booleans(), st.text(max_size=20),
    st.sampled_from([">=1.2,<2", "1.2.0", "1", "v1", "~=1", "==1.*", ">=2,,<3", "main"]),
    st.dates(),
)  # fmt: skip
TOMLISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["version", "revision"]) | st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
REPO_IDS = st.from_regex(r"\A[a-z0-9](?:[a-z0-9_-]{0,8}[a-z0-9])?/[a-z0-9](?:[a-z0-9._-]{0,8}[a-z0-9])?\Z").filter(
    lambda repo_id: ".." not in repo_id and "--" not in repo_id
)


@SETTINGS
@given(text=st.text() | st.lists(TOML_BITS, max_size=40).map("".join))
def test_any_text_reads_or_raises_pyproject_error(tmp_path: Path, text: str) -> None:
    try:
        found = read_requirements(write(tmp_path, text))
    except PyprojectError as exc:
        assert_one_line(exc)
    else:
        assert all(isinstance(requirement, KernelRequirement) for requirement in found)


@SETTINGS
@given(repo_id=REPO_IDS | st.text(max_size=12), value=TOMLISH)
def test_any_value_parses_or_raises_a_kernel_deps_error(repo_id: str, value: object) -> None:
    try:
        requirement = parse_requirement(repo_id, value, source="pyproject.toml")
    except (PyprojectError, InvalidRepoIdError) as exc:
        assert_one_line(exc)
        assert exc.message.startswith(f"pyproject.toml: {'[tool.kernels.dependencies]'} ")
    else:
        assert requirement.repo_id == repo_id
        assert requirement.text


@SETTINGS
@given(repo_id=REPO_IDS | st.text(max_size=12), value=TOMLISH)
def test_any_value_in_a_file_reads_or_raises_with_its_line(tmp_path: Path, repo_id: str, value: object) -> None:
    try:  # tomlkit writes tables as [tool.kernels.dependencies."org/name"] sub-tables
        text = '[project]\nname = "x"\n\n' + tomlkit.dumps({"tool": {"kernels": {"dependencies": {repo_id: value}}}})
    except Exception:  # not every Python value has a TOML spelling; that is not what is tested here
        assume(False)
    try:
        read_requirements(write(tmp_path, text))
    except PyprojectError as exc:
        line = re.search(r"pyproject\.toml:(\d+): \[tool\.kernels\.dependencies\] ", assert_one_line(exc))
        assert line, exc.message
        assert int(line[1]) > 3 and text.split("\n")[int(line[1]) - 1].strip()


def _specifiers() -> st.SearchStrategy[str]:
    version = st.builds(
        lambda parts, pre: ".".join(map(str, parts)) + pre,
        st.lists(st.integers(0, 30), min_size=2, max_size=3),
        st.sampled_from(["", "", "rc1", "b2"]),
    )
    clause = st.builds(lambda op, v: op + v, st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "~="]), version)
    return st.lists(clause, min_size=1, max_size=3).map(",".join) | version


REVISIONS = st.from_regex(r"\A[a-zA-Z0-9](?:[a-zA-Z0-9._-]|/(?![/.])){0,20}[a-zA-Z0-9]\Z").filter(
    lambda revision: ".." not in revision and not revision.endswith(".lock")
)
VALID_VALUES = st.one_of(
    st.integers(0, 99),
    _specifiers(),
    st.builds(lambda spec: {"version": spec}, _specifiers()),
    st.builds(lambda rev: {"revision": rev}, REVISIONS),
)
BASES = st.sampled_from(
    [
        "",
        PYPROJECT,
        '# only a comment\n[project]\nname = "x"  # trailing\n',
        "[tool.kernels.dependencies]\n# nothing yet\n",
        '[tool.kernels]\n# inline form\ndependencies = { "a/b" = 1 }  # end\n',
        '[tool]\n# dotted\nkernels.dependencies."a/b" = 1\n\n[tool.ruff]  # after\nx = 1\n',
    ]
)


def _comments(text: str) -> list[str]:
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


@SETTINGS
@given(base=BASES, repo_id=REPO_IDS, value=VALID_VALUES)
def test_add_then_read_then_remove(tmp_path: Path, base: str, repo_id: str, value: object) -> None:
    assume(repo_id not in base)
    added = add_requirement(base, repo_id, value, source="pyproject.toml")  # type: ignore[arg-type]
    found = {r.repo_id: r for r in read_requirements(write(tmp_path, added))}
    assert found[repo_id] == parse_requirement(repo_id, value, source="pyproject.toml")
    removed = remove_requirement(added, repo_id, source="pyproject.toml")
    assert _comments(removed) == _comments(base)
    if "[tool" in base:
        assert removed == base


def test_read_kernels_table_gives_the_table_and_its_requirements_from_one_read(tmp_path) -> None:
    from kernel_deps.project.pyproject import read_kernels_table

    assert read_kernels_table(tmp_path, missing_ok=True) == (None, None)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert read_kernels_table(tmp_path) == (None, None)
    (tmp_path / "pyproject.toml").write_text("[tool.kernels]\nallow-stale-lock = true\n")
    assert read_kernels_table(tmp_path) == ({"allow-stale-lock": True}, None)
    (tmp_path / "pyproject.toml").write_text('[tool.kernels]\nallow-stale-lock = true\n[tool.kernels.dependencies]\n"a/b" = 1\n')
    table, requirements = read_kernels_table(tmp_path)
    assert table == {"allow-stale-lock": True, "dependencies": {"a/b": 1}}
    assert requirements == read_requirements(tmp_path) == [KernelRequirement("a/b", major=1)]
