"""kernel_deps.lock.model: the lock model, strict parse and writing; the lock diff (reading a file: test_lockread).

The compatibility tests at the end run the Hugging Face ``kernels`` 0.16 library in a
subprocess (it is installed apart from .venv, because its ``kernels`` console script
would replace ours) against the same repos, and check that it computes the same variant
hashes and reads the locks written here.
"""

from __future__ import annotations

import copy
import dataclasses
import errno
import json
import os
import pickle
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_deps.lock.diff import diff_locks
from kernel_deps.core.errors import FileWriteError, LockfileError, UsageError
from kernel_deps.core.hashing import git_blob_id_of_file, is_hashed_path, sha256_of_file, variant_hash
from kernel_deps.lock.entries import requirement_from_text
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock, write_lockfile
from kernel_deps.lock.read import PURPOSES, parse_lock, read_lock
from kernel_deps.cli.render_lock import change_line
from tests.fixtures.builder import (
    CPU_VARIANT,
    CUDA_VARIANT,
    ROTARY,
    STABLE_ABI_VARIANT,
    UNIVERSAL_VARIANT,
    BuiltRepo,
    KernelRepo,
    Release,
    build_repo,
    git_blob_id,
)
from tests.fixtures.locks import DROP, HASH_A, HASH_B, SHA_A, SHA_B, entries_with, example_text


def kernel(repo_id: str = "kernels-test/activation", **changes: Any) -> LockedKernel:
    fields: dict[str, Any] = {
        "repo_id": repo_id,
        "sha": SHA_A,
        "variants": {UNIVERSAL_VARIANT: VariantLock(hash=HASH_A)},
        "version": "v1.1.0",
        "requirement": ">=1.1",
        "dependencies": (),
    }
    fields.update(changes)
    return LockedKernel(**fields)


# --- the model -------------------------------------------------------------------------


def test_example_round_trips_byte_for_byte() -> None:
    text = example_text()
    lock = Lockfile.from_json(text)
    assert lock.to_text() == text
    assert text.endswith("]\n") and '\n  {\n    "repo_id"' in text  # 2-space indent
    assert lock.repo_ids == tuple(sorted(lock.repo_ids))
    assert lock.get("kernels-test/rotary").requirement is None
    assert lock.get("kernels-test/layer-norm").dependencies == ("kernels-test/activation",)
    assert lock.get("kernels-test/nope") is None


def test_entry_keys_are_written_in_the_documented_order() -> None:
    for entry in json.loads(example_text()):
        order = ("repo_id", "sha", "variants", "version", "requirement", "dependencies", "kernel_depends")
        assert list(entry) == [k for k in order if k in entry]
        assert list(entry["variants"]) == sorted(entry["variants"])
        assert entry["dependencies"] == sorted(entry["dependencies"])
        assert list(entry.get("kernel_depends", {})) == entry["dependencies"]  # written for every dependency


def test_none_fields_are_omitted_and_dependencies_always_present() -> None:
    entry = json.loads(Lockfile(kernels=(kernel(version=None, requirement=None),)).to_text())[0]
    assert list(entry) == ["repo_id", "sha", "variants", "dependencies"]
    assert entry["dependencies"] == []
    assert Lockfile(kernels=()).to_text() == "[]\n"


def test_to_json_is_deterministic_whatever_the_input_order() -> None:
    variants = {CUDA_VARIANT: VariantLock(hash=HASH_A), CPU_VARIANT: VariantLock(hash=HASH_B)}
    deps = ("kernels-test/rotary", "kernels-test/layer-norm")
    others = (kernel("kernels-test/rotary"), kernel("kernels-test/layer-norm"))
    one = Lockfile(kernels=(kernel(variants=variants, dependencies=deps), *others))
    reversed_variants = dict(reversed(list(variants.items())))
    two = Lockfile(kernels=(*reversed(others), kernel(variants=reversed_variants, dependencies=deps[::-1])))
    assert one == two
    assert one.to_text() == two.to_text()
    assert one.to_text() == Lockfile.from_json(one.to_text()).to_text()


