"""What scripts and CI read: --json against docs/schemas/, -q/--quiet, terminals and NO_COLOR.

Every command runs against the local Hub and its JSON is validated against the schema
file the docs publish. The JSON and -q checks run the command in-process
(tests/fixtures/cli.py); what depends on the output being a terminal or a pipe (the
progress bar, colour) runs it as a real process, on a pseudo-terminal or piped.
"""

from __future__ import annotations

import json
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import click
import pytest
from jsonschema import Draft202012Validator

from kernel_deps.cache import store as cache
from kernel_deps.cli import main as cli_main
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import SCHEMAS, load_schema, validated
from tests.fixtures.processes import KERNELS

DEPS = '"kernels-test/layer-norm" = ">=0.2"\n"kernels-test/flash" = 1'


def kernels(*args: str, **env: str) -> CliResult:
    return run_kernels(*args, env={"NO_COLOR": None, "HF_HUB_OFFLINE": None, **env})


def piped(*args: str, **env: str) -> subprocess.CompletedProcess:
    """A real process with its output piped: whether to colour or draw a bar is decided there."""
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "HF_HUB_OFFLINE")}
    return subprocess.run([KERNELS, *args], capture_output=True, text=True, env={**full, **env}, timeout=300)


def on_terminal(*args: str, stdout_piped: bool = False, **env: str) -> tuple[int, str] | tuple[int, str, str]:
    """Run with stderr (and stdout, unless ``stdout_piped``) on a pseudo-terminal, as in an
    interactive shell; returns the status, what the terminal showed, and the piped stdout."""
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "HF_HUB_OFFLINE")}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a real terminal has a size
    process = subprocess.Popen([KERNELS, *args], stdin=subprocess.DEVNULL, stderr=slave,
                               stdout=subprocess.PIPE if stdout_piped else slave,
                               env={**full, "TERM": "xterm", **env})  # fmt: skip
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    shown = b"".join(chunks).decode()
    if stdout_piped:
        return process.wait(timeout=300), shown, process.stdout.read().decode()
    return process.wait(timeout=300), shown


def json_commands() -> list[str]:
    return sorted(name for name, command in cli_main.commands.items() if any(p.name == "as_json" for p in command.params))


@pytest.fixture
def project(hub_env, tmp_path):
    return write_project(tmp_path / "app", DEPS, locked=True)


# -- the schemas themselves --------------------------------------------------------------


def test_every_command_that_reports_has_a_json_option_and_a_valid_schema() -> None:
    # add and remove print lock's summary; every other --json command has its own file.
    assert {"versions", "lock", "add", "remove", "download", "verify", "outdated"} <= set(json_commands())
    for name in json_commands():
        schema_name = "lock" if name in ("add", "remove") else name
        assert (SCHEMAS / f"{schema_name}.schema.json").is_file(), f"kernels {name} --json has no schema under docs/schemas/"
        Draft202012Validator.check_schema(load_schema(schema_name))
    Draft202012Validator.check_schema(load_schema("error"))


def test_every_schema_is_documented() -> None:
    docs = (SCHEMAS.parent / "ci.md").read_text()
    for path in SCHEMAS.glob("*.schema.json"):
        assert f"schemas/{path.name}" in docs, f"docs/ci.md does not point at {path.name}"


# -- real output, validated --------------------------------------------------------------


