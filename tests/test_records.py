"""core.records: the read-only records that stand in for frozen dataclasses at start-up
behave as those dataclasses did, and a record whose fields are written inconsistently is
refused when its class is made."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from kernel_deps.core.records import Record
from kernel_deps.core.versions import GitRef
from kernel_deps.lock.model import LockedKernel, VariantLock

SHA = "a" * 40


def test_a_record_compares_hashes_prints_and_pickles_as_a_frozen_dataclass_would() -> None:
    ref = GitRef("v1", "branch", SHA)
    assert ref == GitRef("v1", "branch", SHA) and ref != GitRef("v2", "branch", SHA)
    assert len({ref, GitRef("v1", "branch", SHA)}) == 1
    assert repr(ref) == f"GitRef(name='v1', kind='branch', commit='{SHA}')"
    assert pickle.loads(pickle.dumps(ref)) == ref and copy.deepcopy(ref) == ref
    with pytest.raises(AttributeError):
        ref.name = "v2"  # type: ignore[misc]


def test_a_replaceable_record_is_copied_by_dataclasses_replace_and_stays_frozen() -> None:
    variants = {"torch-universal": VariantLock(hash="sha256-" + "0" * 64)}
    kernel = LockedKernel(repo_id="kernels-test/rotary", sha=SHA, variants=variants)
    moved = dataclasses.replace(kernel, version="v1.0.0")
    assert (moved.version, moved.sha, kernel.version) == ("v1.0.0", SHA, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        moved.sha = "b" * 40  # type: ignore[misc]


def test_a_record_whose_annotations_are_not_its_slots_is_refused_when_made() -> None:
    with pytest.raises(TypeError, match="Swapped: its annotations must name its first __slots__, in order"):

        class Swapped(Record):
            __slots__ = ("a", "b")
            b: int
            a: int

    class Computed(Record):  # a field computed by __init__ may follow the annotated ones
        __slots__ = ("a", "twice")
        a: int

        def __init__(self, a: int) -> None:
            self._init(a, 2 * a)

    assert Computed(2).twice == 4
