"""What scripts and CI read: --json against docs/schemas/, -q/--quiet, terminals and NO_COLOR.

Every command runs against the local Hub and its JSON is validated against the schema
file the docs publish. The JSON and -q checks run the command in-process
(tests/fixtures/cli.py); what depends on the output being a terminal or a pipe (the
progress bar, colour) runs it as a real process, on a pseudo-terminal or piped.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import click
import pytest
from jsonschema import Draft202012Validator

from kernel_deps import cache
from kernel_deps.cli import main as cli_main
from kernel_deps.lockread import read_lock
from tests.fixtures.builder import CPU_VARIANT
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project

KERNELS = str(Path(sys.executable).with_name("kernels"))
SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"
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


def validated(result: CliResult | subprocess.CompletedProcess, schema: str) -> dict:
    """The command's stdout, parsed and valid against docs/schemas/<schema>.schema.json."""
    payload = json.loads(result.stdout)
    errors = sorted(Draft202012Validator(load_schema(schema)).iter_errors(payload), key=str)
    assert not errors, f"{schema}: {[e.message for e in errors]}\n{result.stdout}"
    return payload


def load_schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


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
    assert locked["up_to_date"] is True and locked["written"] is False
    assert [k["repo_id"] for k in locked["kernels"]] == [k.repo_id for k in lock.kernels]
    checked = kernels("lock", "--check", "--json", str(project))
    assert checked.returncode == 0 and validated(checked, "lock")["up_to_date"] is True

    first = kernels("download", "--json", str(project))
    assert first.returncode == 0, first.stderr
    fetched = validated(first, "download")
    assert first.stderr == ""  # no progress lines beside the JSON off a terminal
    assert fetched["downloaded"] == len(lock.kernels) and fetched["already_cached"] == 0
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
    assert [k["repo_id"] for k in validated(drift, "outdated")["kernels"]] == [k.repo_id for k in lock.kernels]

    listed = validated(kernels("versions", "kernels-test/flash", "--json"), "versions")
    assert [v["name"] for v in listed["versions"]] == ["v2", "v1"]


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
    assert summary["written"] is True and any(line.startswith("+ kernels-test/rotary") for line in summary["changes"])
    removed = validated(kernels("remove", "kernels-test/rotary", str(project), "--json"), "lock")
    assert "kernels-test/rotary" not in [k["repo_id"] for k in removed["kernels"]]


def test_a_stale_lock_check_is_json_and_exit_1(hub_env, project) -> None:
    text = (project / "pyproject.toml").read_text().replace('"kernels-test/flash" = 1', '"kernels-test/flash" = 2')
    (project / "pyproject.toml").write_text(text)
    stale = kernels("lock", "--check", "--json", str(project))
    assert stale.returncode == 1
    summary = validated(stale, "lock")
    assert summary["up_to_date"] is False and summary["written"] is False and summary["changes"]


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
    if wrong != "flag-with-a-value":  # without --json: click's own usage text, as before
        human = kernels(*(w.format(file=tmp_path / "a-file", dir=tmp_path) for w in words if w != "--json"))
        assert (human.returncode, human.stdout) == (2, "") and "Usage: kernels" in human.stderr, human


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
    assert "kernels: " in shown and "B/s" in shown  # the byte counter, cleared when done
    assert f"kernels-test/flash {CPU_VARIANT}: downloaded" in shown

    plain = piped("download", str(project), HF_HUB_CACHE=str(tmp_path / "other-cache"))
    assert plain.returncode == 0
    assert "B/s" not in plain.stdout + plain.stderr and "\r" not in plain.stdout + plain.stderr
    assert f"kernels-test/flash {CPU_VARIANT}: downloaded" in plain.stdout

    quiet_status, quiet_shown = on_terminal("download", "-q", str(project), HF_HUB_CACHE=str(tmp_path / "third-cache"))
    assert (quiet_status, quiet_shown) == (0, "")


def test_json_stdout_stays_json_with_a_bar_on_the_terminal(hub_env, project) -> None:
    status, shown, stdout = on_terminal("download", "--json", str(project), stdout_piped=True)
    assert status == 0, shown
    assert "B/s" in shown and "downloaded" not in shown  # the bar only, on stderr
    assert validated(subprocess.CompletedProcess([], 0, stdout, ""), "download")["downloaded"] > 0


def test_colour_on_a_terminal_unless_no_color(hub_env, tmp_path) -> None:
    missing = str(tmp_path / "missing")
    status, coloured = on_terminal("verify", missing)
    assert status == 2 and "\x1b[" in coloured and "no pyproject.toml" in coloured
    status, plain = on_terminal("verify", missing, NO_COLOR="1")
    assert status == 2 and plain.replace("\r\n", "\n") == f"error: no pyproject.toml in {missing}\n"
    to_pipe = piped("verify", missing)
    assert "\x1b[" not in to_pipe.stderr and to_pipe.stderr == f"error: no pyproject.toml in {missing}\n"