def test_records_are_frozen_hashable_and_picklable() -> None:
    lock = Lockfile.from_json(example_text())
    entry = lock.kernels[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.sha = SHA_B  # type: ignore[misc]
    with pytest.raises(TypeError):
        entry.variants["x"] = VariantLock(hash=HASH_A)  # type: ignore[index]
    assert hash(lock) == hash(Lockfile.from_json(example_text()))
    assert pickle.loads(pickle.dumps(lock)) == lock
    assert copy.deepcopy(lock) == lock
    assert dict(entry.variants) == {k: v for k, v in entry.variants.items()}


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"repo_id": "activation"}, "repo_id"),
        ({"sha": "abc"}, "sha"),
        ({"sha": SHA_A.upper()}, "sha"),
        ({"variants": []}, "variants"),
        ({"variants": {"a/b": VariantLock(hash=HASH_A)}}, "variants['a/b']"),
        ({"variants": {UNIVERSAL_VARIANT: HASH_A}}, f"variants.{UNIVERSAL_VARIANT}"),
        ({"version": ""}, "version"),
        ({"requirement": 1}, "requirement"),
        ({"dependencies": "kernels-test/rotary"}, "dependencies"),
        ({"dependencies": ("kernels-test/activation",)}, "dependencies[0]"),
        ({"dependencies": ("kernels-test/a", "kernels-test/a")}, "dependencies[1]"),
    ],
)
def test_constructor_rejects_invalid_fields(changes: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"in '{key}'")):
        kernel(**changes)


