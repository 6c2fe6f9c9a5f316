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


def test_a_replaceable_records_fields_are_registered_when_dataclasses_first_asks() -> None:
    # Declared without importing dataclasses; its functions all see a frozen-field dataclass.
    from kernel_deps.core.records import replaceable

    @replaceable
    class Pair(Record):
        __slots__ = ("left", "right", "total")
        left: int
        right: int

        def __init__(self, left: int, right: int) -> None:
            self._init(left, right, left + right)

    assert type(Pair.__dict__["__dataclass_fields__"]).__name__ == "_Fields"
    assert Pair.__match_args__ == ("left", "right")
    pair = Pair(1, 2)
    assert dataclasses.is_dataclass(pair) and [f.name for f in dataclasses.fields(Pair)] == ["left", "right"]
    assert isinstance(Pair.__dict__["__dataclass_fields__"], dict)  # registered once, in its place
    assert dataclasses.replace(pair, right=5).total == 6 and dataclasses.asdict(pair) == {"left": 1, "right": 2}
    match pair:
        case Pair(1, right):
            assert right == 2
        case _:
            raise AssertionError("a positional pattern matches the fields in order")


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


def _former_dataclasses() -> list[tuple[object, str]]:
    """One of each record of the lower layers that was a frozen dataclass, and its repr then."""
    from pathlib import Path

    from kernel_deps.cache.subset import SubsetReport, WantedVariant
    from kernel_deps.hub.client import CommitListing
    from kernel_deps.hub.listing import TreeFile
    from kernel_deps.hub.refs import RepoRefs
    from kernel_deps.trust.publishers import PublisherTrust
    from kernel_deps.hub.index import VariantTree
    from kernel_deps.hub.redirects import Redirect
    from kernel_deps.hub.transport import RequestSubject
    from kernel_deps.lock.entries import LockedPin
    from kernel_deps.resolve.candidates import Candidate
    from kernel_deps.resolve.explain import Requester
    from kernel_deps.trust.bundles import CertifiedSigner
    from kernel_deps.trust.publishers import Untrusted

    ref = GitRef("v1", "branch", SHA)
    file = TreeFile(path="build/x/a.py", size=3, blob_id=SHA, lfs_sha256=None)
    return [
        (Candidate("org/k", SHA, (ref,)), f"Candidate(repo_id='org/k', commit='{SHA}', refs=({ref!r},))"),
        (Requester("project", "relax", "narrow"), "Requester(name='project', relax='relax', narrow='narrow')"),
        (LockedPin(SHA, "v1"), f"LockedPin(commit='{SHA}', version='v1')"),
        (Redirect("org/old", "org/new"), "Redirect(source='org/old', destination='org/new', revision='main', commit='')"),
        (file, f"TreeFile(path='build/x/a.py', size=3, blob_id='{SHA}', lfs_sha256=None)"),
        (RepoRefs("org/k", "kernel", (ref,)), f"RepoRefs(repo_id='org/k', repo_type='kernel', refs=({ref!r},))"),
        (CommitListing((file,), frozenset({"build"})), f"CommitListing(build_files=({file!r},), top_level=frozenset({{'build'}}))"),
        (PublisherTrust("org", True, "trusted", "hub"), "PublisherTrust(org='org', trusted=True, kind='trusted', endpoint='hub', detail=None)"),
        (RequestSubject("org/k"), "RequestSubject(repo_id='org/k', revision=None, what=None)"),
        (WantedVariant("org/k", SHA, "x", "h"), f"WantedVariant(repo_id='org/k', commit='{SHA}', variant='x', hash='h')"),
        (SubsetReport(Path("/f"), (), ()), "SubsetReport(folder=PosixPath('/f'), placed=(), removed=())"),
        (CertifiedSigner("i", "s", None, None, None),
         "CertifiedSigner(issuer='i', identity='s', repository=None, workflow=None, ref=None)"),
        (Untrusted("org/k", ("pyproject.toml",), "no"), "Untrusted(repo_id='org/k', asked_by=('pyproject.toml',), hub_answer='no')"),
        (VariantTree({}, ("odd",)), "VariantTree(files={}, skipped=('odd',))"),
    ]


@pytest.mark.parametrize("record, shown", _former_dataclasses(), ids=lambda r: type(r).__name__)
def test_a_former_dataclass_compares_prints_pickles_and_stays_frozen_as_before(record: object, shown: str) -> None:
    assert isinstance(record, Record) and repr(record) == shown
    again = pickle.loads(pickle.dumps(record))
    assert again == record and copy.deepcopy(record) == record and again is not record
    if type(record).__name__ != "VariantTree":  # a tree holds a dict: unhashable, as it was
        assert hash(again) == hash(record)
    with pytest.raises(AttributeError):  # slots, no __dict__, as with slots=True
        object.__getattribute__(record, "__dict__")
    with pytest.raises(AttributeError):
        setattr(record, type(record).__slots__[0], None)