def test_lock_download_verify_outdated_json_match_their_schemas(hub_env, project) -> None:
    lock = read_lock(project / "kernels.lock", purpose="use").lock

    locked = validated(kernels("lock", "--json", str(project)), "lock")
    assert locked["up_to_date"] is True and locked["written"] is False and locked["ok"] is True
    assert [k["repo_id"] for k in locked["kernels"]] == [k.repo_id for k in lock.kernels]
    checked = kernels("lock", "--check", "--json", str(project))
    assert checked.returncode == 0 and validated(checked, "lock")["up_to_date"] is True

    first = kernels("download", "--json", str(project))
    assert first.returncode == 0, first.stderr
    fetched = validated(first, "download")
    assert first.stderr == ""  # no progress lines beside the JSON off a terminal
    assert fetched["downloaded"] == len(lock.kernels) and fetched["already_cached"] == 0 and fetched["ok"] is True
    assert [(v["repo_id"], v["commit"], v["variant"], v["state"]) for v in fetched["variants"]] == [
        (k.repo_id, k.sha, CPU_VARIANT, "downloaded") for k in lock.kernels
    ]
    assert fetched["files"] == sum(v["files"] for v in fetched["variants"]) > 0
    assert fetched["bytes"] == sum(v["bytes"] for v in fetched["variants"]) > 0
    assert Path(fetched["cache"]) == cache.cache_root()
    again = validated(kernels("download", "--json", str(project)), "download")
    assert {v["state"] for v in again["variants"]} == {"cached"} and again["files"] == again["bytes"] == 0

    good = validated(kernels("verify", "--json", "--require-cached", str(project)), "verify")
    assert good["ok"] is True and len(good["verified"]) == len(lock.kernels)

    layer_norm = lock.get("kernels-test/layer-norm")
    folder = cache.variant_dir(cache.find_repo_dir(layer_norm.repo_id), layer_norm.sha, CPU_VARIANT)
    (folder / "metadata.json").unlink()
    bad = kernels("verify", "--json", str(project))
    assert bad.returncode == 1
    report = validated(bad, "verify")
    assert report["ok"] is False
    assert [(p["kind"], p["repo_id"], p["path"]) for p in report["problems"]] == [
        ("missing", layer_norm.repo_id, "metadata.json")
    ]

    drift = kernels("outdated", "--json", str(project))
    assert drift.returncode == 0, drift.stderr
    drifted = validated(drift, "outdated")
    assert [k["repo_id"] for k in drifted["kernels"]] == [k.repo_id for k in lock.kernels]
    assert drifted["ok"] is (not drifted["drifted"]) is False  # flash = 1 is locked; v2 is out

    listed = validated(kernels("versions", "kernels-test/flash", "--json"), "versions")
    assert [v["name"] for v in listed["versions"]] == ["v2", "v1"] and listed["ok"] is True


def test_versions_json_of_a_repo_without_versions_is_not_ok(hub_env) -> None:
    repo_id = "kernels-test/json-untagged"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), tagged=False),)))
    built.git("branch", "-D", "v1")  # only main is left: no ref names a version
    result = kernels("versions", repo_id, "--json")
    assert result.returncode == 0, result.stderr
    listed = validated(result, "versions")
    assert (listed["ok"], listed["versions"]) == (False, [])


def test_tree_json_matches_its_schema(hub_env, project) -> None:
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text + '\n[tool.kernels]\ntargets = ["torch213-cxx11-cu128-x86_64-linux"]\n')
    shown = kernels("tree", "--json", str(project))
    assert shown.returncode == 0, shown.stderr
    tree = validated(shown, "tree")
    assert sorted(node["repo_id"] for node in tree["kernels"]) == ["kernels-test/flash", "kernels-test/layer-norm"]

    def every(nodes: list[dict]) -> set[str]:
        return {n["repo_id"] for n in nodes} | {r for n in nodes for r in every(n["dependencies"])}

    assert every(tree["kernels"]) == {k.repo_id for k in lock.kernels}  # dependencies nested below
    assert [t["name"] for t in tree["targets"]] == ["torch213-cxx11-cu128-x86_64-linux"]
    assert set(tree["this_machine"]["variants"]) == {k.repo_id for k in lock.kernels}
    missing = kernels("tree", "--json", str(project / "nowhere"))
    assert missing.returncode != 0 and validated(missing, "error")["ok"] is False