@pytest.mark.parametrize(
    "changes",
    [{"hash": "sha256-" + "A" * 64}, {"hash": "sha256-abc"}, {"hash": "a" * 64}, {"hash_type": "sha256"}],
)
def test_variant_lock_rejects_invalid_fields(changes: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        VariantLock(**{"hash": HASH_A, **changes})


def test_lockfile_rejects_duplicates_and_unlocked_dependencies() -> None:
    # The same rules, and messages, as for a file: positions are those of ``kernels``.
    with pytest.raises(ValueError, match=r"^duplicate repo_id 'kernels-test/activation' in '\[0\].repo_id' and '\[1\]"):
        Lockfile(kernels=(kernel(), kernel(sha=SHA_B)))
    with pytest.raises(ValueError, match=r"^dependency 'kernels-test/rotary' in '\[0\].dependencies\[0\]'"):
        Lockfile(kernels=(kernel(dependencies=("kernels-test/rotary",)),))


def test_a_dependency_without_an_entry_is_named_where_the_file_lists_it() -> None:
    # The record sorts its dependencies; the message points into the file as written.
    text = json.dumps(entries_with(0, dependencies=[ROTARY, "kernels-test/absent"]))
    with pytest.raises(LockfileError, match=r"'kernels-test/absent' in '\[0\].dependencies\[1\]'"):
        Lockfile.from_json(text)


# --- strict parse ------------------------------------------------------------------------


def variant_with(**changes: Any) -> dict[str, Any]:
    variant: dict[str, Any] = {"hash": HASH_B, "hash_type": "git_lfs_concat"}
    variant.update(changes)
    return {k: v for k, v in variant.items() if v is not DROP}


UV = UNIVERSAL_VARIANT
MALFORMED = [
    # (JSON value or raw text, where, what the message must quote)
    (entries_with(sha="abc"), "'[1].sha' (kernels-test/rotary)", "invalid commit 'abc'"),
    (entries_with(sha=SHA_B.upper()), "'[1].sha' (kernels-test/rotary)", repr(SHA_B.upper())),
    (entries_with(sha=123), "'[1].sha'", "invalid commit 123"),
    (entries_with(sha=DROP), "'[1]' (kernels-test/rotary)", "missing key 'sha'"),
    (entries_with(repo_id="rotary"), "'[1].repo_id'", "invalid repo id 'rotary'"),
    (entries_with(repo_id=["kernels-test/rotary"]), "'[1].repo_id'", "invalid repo id ['kernels-test/rotary']"),
    (entries_with(repo_id=DROP), "'[1]'", "missing key 'repo_id'"),
    (entries_with(dependencies=DROP), "'[1]' (kernels-test/rotary)", "missing key 'dependencies'"),
    (entries_with(hash=HASH_B), "'[1].hash' (kernels-test/rotary)", "unknown key 'hash'"),
    (entries_with(variants=[]), "'[1].variants'", "invalid variants []"),
    (entries_with(variants=None), "'[1].variants'", "invalid variants null"),
    (entries_with(variants={UV: HASH_B}), f"'[1].variants.{UV}'", f"invalid value {HASH_B!r}"),
    (entries_with(variants={UV: variant_with(hash="sha256-x")}), f"'[1].variants.{UV}.hash'", "'sha256-x'"),
    (entries_with(variants={UV: variant_with(hash_type="sha1")}), f"'[1].variants.{UV}.hash_type'", "'sha1'"),
    (entries_with(variants={UV: variant_with(size=3)}), f"'[1].variants.{UV}.size'", "unknown key 'size'"),
    (entries_with(**{"bad\nkey": 1}), "'[1]['bad\\nkey']'", "unknown key 'bad\\nkey'"),
    (entries_with(variants={UV: variant_with(hash_type=DROP)}), f"'[1].variants.{UV}'", "missing key 'hash_type'"),
    (entries_with(variants={"../x": variant_with()}), "'[1].variants['../x']'", "invalid variant name '../x'"),
    (entries_with(variants={"torch-" + "x" * 95: variant_with()}), "'[1].variants['torch-xxx", "at most 100 characters"),
    (entries_with(version=2), "'[1].version'", "invalid version 2"),
    (entries_with(version=None), "'[1].version'", "invalid version null"),
    (entries_with(requirement=""), "'[1].requirement'", "invalid requirement ''"),
    (entries_with(dependencies=ROTARY), "'[1].dependencies'", f"invalid dependencies {ROTARY!r}"),
    (entries_with(dependencies=["rotary"]), "'[1].dependencies[0]'", "invalid repo id 'rotary'"),
    (entries_with(dependencies=[ROTARY]), "'[1].dependencies[0]'", f"invalid dependency {ROTARY!r}"),
    (entries_with(0, dependencies=[ROTARY, ROTARY]), "'[0].dependencies[1]'", f"{ROTARY!r}"),
    (entries_with(0, dependencies=["kernels-test/x"]), "'[0].dependencies[0]'", "'kernels-test/x'"),
    ([*entries_with(), ["not", "an", "object"]], "'[2]'", "invalid value ['not', 'an', 'object']"),
    ([*entries_with(), entries_with()[1]], "'[1].repo_id' and '[2].repo_id'", f"duplicate repo_id {ROTARY!r}"),
    (entries_with(0, kernel_depends=None), "'[0].kernel_depends'", "invalid kernel_depends null"),
    (entries_with(0, kernel_depends=[">=2"]), "'[0].kernel_depends'", "invalid kernel_depends ['>=2']"),
    (entries_with(0, kernel_depends={}), "'[0].kernel_depends' (kernels-test/activation)",
     f"no requirement on the dependency {ROTARY!r}"),
    (entries_with(0, kernel_depends={ROTARY: ">=2"}), f"'[0].kernel_depends[{ROTARY!r}]'", "invalid requirements '>=2'"),
    (entries_with(0, kernel_depends={ROTARY: []}), f"'[0].kernel_depends[{ROTARY!r}]'", "invalid requirements []"),
    (entries_with(0, kernel_depends={ROTARY: ["2"], "kernels-test/x": ["1"]}), "'[0].kernel_depends['kernels-test/x']'",
     "requirement on 'kernels-test/x', which is not in dependencies"),
    (entries_with(0, kernel_depends={ROTARY: ["v2"]}), f"'[0].kernel_depends[{ROTARY!r}][0]'", "invalid requirement 'v2'"),
    (entries_with(0, kernel_depends={ROTARY: ["revision=a..b"]}), f"[{ROTARY!r}][0]'", "invalid requirement 'revision=a..b'"),
    (entries_with(0, kernel_depends={ROTARY: [2]}), f"'[0].kernel_depends[{ROTARY!r}][0]'", "invalid requirement 2"),
    (entries_with(0, kernel_depends={ROTARY: ["2", "2"]}), f"'[0].kernel_depends[{ROTARY!r}][1]'", "each requirement once"),
    ({"kernels": []}, "top level", "{'kernels': []}"),
    ("[{]", "line 1 column 3", "not valid JSON"),
    ('[{"repo_id": "a/b", "repo_id": "a/c"}]', "twice in one object", "'repo_id'"),
    ("[" * 100_000, "", "nested more than 64 deep"),
]


@pytest.mark.parametrize(("data", "where", "quoted"), MALFORMED)
def test_malformed_lock_names_file_entry_and_key(data: Any, where: str, quoted: str) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(LockfileError) as info:
        Lockfile.from_json(text, source="proj/kernels.lock")
    message = str(info.value)
    assert message.startswith("proj/kernels.lock: ")
    assert "\n" not in message
    assert where in message and quoted in message
    assert "kernels lock" in message
    assert isinstance(info.value, UsageError) and info.value.exit_code == 2


def test_message_matches_the_documented_shape() -> None:
    with pytest.raises(LockfileError) as info:
        Lockfile.from_json(json.dumps(entries_with(sha="abc")))
    expected = "kernels.lock: invalid commit 'abc' in '[1].sha' (kernels-test/rotary); expected 40"
    assert str(info.value).startswith(expected)
    assert str(info.value).endswith("; fix the entry or rerun 'kernels lock'")


def test_huge_values_are_quoted_briefly() -> None:
    with pytest.raises(LockfileError) as info:
        Lockfile.from_json(json.dumps(entries_with(sha="f" * 100_000)))
    assert len(str(info.value)) < 400


def test_entries_need_not_be_sorted_on_read() -> None:
    entries = entries_with()
    lock = Lockfile.from_json(json.dumps(entries[::-1]))
    assert lock == Lockfile.from_json(json.dumps(entries))
    assert lock.repo_ids == ("kernels-test/activation", ROTARY)


def test_each_kernel_records_what_it_requires_of_each_dependency() -> None:
    text = example_text()
    lock = Lockfile.from_json(text)
    layer_norm = lock.get("kernels-test/layer-norm")
    assert dict(layer_norm.kernel_depends) == {"kernels-test/activation": ("<2,>=1.1",)}
    assert dict(lock.get("kernels-test/rotary").kernel_depends) == {}  # no dependencies: nothing to record
    # A lock written before requirements were recorded is read as it is: not recorded, None.
    entries = json.loads(text)
    for entry in entries:
        entry.pop("kernel_depends", None)
    older = Lockfile.from_json(json.dumps(entries, indent=2) + "\n")
    assert older.get("kernels-test/layer-norm").kernel_depends is None
    assert older.get("kernels-test/rotary").kernel_depends == {}
    assert older.to_text() == json.dumps(entries, indent=2) + "\n"  # and written back as it was


@pytest.mark.parametrize(
    ("asks", "key"),
    [
        ({"kernels-test/x": ("1",)}, "kernel_depends['kernels-test/x']"),
        ({}, "kernel_depends"),
        ({ROTARY: ()}, f"kernel_depends[{ROTARY!r}]"),
        ({ROTARY: ("v1",)}, f"kernel_depends[{ROTARY!r}][0]"),
        ({ROTARY: (">=1", ">=1")}, f"kernel_depends[{ROTARY!r}][1]"),
        ([ROTARY], "kernel_depends"),
    ],
)
def test_recorded_requirements_cover_the_dependencies_exactly(asks: Any, key: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"in '{key}'")):
        kernel(dependencies=(ROTARY,), kernel_depends=asks)
    recorded = kernel(dependencies=(ROTARY,), kernel_depends={ROTARY: [">=2", "2"]}).kernel_depends
    assert dict(recorded) == {ROTARY: ("2", ">=2")}  # sorted, frozen


