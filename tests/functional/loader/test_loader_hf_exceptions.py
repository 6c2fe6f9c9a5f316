"""Each loader failure is the built-in exception type the Hugging Face ``kernels`` library raises there.

Code written for kernels 0.17 catches ``ValueError`` (a kernel not locked, no lock, no
version asked for, a version that does not exist, an untrusted publisher) and
``FileNotFoundError`` (a locked build not cached, no build for this machine). Each situation
is run through both libraries, on the same local Hub and cache: kernels 0.17.2 in a process
of its own (its release from ``.venv/compat``), kernel-deps in this one. The built-in type
kernels raises is asserted, then that kernel-deps' error is an instance of it and of
``KernelDepsError``, so "change the import" keeps every ``except`` working.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kernel_deps
from kernel_deps.core.errors import KernelDepsError
from tests.fixtures.builder import METAL_VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.hf_beside import hf_repo, run_hf, run_hf_code, trusting
from tests.fixtures.projects import write_project

LOCKED = "kernels-test/hf-exceptions"
METAL_ONLY = "kernels-test/hf-exceptions-metal"
UNTRUSTED = "elsewhere-org/hf-exceptions"

# Each situation: the call and its arguments, the same for both libraries ("{lock}": the lock
# each tool wrote for the project), and the built-in type kernels 0.17.2 raises.
SITUATIONS = {
    "not-locked": ("load_kernel", ["kernels-test/never-locked"], {"lockfile": "{lock}"}, ValueError),
    "no-lock": ("get_locked_kernel", [LOCKED], {"lockfile": None}, ValueError),
    "no-version": ("get_kernel", [LOCKED], {"trust_remote_code": True}, ValueError),
    "unknown-version": ("get_kernel", [LOCKED], {"version": 99, "trust_remote_code": True}, ValueError),
    "untrusted-publisher": ("get_kernel", [UNTRUSTED], {"version": 1}, ValueError),
    "not-cached": ("load_kernel", [LOCKED], {"lockfile": "{lock}"}, FileNotFoundError),
    "no-matching-variant": ("get_kernel", [METAL_ONLY], {"version": 1, "trust_remote_code": True}, FileNotFoundError),
}

# argv[1]: JSON {situation: [function, args, kwargs]}; prints each one's exception: its type, and the
# first built-in type among its bases (None when the call returned).
WITH_017 = """
import json, sys
import kernels
found = {}
for name, (function, args, kwargs) in json.loads(sys.argv[1]).items():
    try:
        getattr(kernels, function)(*args, **kwargs)
    except Exception as exc:
        builtin = next(c for c in type(exc).__mro__ if c.__module__ == "builtins")
        found[name] = [type(exc).__name__, builtin.__name__, str(exc)[:300]]
    else:
        found[name] = None
print(json.dumps(found))
"""


@pytest.fixture
def world(hub_env, proxy, tmp_path, monkeypatch) -> dict[str, Path]:
    """The local Hub behind the proxy (publishers answered), a project locked by each tool, an empty cache."""
    for repo_id, variants in ((LOCKED, None), (METAL_ONLY, (METAL_VARIANT,)), (UNTRUSTED, None)):
        if repo_id not in hub_env.repos:
            hub_env.add_repo(hf_repo(repo_id, variants) if variants else hf_repo(repo_id))
    trusting(proxy, "kernels-test", untrusted=["elsewhere-org"])
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    project = write_project(tmp_path / "app", f'"{LOCKED}" = 1\n')
    theirs = run_hf(proxy, "lock", str(project))
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    hf_lock = tmp_path / "hf.lock"
    hf_lock.write_bytes((project / "kernels.lock").read_bytes())
    assert run_kernels("lock", str(project)).returncode == 0  # converts it, keeping its pin
    # Nothing cached: kernels 0.17's lock cached each variant's metadata.json, which neither library loads from.
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    monkeypatch.chdir(nowhere)  # no pyproject.toml around: no lock to find
    return {"hf": hf_lock, "ours": project / "kernels.lock", "cwd": nowhere}


def _calls(lock: Path) -> dict[str, list]:
    return {
        name: [function, args, {k: (str(lock) if v == "{lock}" else v) for k, v in kwargs.items()}]
        for name, (function, args, kwargs, _) in SITUATIONS.items()
    }


def test_each_loader_failure_is_the_builtin_type_hugging_face_kernels_raises(world, proxy) -> None:
    theirs = run_hf_code(proxy, WITH_017, json.dumps(_calls(world["hf"])), cwd=world["cwd"], HF_HUB_OFFLINE="0")
    for name, (*_, builtin) in SITUATIONS.items():
        assert theirs[name] is not None and theirs[name][1] == builtin.__name__, (name, theirs[name])
    differ = {}
    for name, (function, args, kwargs) in _calls(world["ours"]).items():
        builtin = SITUATIONS[name][3]
        with pytest.raises(KernelDepsError) as caught:
            getattr(kernel_deps, function)(*args, **kwargs)
        if not isinstance(caught.value, builtin):
            differ[name] = (type(caught.value).__name__, str(caught.value))
    assert differ == {}, "\n".join(f"{k}: {v}" for k, v in differ.items())  # every situation at once