def test_add_and_remove_json_is_the_lock_summary(hub_env, project) -> None:
    added = kernels("add", "kernels-test/rotary>=1,<2", str(project), "--json")
    assert added.returncode == 0, added.stderr
    summary = validated(added, "lock")
    assert summary["written"] is True and summary["ok"] is True and any(
        (c["action"], c["repo_id"], c["from"]) == ("added", "kernels-test/rotary", None) for c in summary["changes"]
    )
    removed = validated(kernels("remove", "kernels-test/rotary", str(project), "--json"), "lock")
    assert "kernels-test/rotary" not in [k["repo_id"] for k in removed["kernels"]]


def test_lock_json_tells_changes_and_notes_as_records(hub_env, tmp_path) -> None:
    held, odd_repo = "kernels-test/records-held", "kernels-test/records-odd-folder"
    odd = "torch213-cxx11-hpu10-x86_64-linux"
    files = (("__init__.py", b"", False), ("metadata.json", b"{}\n", False))
    # v1.1.0 has no CPU build: a CPU target holds the kernel at v1.0.0.
    built = hub_env.add_repo(KernelRepo(held, (Release("1.0.0"), Release("1.1.0", variants=(CUDA_VARIANT,)))))
    odd_built = hub_env.add_repo(
        KernelRepo(odd_repo, (Release("1.0.0", variants=(CPU_VARIANT,), custom_variants=((odd, files),)),))
    )
    deps = f'"{held}" = ">=1,<2"\n"{odd_repo}" = ">=1"'
    project = write_project(tmp_path / "app", deps, extra=f'[tool.kernels]\ntargets = ["{CPU_VARIANT}"]\n\n')

    first = validated(kernels("lock", "--json", str(project)), "lock")

    commit, odd_commit = built.commits["1.0.0"], odd_built.commits["1.0.0"]
    assert first["changes"] == [
        {"action": "added", "repo_id": held, "from": None, "to": {"version": "v1.0.0", "commit": commit}},
        {"action": "added", "repo_id": odd_repo, "from": None, "to": {"version": "v1.0.0", "commit": odd_commit}},
    ]
    assert first["notes"] == [
        {
            "kind": "held-back", "repo_id": held, "locked": {"version": "v1.0.0", "commit": commit},
            "passed_over": [{"version": "v1.1.0", "commit": built.commits["1.1.0"], "missing_targets": [CPU_VARIANT]}],
        },
        {
            "kind": "skipped-build-folders", "repo_id": odd_repo,
            "locked": {"version": "v1.0.0", "commit": odd_commit}, "folders": [odd],
        },
    ]  # fmt: skip

    write_project(project, f'"{held}" = "==1.0.0"', extra=f'[tool.kernels]\ntargets = ["{CPU_VARIANT}"]\n\n')
    second = validated(kernels("lock", "--json", str(project)), "lock")
    pin = {"version": "v1.0.0", "commit": commit}
    assert second["changes"] == [
        {"action": "requirement-changed", "repo_id": held, "from": pin, "to": pin,
         "requirement": {"from": "<2,>=1", "to": "==1.0.0"}},
        {"action": "removed", "repo_id": odd_repo, "from": {"version": "v1.0.0", "commit": odd_commit}, "to": None},
    ]  # fmt: skip
    assert second["schema_version"] == load_schema("lock")["properties"]["schema_version"]["const"]


def test_a_conflict_in_json_carries_its_causes_as_records(hub_env, tmp_path) -> None:
    child, parent = "kernels-test/records-conflict-child", "kernels-test/records-conflict-parent"
    hub_env.add_repo(KernelRepo(child, (Release("1.0.0"), Release("1.1.0"))))
    hub_env.add_repo(KernelRepo(parent, (Release("1.0.0", depends=((child, ">=2"),)),)))
    project = write_project(tmp_path / "app", f'"{parent}" = ">=1"\n"{child}" = ">=1"')

    result = kernels("lock", "--json", str(project))

    assert result.returncode == 1
    payload = validated(result, "error")
    assert payload["conflict"]["causes"] == [
        {"repo_id": child, "requirement": ">=1", "required_by": None},
        {"repo_id": child, "requirement": ">=2", "required_by": {"repo_id": parent, "version": "1.0.0"}},
    ]
    assert payload["conflict"]["versions"] == [{"repo_id": child, "tags": ["v1.1.0", "v1.0.0"], "branches": ["v1"]}]
    assert payload["conflict"]["requester"] == "project"
    assert payload["error"] == result.stderr.removeprefix("error: ").removesuffix("\n")  # the same text, told once
    assert not (project / "kernels.lock").exists()