@pytest.mark.parametrize("value", [">=1.2,<2", "~=1.1", "1.2.0", 1, 0, {"revision": "v2"}, {"revision": SHA_A}])
def test_a_recorded_requirement_text_reads_back_as_the_requirement(value: Any) -> None:
    from kernel_deps.core.spec import requirement_from_value

    requirement = requirement_from_value(ROTARY, value)
    assert requirement_from_text(ROTARY, requirement.text) == requirement


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=24,
)
shas = st.binary(min_size=20, max_size=20).map(bytes.hex)
repo_ids = st.sampled_from(["kernels-test/a", "kernels-test/b", "kernels-test/c", "org/name.x", "o_1/n-2"])
variant_names = st.sampled_from([UNIVERSAL_VARIANT, CPU_VARIANT, CUDA_VARIANT, STABLE_ABI_VARIANT])
variant_hashes = st.binary(min_size=32, max_size=32).map(lambda b: "sha256-" + b.hex())
variant_maps = st.dictionaries(variant_names, variant_hashes, min_size=1)
variant_json = st.fixed_dictionaries({"hash": variant_hashes, "hash_type": st.just("git_lfs_concat")})
VALID_PARTS = {
    "repo_id": repo_ids,
    "sha": shas,
    "variants": st.dictionaries(variant_names, variant_json, min_size=1),
    "version": st.sampled_from(["v1.2.0", "v1", "main"]),
    "requirement": st.sampled_from([">=1.2,<2", "~=1.1", "1"]),
    "dependencies": st.lists(repo_ids, max_size=2, unique=True),
    "kernel_depends": st.dictionaries(
        repo_ids, st.lists(st.sampled_from(["1", ">=1.2,<2", "revision=main"]), min_size=1, unique=True), max_size=2
    ),
}


