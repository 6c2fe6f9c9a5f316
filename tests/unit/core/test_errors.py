"""The error record: subject, reason and hint as fields, redacted when made, told in one rule,
and a kind code per class that docs/schemas/error.schema.json lists."""

from __future__ import annotations

import importlib
import inspect

import pytest

from kernel_deps.core import errors
from kernel_deps.core.errors import (
    HubError,
    KernelDepsError,
    LinkedPathError,
    LockfileError,
    LockPolicyError,
    PathNotFoundError,
    RepoNotFoundError,
    ResolutionError,
    RevisionNotFoundError,
    SignatureError,
)
from tests.fixtures.schemas import load_schema

TOKEN = "hf_errorfieldsecret123456"
# Every module defining an error class of its own, besides core.errors.
ERROR_MODULES = ("kernel_deps.core.variants", "kernel_deps.loader.local")


def error_classes() -> list[type[KernelDepsError]]:
    """Each KernelDepsError class kernel-deps defines with a kind of its own."""
    modules = [errors, *(importlib.import_module(name) for name in ERROR_MODULES)]
    return [cls for module in modules for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, KernelDepsError) and cls.__module__ == module.__name__]  # fmt: skip


@pytest.mark.parametrize(
    ("subject", "reason", "hint", "line"),
    [
        ("kernels.lock", "not found", "run 'kernels lock' to create it", "kernels.lock: not found; run 'kernels lock' to create it"),
        ("kernels.lock", "not found", None, "kernels.lock: not found"),
        (None, "no pyproject.toml in /p", None, "no pyproject.toml in /p"),
        (None, "invalid kernel requirement 'x'", "expected ORG/NAME", "invalid kernel requirement 'x'; expected ORG/NAME"),
        ("org/a", "cannot find versions:\n  org/b 1 (from project)", "relax one", "org/a: cannot find versions:\n  org/b 1 (from project)\nhint: relax one"),
    ],
    ids=["all-three", "no-hint", "reason-only", "no-subject", "several-lines"],
)
def test_the_message_is_the_fields_told_in_one_rule(subject, reason, hint, line) -> None:
    exc = KernelDepsError(reason, subject=subject, hint=hint)
    assert (exc.subject, exc.reason, exc.hint) == (subject, reason, hint)
    assert exc.message == str(exc) == errors.render(subject, reason, hint) == line


def test_a_single_text_is_the_reason() -> None:
    exc = HubError("the Hub answered an error")
    assert (exc.subject, exc.reason, exc.hint, exc.message) == (None, "the Hub answered an error", None,
                                                                  "the Hub answered an error")  # fmt: skip


def test_a_subject_that_is_a_path_is_its_text(tmp_path) -> None:
    exc = LockfileError("not found", subject=tmp_path / "kernels.lock", hint="run 'kernels lock'")
    assert exc.subject == str(tmp_path / "kernels.lock") and exc.message.startswith(f"{tmp_path}/kernels.lock: ")


@pytest.mark.parametrize("field", ["subject", "reason", "hint"])
def test_a_token_in_any_field_does_not_survive(monkeypatch, field) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    given = {"subject": "org/a", "reason": "refused", "hint": "check HF_TOKEN"}
    given[field] = f"{given[field]} (sent {TOKEN}, via https://user:{TOKEN}@hub.example/api)"
    exc = KernelDepsError(given.pop("reason"), **given)
    assert TOKEN not in (getattr(exc, field) or "") and TOKEN not in exc.message and TOKEN not in str(exc)
    assert "https://***@hub.example/api" in getattr(exc, field)


def test_a_lower_errors_fields_carry_over_redacted(monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    lower = RepoNotFoundError("org/gone", f"https://user:{TOKEN}@hub.example")
    upper = HubError(lower.reason, subject="org/a redirects to org/gone, which is missing", hint=lower.hint)
    assert TOKEN not in upper.message and "kernel repo not found on https://***@hub.example" in upper.message
    assert upper.hint == "check the name, or set HF_TOKEN if the repo is private"


def test_hub_errors_name_their_repo_as_the_subject() -> None:
    found = [RepoNotFoundError("org/a", "https://hub.example"), RevisionNotFoundError("org/a", "v9"),
             PathNotFoundError("org/a", "0" * 40, "build/x")]  # fmt: skip
    assert [e.subject for e in found] == ["org/a"] * 3
    assert [e.reason for e in found] == ["kernel repo not found on https://hub.example",
                                         "revision 'v9' not found on the Hub", "the Hub has no build/x at 000000000000"]
    assert found[0].hint and found[1].hint is None


@pytest.mark.parametrize(
    ("nearest", "names"),
    [((), None), (("o/a",), "'o/a'"), (("o/a", "o/b"), "'o/a' or 'o/b'"), (("o/a", "o/b", "o/c"), "'o/a', 'o/b' or 'o/c'")],
)
def test_a_repo_not_found_names_the_nearest_repos_in_its_hint(nearest, names) -> None:
    found = RepoNotFoundError("o/x", "https://hub.example", nearest)
    plain = "check the name, or set HF_TOKEN if the repo is private"
    assert found.hint == (f"did you mean {names}? (a private repo needs HF_TOKEN)" if names else plain)
    assert found.nearest == nearest and found.reason == "kernel repo not found on https://hub.example"


def test_errors_with_records_keep_them_beside_the_fields(tmp_path) -> None:
    link = LinkedPathError("is a symbolic link", subject=tmp_path, hint="remove it", path=tmp_path)
    policy = LockPolicyError("kernels.lock does not show what the policy asks", ("finding",), subject="kernels download")
    refused = SignatureError("not signed", ("refusal",), subject="org/a")
    assert (link.path, link.message) == (tmp_path, f"{tmp_path}: is a symbolic link; remove it")
    assert policy.problems == ("finding",) and policy.message.startswith("kernels download: kernels.lock does not")
    assert refused.refused == ("refusal",) and refused.message == "org/a: not signed"


def test_a_conflict_keeps_its_hint_on_a_line_of_its_own() -> None:
    cause = errors.ConflictCause("org/a", ">=2", "org/a>=2", None)
    exc = ResolutionError.conflict([cause], [errors.OfferedVersions("org/a", ("v1.0.0",), ())], requester="project",
                                   hint="relax a requirement")  # fmt: skip
    assert exc.hint == "relax a requirement" and exc.to_json()["hint"] == "relax a requirement"
    assert exc.message.splitlines()[-1] == "hint: relax a requirement" and exc.message.count("hint:") == 1


def test_every_error_class_has_a_kind_of_its_own_that_the_schema_lists() -> None:
    classes = error_classes()
    assert len(classes) > 30
    own = {cls.__name__: cls.__dict__.get("kind") for cls in classes}
    assert all(own.values()), [name for name, kind in own.items() if not kind]
    assert len(set(own.values())) == len(own), "two error classes share a kind"
    assert sorted(own.values()) == sorted(load_schema("error")["properties"]["kind"]["enum"])


def test_the_schema_says_the_message_rule() -> None:
    schema = load_schema("error")
    assert {"kind", "subject", "reason", "hint"} <= set(schema["required"])
    assert "subject: reason; hint" in schema["properties"]["error"]["description"]