def test_a_target_no_version_serves_is_told_in_json_as_records(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/records-unserved"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,)),)))
    targets = f'[tool.kernels]\ntargets = ["{CUDA_VARIANT}"]\n\n'
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', extra=targets)

    result = kernels("lock", "--json", str(project))

    assert result.returncode == 1
    conflict = validated(result, "error")["conflict"]
    assert conflict["causes"] == [{"repo_id": repo_id, "requirement": ">=1", "required_by": None}]
    assert conflict["unserved"] == [
        {"version": "v1.0.0", "commit": built.commits["1.0.0"], "missing_targets": [CUDA_VARIANT],
         "offers": [CPU_VARIANT]},
    ]  # fmt: skip


def _lock_report(project: Path) -> tuple[object, str]:
    from kernel_deps.commands.lock import LockMode, lock_project

    report = lock_project(project, mode=LockMode.RESOLVE)
    assert report.up_to_date and not report.written
    return report, "lock"


def _add_report(project: Path) -> tuple[object, str]:
    from kernel_deps.commands.edit import add_kernel

    report = add_kernel(project, "kernels-test/rotary>=1,<2")
    assert (report.action, report.repo_id, report.requirement) == ("add", "kernels-test/rotary", ">=1,<2")
    assert [(c.action, c.repo_id) for c in report.lock.changes] == [("added", "kernels-test/rotary")]
    return report, "lock"


def _remove_report(project: Path) -> tuple[object, str]:
    from kernel_deps.commands.edit import remove_kernel

    report = remove_kernel(project, "kernels-test/flash")
    assert ("removed", "kernels-test/flash") in [(c.action, c.repo_id) for c in report.lock.changes]
    return report, "lock"


def _download_report(project: Path) -> tuple[object, str]:
    from kernel_deps.commands.download import download_project

    report = download_project(project)
    assert report.lockfile == project / "kernels.lock" and report.fetched
    return report, "download"


def _verify_report(project: Path) -> tuple[object, str]:
    from kernel_deps.commands.verify import verify_project

    report = verify_project(project)
    assert report.ok
    return report, "verify"


def _outdated_report(project: Path) -> tuple[object, str]:
    from kernel_deps.commands.outdated import outdated_project

    report = outdated_project(project)
    assert [k.repo_id for k in report.kernels] == list(read_lock(project / "kernels.lock", purpose="use").lock.repo_ids)
    return report, "outdated"


def _tree_report(project: Path) -> tuple[object, str]:
    from kernel_deps.commands.tree import tree_project

    report = tree_project(project)
    assert {node.repo_id for node in report.roots} == {"kernels-test/layer-norm", "kernels-test/flash"}
    return report, "tree"


def _versions_report(project: Path) -> tuple[object, str]:
    from kernel_deps.commands.versions import list_versions

    report = list_versions("kernels-test/flash")
    assert [v.ref for v in report.versions] == ["v2", "v1"]
    return report, "versions"


@pytest.mark.parametrize(
    "call",
    [_lock_report, _add_report, _remove_report, _download_report, _verify_report, _outdated_report, _tree_report,
     _versions_report],
    ids=["lock", "add", "remove", "download", "verify", "outdated", "tree", "versions"],
)  # fmt: skip
def test_a_command_called_from_python_returns_a_report_whose_json_is_its_schema(hub_env, project, call) -> None:
    report, schema = call(project)

    payload = json.loads(json.dumps(report.to_json()))  # what --json prints, read back
    errors = sorted(Draft202012Validator(load_schema(schema)).iter_errors(payload), key=str)
    assert not errors, f"{schema}: {[e.message for e in errors]}"
    assert payload["schema_version"] == load_schema(schema)["properties"]["schema_version"]["const"]


def test_export_called_from_python_returns_its_report_and_writes_the_file(hub_env, project, tmp_path) -> None:
    from kernel_deps.commands.export import export_project

    out = tmp_path / "theirs.lock"
    report = export_project(project, "kernels-0.16", output=out)

    assert (report.output, report.format, report.lockfile) == (out, "kernels-0.16", project / "kernels.lock")
    assert out.read_text() == report.text
    assert report.kernels == len(read_lock(project / "kernels.lock", purpose="use").lock.kernels)
    assert export_project(project, "kernels-0.17").output is None  # no file: the caller shows the text


def test_a_stale_lock_check_is_json_and_exit_1(hub_env, project) -> None:
    text = (project / "pyproject.toml").read_text().replace('"kernels-test/flash" = 1', '"kernels-test/flash" = 2')
    (project / "pyproject.toml").write_text(text)
    stale = kernels("lock", "--check", "--json", str(project))
    assert stale.returncode == 1
    summary = validated(stale, "lock")
    assert summary["up_to_date"] is False and summary["written"] is False and summary["changes"]
    assert summary["ok"] is False
    dry = validated(kernels("lock", "--dry-run", "--json", str(project)), "lock")
    assert (dry["ok"], dry["written"]) == (False, False)
    written = validated(kernels("lock", "--json", str(project)), "lock")
    assert (written["ok"], written["written"], written["up_to_date"]) == (True, True, False)


@pytest.mark.parametrize(
    ("args", "env", "code", "fragment"),
    [
        (("verify", "--json", "{missing}"), {}, 2, "no pyproject.toml"),
        (("download", "--json", "{project}"), {"HF_HUB_OFFLINE": "1"}, 1, "HF_HUB_OFFLINE"),
        (("lock", "--json", "{project}"), {"HF_ENDPOINT": "not a url"}, 2, "HF_ENDPOINT"),
        (("versions", "not-a-repo-id", "--json"), {}, 2, "not-a-repo-id"),
        (("outdated", "--json", "{missing}"), {}, 2, "no pyproject.toml"),
    ],
    ids=["bad-project", "offline-download", "bad-endpoint", "bad-repo-id", "outdated-bad-project"],
)
def test_errors_are_json_on_stdout_and_one_line_on_stderr(hub_env, project, tmp_path, args, env, code, fragment) -> None:
    if args[0] == "lock":
        (project / "kernels.lock").unlink()  # lock must reach the Hub to fail on the endpoint
    filled = [a.format(project=project, missing=tmp_path / "missing") for a in args]
    result = kernels(*filled, **env)
    assert result.returncode == code, (result.stdout, result.stderr)
    payload = validated(result, "error")
    assert payload["exit_code"] == code and fragment in payload["error"]
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and fragment in result.stderr


def usage_errors() -> list[tuple[str, str, list[str]]]:
    """(command, what is wrong, its words) for each kind of click usage error each --json
    command can meet; ``{file}`` is a file where a folder is due, ``{dir}`` a folder."""
    cases = []
    for name in json_commands():
        command = cli_main.commands[name]
        required = [p for p in command.params if isinstance(p, click.Argument) and p.required]
        words = {"versions": ["kernels-test/flash"], "add": ["kernels-test/rotary"], "remove": ["kernels-test/rotary"]}
        given = words.get(name, [])
        assert len(given) == len(required), f"kernels {name}: give its required arguments here"
        cases += [
            (name, "unknown-option", [name, *given, "--no-such-option", "--json"]),
            (name, "flag-with-a-value", [name, *given, "--json=yes"]),
            (name, "extra-argument", [name, *given, "{dir}", "surplus", "--json"]),
            (name, "unknown-option-before-the-command", ["--no-such-option", name, *given, "--json"]),
        ]
        if required:
            cases.append((name, "missing-argument", [name, "--json"]))
        if any(isinstance(p.type, click.Path) and not p.type.file_okay for p in command.params):
            cases.append((name, "bad-value", [name, *given, "{file}", "--json"]))
    return cases


@pytest.mark.parametrize(("name", "wrong", "words"), usage_errors(), ids=[f"{n}-{w}" for n, w, _ in usage_errors()])
def test_a_usage_error_with_json_is_the_error_document(tmp_path, name, wrong, words) -> None:
    (tmp_path / "a-file").write_text("")
    result = kernels(*(w.format(file=tmp_path / "a-file", dir=tmp_path) for w in words))
    assert result.returncode == 2, (result.stdout, result.stderr)
    payload = validated(result, "error")  # json.loads of the whole of stdout: one document, nothing else
    assert payload["exit_code"] == 2
    where = "kernels" if wrong == "unknown-option-before-the-command" else f"kernels {name}"
    assert payload["error"].startswith(f"{where}: ") and payload["error"].endswith(f"(see '{where} --help')")
    assert result.stderr == f"error: {payload['error']}\n"
    if wrong != "flag-with-a-value":  # without --json: the same one line, as every other error
        human = kernels(*(w.format(file=tmp_path / "a-file", dir=tmp_path) for w in words if w != "--json"))
        assert (human.returncode, human.stdout, human.stderr) == (2, "", result.stderr), human


# -- quiet -------------------------------------------------------------------------------


def test_quiet_prints_nothing_on_success_in_either_place(hub_env, project) -> None:
    for args in (("-q", "download", str(project)), ("download", "--quiet", str(project)),
                 ("lock", "-q", str(project)), ("-q", "lock", "--check", str(project)),
                 ("verify", "-q", "--require-cached", str(project)), ("-q", "outdated", str(project)),
                 ("-q", "versions", "kernels-test/flash")):  # fmt: skip
        result = kernels(*args)
        assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), args