@st.composite
def near_valid_entries(draw: st.DrawFn) -> dict[str, Any]:
    """An entry whose keys are each valid, junk or absent, plus an unknown key now and then."""
    entry: dict[str, Any] = {}
    for key, valid in VALID_PARTS.items():
        kind = draw(st.sampled_from(["valid", "valid", "valid", "junk", "absent"]))
        if kind != "absent":
            entry[key] = draw(valid if kind == "valid" else json_values)
    if draw(st.booleans()) and draw(st.booleans()):
        entry[draw(st.text(max_size=6))] = draw(json_values)
    return entry


def parses_or_raises_lockfile_error(text: str) -> None:
    """The property: any text either parses or raises LockfileError, for the model and the reader's every purpose."""
    readers = [lambda t, purpose=purpose: parse_lock(t, source="kernels.lock", purpose=purpose) for purpose in PURPOSES]
    for read in (Lockfile.from_json, *readers):
        try:
            read(text)
        except LockfileError as exc:
            assert "\n" not in str(exc)


@given(st.text())
def test_any_text_parses_or_raises_lockfile_error(text: str) -> None:
    parses_or_raises_lockfile_error(text)


@given(json_values)
def test_any_json_value_parses_or_raises_lockfile_error(value: Any) -> None:
    parses_or_raises_lockfile_error(json.dumps(value))
    parses_or_raises_lockfile_error(json.dumps([value]))


@settings(max_examples=300)
@given(st.lists(near_valid_entries(), max_size=4))
def test_near_valid_locks_parse_or_raise_lockfile_error(entries: list[dict[str, Any]]) -> None:
    parses_or_raises_lockfile_error(json.dumps(entries))


requirement_texts = st.lists(st.sampled_from(["1", ">=1.2,<2", "revision=main", "==2.0.0"]), min_size=1, unique=True)


@st.composite
def valid_locks(draw: st.DrawFn) -> Lockfile:
    ids = draw(st.lists(repo_ids, unique=True, max_size=4))
    kernels = []
    for repo_id in ids:
        others = [other for other in ids if other != repo_id]
        kernels.append(
            LockedKernel(
                repo_id=repo_id,
                sha=draw(shas),
                variants={n: VariantLock(hash=h) for n, h in draw(variant_maps).items()},
                version=draw(st.none() | VALID_PARTS["version"]),
                requirement=draw(st.none() | st.text(min_size=1).filter(str.strip)),
                dependencies=(deps := tuple(draw(st.lists(st.sampled_from(others), unique=True))) if others else ()),
                kernel_depends=draw(st.none() | st.fixed_dictionaries({dep: requirement_texts for dep in deps})),
            )
        )
    return Lockfile(kernels=tuple(kernels))


@given(valid_locks())
def test_valid_locks_round_trip(lock: Lockfile) -> None:
    text = lock.to_text()
    assert Lockfile.from_json(text) == lock
    assert Lockfile.from_json(text).to_text() == text
    found = parse_lock(text, source="kernels.lock", purpose="lock")
    assert found.format == "kernel-deps" and found.lock == lock
    assert {repo_id: pin.commit for repo_id, pin in found.pins.items()} == {k.repo_id: k.sha for k in lock.kernels}


# --- writing files -------------------------------------------------------------------