def test_quiet_still_prints_problems_and_errors(hub_env, project) -> None:
    assert kernels("download", "-q", str(project)).returncode == 0
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    flash = lock.get("kernels-test/flash")
    folder = cache.variant_dir(cache.find_repo_dir(flash.repo_id), flash.sha, CPU_VARIANT)
    (folder / "extra.txt").write_text("not locked\n")
    result = kernels("-q", "verify", str(project))
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == f"{flash.repo_id} {CPU_VARIANT}: extra.txt was added; it is not part of the locked variant"
    assert "problem found" not in result.stdout and "hint:" not in result.stdout  # the summary is left out

    text = (project / "pyproject.toml").read_text().replace('"kernels-test/flash" = 1', '"kernels-test/flash" = 2')
    (project / "pyproject.toml").write_text(text)
    stale = kernels("lock", "--check", "-q", str(project))
    assert stale.returncode == 1 and stale.stdout == ""
    assert "kernels.lock is out of date; run 'kernels lock' to update it:" in stale.stderr

    missing = kernels("-q", "verify", str(project / "nowhere"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: ")


# -- terminals, progress and NO_COLOR ----------------------------------------------------


def test_progress_bar_only_on_a_terminal(hub_env, project, tmp_path) -> None:
    status, shown = on_terminal("download", str(project))
    assert status == 0, shown
    assert "kernels: " in shown and "B/s" in shown and "100%|" in shown  # the bar, its total known
    assert f"kernels-test/flash {CPU_VARIANT}: downloaded" in shown
    assert re.search(r"kernels: downloaded [\d.]+ [kM]?B \(\d+ files\) in \d+s", shown)

    plain = piped("download", str(project), HF_HUB_CACHE=str(tmp_path / "other-cache"))
    assert plain.returncode == 0
    assert plain.stderr == ""  # a download of a moment: its variant lines say it all
    assert f"kernels-test/flash {CPU_VARIANT}: downloaded" in plain.stdout

    quiet_status, quiet_shown = on_terminal("download", "-q", str(project), HF_HUB_CACHE=str(tmp_path / "third-cache"))
    assert (quiet_status, quiet_shown) == (0, "")
    quiet = piped("download", "-q", str(project), HF_HUB_CACHE=str(tmp_path / "fourth-cache"))
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_a_slow_download_in_a_pipe_says_how_far_it_is_every_few_seconds(hub_env, proxy, tmp_path) -> None:
    # A CI log: one shared object dripping in for several seconds, stderr a pipe.
    hub_env.add_repo(KernelRepo("kernels-test/progress-slow", (Release("1.0.0", variants=(CPU_VARIANT,), lfs_size=9000),)))
    project = write_project(tmp_path / "app", {"kernels-test/progress-slow": ">=1"}, locked=True)
    proxy.drip = 0.001
    proxy.only_paths = lambda path: path.endswith(".so")
    shown = piped("download", str(project), HF_ENDPOINT=proxy.url)
    assert shown.returncode == 0, shown.stderr
    assert "\r" not in shown.stderr
    fetched = re.search(rf"kernels-test/progress-slow {CPU_VARIANT}: downloaded (\d+) files \(([\d,]+) bytes\)", shown.stdout)
    assert fetched, shown.stdout
    files, total = int(fetched[1]), int(fetched[2].replace(",", ""))
    assert 9000 < total < 100_000
    lines = shown.stderr.splitlines()
    status = [re.fullmatch(r"kernels: ([\d.]+ k?B) of ([\d.]+ kB) \((\d+)%\), [\d.]+ k?B/s(, [\dhm]+s? left)?(; .*)?", line)
              for line in lines[:-1]]  # fmt: skip
    assert all(status), lines
    assert {m[2] for m in status} == {f"{total / 1000:.1f} kB"}  # the total known from the first line on
    percents = [int(m[3]) for m in status]
    assert percents == sorted(percents) and percents[-1] == 100 and percents[0] < 50, lines
    periodic = [m for m in status if m[5] is None]
    assert len(periodic) >= 2 and periodic[0][3] != periodic[-1][3], lines  # while the shared object drips in
    # A line per file fetched once the download lasts: the shared object, after the small files.
    per_file = [m[5] for m in status if m[5]]
    assert len(per_file) == 1 and re.fullmatch(rf"; kernels-test/progress-slow {CPU_VARIANT} \S+\.so \(9\.0 kB\)", per_file[0])
    assert re.fullmatch(rf"kernels: downloaded {total / 1000:.1f} kB \({files} files\) in \d+s, [\d.]+ k?B/s", lines[-1])


def test_json_stdout_stays_json_and_shows_no_bar_on_the_terminal(hub_env, project) -> None:
    status, shown, stdout = on_terminal("download", "--json", str(project), stdout_piped=True)
    assert status == 0, shown
    assert shown == ""  # --json: no bar, no lines
    assert validated(subprocess.CompletedProcess([], 0, stdout, ""), "download")["downloaded"] > 0


def test_colour_on_a_terminal_unless_no_color(hub_env, tmp_path) -> None:
    missing = str(tmp_path / "missing")
    status, coloured = on_terminal("verify", missing)
    assert status == 2 and "\x1b[" in coloured and "no pyproject.toml" in coloured
    status, plain = on_terminal("verify", missing, NO_COLOR="1")
    assert status == 2 and plain.replace("\r\n", "\n") == f"error: no pyproject.toml in {missing}\n"
    to_pipe = piped("verify", missing)
    assert "\x1b[" not in to_pipe.stderr and to_pipe.stderr == f"error: no pyproject.toml in {missing}\n"