def test_write_lockfile_writes_once_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    lock = Lockfile.from_json(example_text())
    assert write_lockfile(path, lock) is True
    assert path.read_text(encoding="utf-8") == example_text()
    before = path.stat()
    assert write_lockfile(path, lock) is False
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert write_lockfile(path, Lockfile(kernels=(kernel(),))) is True
    assert read_lock(path, purpose="use").lock == Lockfile(kernels=(kernel(),))
    assert os.listdir(tmp_path) == ["kernels.lock"]


def test_write_lockfile_creates_with_umask_and_keeps_an_existing_mode(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    umask = os.umask(0)
    os.umask(umask)
    write_lockfile(path, Lockfile(kernels=()))
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    path.chmod(0o640)
    write_lockfile(path, Lockfile(kernels=(kernel(),)))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_write_keeps_the_old_lock_and_no_temp(tmp_path: Path, monkeypatch, failing: str) -> None:
    path = tmp_path / "kernels.lock"
    path.write_text(example_text(), encoding="utf-8")

    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(FileWriteError, match=r"kernels\.lock: cannot write \(No space left on device\)"):
        write_lockfile(path, Lockfile(kernels=(kernel(),)))
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == example_text()
    assert os.listdir(tmp_path) == ["kernels.lock"]


def test_write_into_a_missing_folder_is_a_write_error(tmp_path: Path) -> None:
    with pytest.raises(FileWriteError, match="cannot write"):
        write_lockfile(tmp_path / "absent" / "kernels.lock", Lockfile(kernels=()))


# --- diff --------------------------------------------------------------------------------


def changed(old, new) -> list[str]:
    """The lines kernels lock prints for diff_locks' records."""
    return [change_line(change) for change in diff_locks(old, new)]


def test_diff_of_equal_locks_is_empty() -> None:
    lock = Lockfile.from_json(example_text())
    assert changed(lock, Lockfile.from_json(example_text())) == []


def test_diff_from_nothing_adds_everything() -> None:
    lock = Lockfile(kernels=(kernel(), kernel(ROTARY, sha=SHA_B, version="v2.0.0", requirement=None)))
    assert changed(None, lock) == [
        "+ kernels-test/activation v1.1.0 (d08b90c89de2)",
        "+ kernels-test/rotary v2.0.0 (f7b77ea076aa)",
    ]


def test_diff_names_every_kind_of_change() -> None:
    old = Lockfile(kernels=(kernel(dependencies=(ROTARY,)), kernel(ROTARY), kernel("kernels-test/x", version=None)))
    new_variants = {CPU_VARIANT: VariantLock(hash=HASH_B)}
    new = Lockfile(
        kernels=(
            kernel(sha=SHA_B, version="v1.2.0", requirement=">=1.2", variants=new_variants),
            kernel(ROTARY, variants={UNIVERSAL_VARIANT: VariantLock(hash=HASH_B)}, dependencies=("kernels-test/y",)),
            kernel("kernels-test/y", requirement=None),
        )
    )
    assert changed(old, new) == [
        "~ kernels-test/activation v1.1.0 (d08b90c89de2) -> v1.2.0 (f7b77ea076aa)",
        f"~ kernels-test/activation: variant {UNIVERSAL_VARIANT} removed",
        f"~ kernels-test/activation: variant {CPU_VARIANT} added",
        "~ kernels-test/activation: requirement '>=1.1' -> '>=1.2'",
        "~ kernels-test/activation: no longer depends on kernels-test/rotary",
        f"~ kernels-test/rotary: variant {UNIVERSAL_VARIANT} hash changed",
        "~ kernels-test/rotary: now depends on kernels-test/y",
        "- kernels-test/x (d08b90c89de2)",
        "+ kernels-test/y v1.1.0 (d08b90c89de2)",
    ]


def test_diff_of_a_new_commit_does_not_list_expected_hash_changes() -> None:
    old = Lockfile(kernels=(kernel(),))
    new = Lockfile(kernels=(kernel(sha=SHA_B, variants={UNIVERSAL_VARIANT: VariantLock(hash=HASH_B)}),))
    assert changed(old, new) == ["~ kernels-test/activation v1.1.0 (d08b90c89de2) -> v1.1.0 (f7b77ea076aa)"]


def test_diff_names_what_a_kernel_records_that_it_requires() -> None:
    parent = kernel(dependencies=(ROTARY,), kernel_depends={ROTARY: [">=1"]})
    old = Lockfile(kernels=(parent, kernel(ROTARY)))
    new = Lockfile(kernels=(dataclasses.replace(parent, kernel_depends={ROTARY: [">=1.1", "1"]}), kernel(ROTARY)))
    assert changed(old, new) == [f"~ kernels-test/activation: requires {ROTARY} '>=1' -> '1' and '>=1.1'"]
    older = Lockfile(kernels=(dataclasses.replace(parent, kernel_depends=None), kernel(ROTARY)))
    recorded = f"~ kernels-test/activation: records that it requires {ROTARY} '>=1' (its kernel-depends)"
    assert changed(older, old) == [recorded]
    assert changed(old, older) == []  # reading an older lock never asks for less


def test_diff_of_requirement_becoming_transitive() -> None:
    old = Lockfile(kernels=(kernel(),))
    new = Lockfile(kernels=(kernel(requirement=None),))
    assert changed(old, new) == ["~ kernels-test/activation: requirement '>=1.1' -> (none, transitive)"]


# --- compatibility with the Hugging Face kernels library 0.16 ------------------------------

KERNELS_016 = Path(sys.prefix) / "compat" / "kernels-0.16"


@pytest.fixture
def kernels_016() -> Path:
    """Where kernels 0.16 is installed; fails (never skips) when it is not there."""
    if not (KERNELS_016 / "kernels" / "lockfile.py").is_file():
        pytest.fail(
            f"kernels 0.16 is not installed in {KERNELS_016}: run 'make' (its .venv recipe installs it; "
            "in an existing .venv, delete .venv/.installed first), then run the tests again",
            pytrace=False,
        )
    return KERNELS_016


needs_kernels_016 = pytest.mark.usefixtures("kernels_016")

COMPAT_REPO = KernelRepo(
    "kernels-test/compat-hash",
    (
        Release(
            "1.0.0",
            variants=(CUDA_VARIANT, CPU_VARIANT, STABLE_ABI_VARIANT, UNIVERSAL_VARIANT),
            lfs_size=3 * 1024 * 1024 + 5,
            extra_files=(
                ("layers.py", b"# sorts before layers/ ('.' < '/')\n"),
                ("deep/nested/folder/data.txt", b"nested\n"),
                ("deep/empty.txt", b""),
                ("layers/__pycache__/describe.cpython-311.pyc", b"\xa7\r\r\nstale"),
                ("stray.pyc", b"\xa7\r\r\nstray"),
                ("Z_upper.py", b"# upper case sorts before lower case\n"),
            ),
        ),
    ),
)


def run_kernels_016(code: str, **env: str) -> Any:
    """Run ``code`` with kernels 0.16 importable; returns the JSON it prints last."""
    full_env = {**os.environ, "PYTHONPATH": str(KERNELS_016), **env}
    prelude = "import importlib.metadata as m; assert m.version('kernels') == '0.16.0', m.version('kernels')\n"
    result = subprocess.run(
        [sys.executable, "-c", prelude + code], env=full_env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def builder_variant_hashes(built: BuiltRepo, release: str) -> dict[str, str]:
    """Our variant_hash over the builder's files: git blob id of what is committed, LFS SHA-256."""
    by_variant: dict[str, list[tuple[str, str]]] = {}
    for path, content in built.files[release].items():
        _, variant, rel = path.split("/", 2)
        by_variant.setdefault(variant, []).append((rel, content.lfs_sha256 or git_blob_id(content.committed)))
    return {variant: variant_hash(entries) for variant, entries in by_variant.items()}


@needs_kernels_016
def test_variant_hash_equals_kernels_016_get_kernel_locks(hub_env) -> None:
    built = hub_env.add_repo(COMPAT_REPO)
    code = (
        "import dataclasses, json\n"
        "from kernels.lockfile import get_kernel_locks\n"
        f"print(json.dumps(dataclasses.asdict(get_kernel_locks({COMPAT_REPO.repo_id!r}, 1))))\n"
    )
    # kernels 0.16 with telemetry off sends a User-Agent ending in '; ', which the
    # huggingface_hub 2.x HTTP client refuses; on, it only adds fields to that header.
    theirs = run_kernels_016(code, HF_HUB_DISABLE_TELEMETRY="0")
    ours = builder_variant_hashes(built, "1.0.0")
    assert theirs["repo_id"] == COMPAT_REPO.repo_id
    assert theirs["sha"] == built.commits["1.0.0"]
    assert set(theirs["variants"]) == set(ours) == set(COMPAT_REPO.releases[0].variants)
    for variant, lock in theirs["variants"].items():
        assert lock == {"hash": ours[variant], "hash_type": "git_lfs_concat"}, variant


def snapshot_like_the_hf_cache(root: Path, built: BuiltRepo, release: str) -> Path:
    """A huggingface_hub cache snapshot of ``release``: symlinks into blobs named by content hash."""
    blobs = root / "blobs"
    snapshot = root / "snapshots" / built.commits[release]
    blobs.mkdir(parents=True)
    for path, content in built.files[release].items():
        target = snapshot / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not is_hashed_path(path):  # bytecode is written by Python beside the links, never downloaded
            target.write_bytes(content.data)
            continue
        blob = blobs / (content.lfs_sha256 or git_blob_id(content.data))
        blob.write_bytes(content.data)
        target.symlink_to(blob)
    return snapshot


@needs_kernels_016
def test_offline_hash_equals_kernels_016_validate_kernel(tmp_path: Path) -> None:
    built = build_repo(tmp_path / "mirrors", COMPAT_REPO)
    snapshot = snapshot_like_the_hf_cache(tmp_path / "cache", built, "1.0.0")
    expected = builder_variant_hashes(built, "1.0.0")
    for variant, hash_ in expected.items():
        # Recomputed from file contents, as kernels verify does: the blob name says LFS or not.
        entries = []
        for file in (snapshot / "build" / variant).rglob("*"):
            rel = file.relative_to(snapshot / "build" / variant).as_posix()
            if file.is_symlink():
                lfs = len(file.resolve().name) == 64
                entries.append((rel, sha256_of_file(file) if lfs else git_blob_id_of_file(file)))
        assert variant_hash(entries) == hash_
    code = (
        "import json, pathlib\n"
        "from kernels.utils import validate_kernel\n"
        f"repo, locks = pathlib.Path({str(snapshot)!r}), {json.dumps(expected)}\n"
        "for variant, hash_ in locks.items():\n"
        "    validate_kernel(repo_path=repo, variant=variant, hash=hash_)\n"
        "try:\n"
        f"    validate_kernel(repo_path=repo, variant={CPU_VARIANT!r}, hash='sha256-' + '0' * 64)\n"
        "    wrong = 'accepted'\n"
        "except ValueError:\n"
        "    wrong = 'rejected'\n"
        "print(json.dumps({'validated': sorted(locks), 'wrong': wrong}))\n"
    )
    assert run_kernels_016(code) == {"validated": sorted(expected), "wrong": "rejected"}


@needs_kernels_016
def test_kernels_016_reads_a_lock_we_write(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    example = Lockfile.from_json(example_text())
    # Each entry records why its publisher is trusted, a key kernels 0.16 ignores too.
    entries = [
        dataclasses.replace(k, trusted_by="hub" if i % 2 else "pyproject:" + k.repo_id.partition("/")[0])
        for i, k in enumerate(example.kernels)
    ]
    lock = Lockfile(kernels=tuple(entries))
    assert write_lockfile(path, lock)
    code = (
        "import dataclasses, json\n"
        "from kernels.lockfile import KernelLock\n"
        "from kernels.utils import _get_locked_kernel\n"
        f"text = open({str(path)!r}).read()\n"
        "locks = [dataclasses.asdict(KernelLock.from_json(entry)) for entry in json.load(open("
        f"{str(path)!r}))]\n"
        "shas = {lock['repo_id']: _get_locked_kernel(lock['repo_id'], text) for lock in locks}\n"
        "print(json.dumps({'locks': locks, 'shas': shas}))\n"
    )
    assert '"kernel_depends"' in path.read_text() and '"trusted_by": "hub"' in path.read_text()  # 0.16 ignores both
    theirs = run_kernels_016(code)
    assert theirs["locks"] == [
        {
            "repo_id": k.repo_id,
            "sha": k.sha,
            "variants": {name: {"hash": v.hash, "hash_type": v.hash_type} for name, v in k.variants.items()},
        }
        for k in lock.kernels
    ]
    assert theirs["shas"] == {k.repo_id: k.sha for k in lock.kernels}

