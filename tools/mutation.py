"""`make mutation`: mutation testing of the core modules with mutmut 3, one module at a time.

Each module is mutated alone and judged only by the test files that exercise it
(``MODULE_TESTS``), in its own scratch folder ``.mutation/<module>/`` (mutmut copies the
sources and tests into ``mutants/`` there and runs pytest in that copy, in-process, so a
test that starts the ``kernels`` console script in a subprocess runs the unmutated
installed package and cannot kill anything).

Every mutant is then sorted into one of:

- **killed**: some test failed (or timed out) with the mutant in place;
- **survived**: every test passed: a behaviour change nobody asserts, or an equivalent
  mutant not yet listed;
- **equivalent**: survived, and ``tools/mutation_equivalent.toml`` says why no user can
  tell it from the original (keyed by mutmut's mutant name);
- **message**: the mutant only changes the text of a message (a string literal holding
  whitespace, or a literal part of such an f-string). These are counted apart, killed or
  not: the tests assert the words that name the file, key or kernel, not every word.

The score is killed / (killed + survived) over the behaviour-changing mutants (message
mutants and listed equivalents left out). Usage::

    .venv/bin/python tools/mutation.py [MODULE ...] [--jobs N] [--sample N] [--survivors]

With no module, all of ``MODULE_TESTS`` run, pure modules first. ``--sample N`` runs a
seeded sample of N mutants per module (all when fewer). The table is printed and written
to ``.mutation/table.md``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import random
import re
import shutil
import subprocess
import sys
import tokenize
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
MUTMUT = Path(sys.executable).with_name("mutmut")
EQUIVALENT_FILE = ROOT / "tools" / "mutation_equivalent.toml"

# Each core module and the test files that exercise it, pure modules first (they are cheap:
# no Hub, no subprocess), then the ones whose tests start the local Hub.
MODULE_TESTS: dict[str, list[str]] = {
    "core.hashing": ["tests/unit/core/test_hashing.py"],
    "core.variants": ["tests/unit/core/test_variants.py", "tests/functional/loader/test_variant_preference.py", "tests/unit/core/test_variant_names.py"],
    "core.spec": ["tests/unit/core/test_spec.py", "tests/unit/core/test_requirement_limits.py", "tests/unit/core/test_requirement_messages.py"],
    "lock.model": ["tests/unit/lock/test_lockfile.py", "tests/unit/core/test_requirement_limits.py", "tests/unit/lock/test_lock_messages.py",
                 "tests/functional/lock/test_lockfile_redirects.py"],
    "lock.entries": ["tests/unit/lock/test_lockfile.py", "tests/unit/core/test_requirement_limits.py", "tests/unit/lock/test_lock_messages.py",
                     "tests/functional/lock/test_lockfile_redirects.py"],
    "commands.verify": ["tests/functional/verify/test_verify.py", "tests/functional/verify/test_verify_online_variants.py",
                        "tests/functional/verify/test_verify_cache_errors.py", "tests/functional/verify/test_verify_reports.py", "tests/functional/lock/test_targets.py",
                        "tests/functional/download/test_hostile.py", "tests/functional/lock/test_redirect.py"],
    "resolve.resolver": ["tests/unit/resolve/test_resolver_cases.py", "tests/functional/lock/test_lock.py", "tests/functional/lock/test_pins.py", "tests/functional/lock/test_targets.py",
                 "tests/functional/lock/test_resolver_choices.py", "tests/functional/lock/test_redirect.py", "tests/functional/download/test_hostile.py",
                 "tests/functional/lock/test_resolver_names.py", "tests/functional/lock/test_resolver_target_messages.py",
                 "tests/functional/lock/test_resolver_conflicts.py", "tests/functional/lock/test_resolver_requests.py"],
    "resolve.candidates": ["tests/unit/resolve/test_resolver_cases.py", "tests/functional/lock/test_lock.py", "tests/functional/lock/test_pins.py", "tests/functional/lock/test_targets.py",
                 "tests/functional/lock/test_resolver_choices.py", "tests/functional/lock/test_redirect.py", "tests/functional/download/test_hostile.py",
                 "tests/functional/lock/test_resolver_names.py", "tests/functional/lock/test_resolver_target_messages.py",
                 "tests/functional/lock/test_resolver_conflicts.py", "tests/functional/lock/test_resolver_requests.py"],
    "resolve.explain": ["tests/unit/resolve/test_resolver_cases.py", "tests/functional/lock/test_lock.py", "tests/functional/lock/test_pins.py", "tests/functional/lock/test_targets.py",
                 "tests/functional/lock/test_resolver_choices.py", "tests/functional/lock/test_redirect.py", "tests/functional/download/test_hostile.py",
                 "tests/functional/lock/test_resolver_names.py", "tests/functional/lock/test_resolver_target_messages.py",
                 "tests/functional/lock/test_resolver_conflicts.py", "tests/functional/lock/test_resolver_requests.py"],
    "cache.layout": ["tests/functional/download/test_download_fs.py", "tests/functional/verify/test_verify.py", "tests/functional/verify/test_verify_cache_errors.py",
              "tests/unit/cache/test_cache_layout.py", "tests/functional/download/test_hostile.py",
              "tests/unit/cache/test_cache_checks.py", "tests/functional/download/test_cache_downloads.py", "tests/unit/cache/test_cache_metadata.py"],
    "cache.checks": ["tests/functional/download/test_download_fs.py", "tests/functional/verify/test_verify.py", "tests/functional/verify/test_verify_cache_errors.py",
              "tests/unit/cache/test_cache_layout.py", "tests/functional/download/test_hostile.py",
              "tests/unit/cache/test_cache_checks.py", "tests/functional/download/test_cache_downloads.py", "tests/unit/cache/test_cache_metadata.py"],
    "cache.blobs": ["tests/functional/download/test_download_fs.py", "tests/functional/verify/test_verify.py", "tests/functional/verify/test_verify_cache_errors.py",
              "tests/unit/cache/test_cache_layout.py", "tests/functional/download/test_hostile.py",
              "tests/unit/cache/test_cache_checks.py", "tests/functional/download/test_cache_downloads.py", "tests/unit/cache/test_cache_metadata.py"],
    "cache.placing": ["tests/functional/download/test_download_fs.py", "tests/functional/verify/test_verify.py", "tests/functional/verify/test_verify_cache_errors.py",
              "tests/unit/cache/test_cache_layout.py", "tests/functional/download/test_hostile.py",
              "tests/unit/cache/test_cache_checks.py", "tests/functional/download/test_cache_downloads.py", "tests/unit/cache/test_cache_metadata.py"],
    "commands.download": ["tests/functional/download/test_download.py", "tests/functional/download/test_download_fs.py", "tests/functional/download/test_download_choices.py",
                          "tests/functional/lock/test_targets.py", "tests/functional/download/test_hostile.py", "tests/functional/download/test_cache_downloads.py",
                          "tests/functional/download/test_download_edges.py"],
    "loader.api": ["tests/functional/loader/test_loader_verified.py", "tests/functional/loader/test_loader_entry_points.py", "tests/functional/lock/test_redirect.py",
               "tests/functional/loader/test_loader.py", "tests/functional/loader/test_loader_api.py", "tests/functional/loader/test_loader_embedded_lookup.py",
               "tests/functional/loader/test_loader_hf_calls.py"],
}

# Tests left out of a module's run because they cannot pass under mutmut: they assert the
# frame that called kernel_deps (the caller a loader error names, the line a warning
# points at), and under mutmut that frame is mutmut's trampoline.
DESELECTED: dict[str, list[str]] = {
    "loader.api": [
        "tests/functional/loader/test_loader.py::test_lock_is_found_beside_pyproject_and_through_the_environment",
        "tests/functional/loader/test_loader.py::test_the_caller_is_the_first_frame_outside_kernel_deps",
        "tests/functional/loader/test_loader_api.py::test_local_kernels_overrides_locked_and_unlocked_loads_warning_each_time",
    ],
}

# mutmut's exit-code verdicts (mutmut.stats.status_by_exit_code), folded into ours.
KILLED_CODES = {1, 3, -24, 36}  # a test failed, or the mutant ran past its timeout
SURVIVED_CODES = {0, 5, 33}  # every test passed, or no test reached the mutated function


@dataclass
class Tally:
    """The verdicts of one module's mutants."""

    module: str
    mutants: int = 0
    killed: int = 0
    survived: list[str] = field(default_factory=list)
    equivalent: int = 0
    message_killed: int = 0
    message_survived: list[str] = field(default_factory=list)
    other: int = 0  # not run: mutmut could not judge it (interrupted, segfault)

    @property
    def score(self) -> float | None:
        judged = self.killed + len(self.survived)
        return self.killed / judged if judged else None


# A word beside a space: the literal is prose a user reads, not a key, a path or a separator.
_PROSE = re.compile(r"[A-Za-z]{2,}\s|\s[A-Za-z]{2,}")


def _tokens(node: ast.AST) -> list[tokenize.TokenInfo]:
    source = ast.unparse(node)
    return [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in _LAYOUT]


_LAYOUT = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER, tokenize.COMMENT}


def _is_prose(token: tokenize.TokenInfo) -> bool:
    """A str literal or f-string (never bytes) that holds prose."""
    prefix = token.string[: len(token.string) - len(token.string.lstrip("rRbBuUfF"))]
    return token.type == tokenize.STRING and "b" not in prefix.lower() and bool(_PROSE.search(token.string))


def message_only_mutants(mutated_file: Path) -> set[str]:
    """Names of the mutant functions in ``mutated_file`` that change only message text.

    Every token the mutant changes must sit inside a literal holding prose, and be
    replaced by another literal or by None (a message dropped).
    """
    tree = ast.parse(mutated_file.read_text(encoding="utf-8"))
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    found: set[str] = set()
    for name, node in functions.items():
        if "__mutmut_" not in name or name.endswith("__mutmut_orig"):
            continue
        original = functions.get(name.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
        if original is None:
            continue
        before, after = _tokens(original)[2:], _tokens(node)[2:]  # past "def" and the names, which differ
        changes = [op for op in difflib.SequenceMatcher(None, [t.string for t in before], [t.string for t in after],
                                                         autojunk=False).get_opcodes() if op[0] != "equal"]  # fmt: skip
        if changes and all(
            tag == "replace" and all(_is_prose(t) for t in before[i1:i2])
            and all(t.type == tokenize.STRING or t.string == "None" for t in after[j1:j2])
            for tag, i1, i2, j1, j2 in changes
        ):
            found.add(name)
    return found


def _mutant_names(folder: Path, module: str) -> list[str]:
    meta = _meta_path(folder, module)
    return sorted(json.loads(meta.read_text())["exit_code_by_key"])


def run_module(
    module: str,
    tests: list[str],
    jobs: int,
    sample: int | None,
    work: Path = WORK,
    test_tree: Path = ROOT / "tests",
    retest_of: Path | None = None,
) -> Path:
    """Run mutmut over one module in its own scratch folder; return that folder."""
    folder = work / module
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "src").symlink_to(ROOT / "src")
    (folder / "tests").symlink_to(test_tree)
    selection = ", ".join(json.dumps(t) for t in tests)
    deselect = "".join(f', "--deselect", {json.dumps(t)}' for t in DESELECTED.get(module, []))
    (folder / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        'source_paths = ["src/kernel_deps"]\n'
        f'only_mutate = ["src/kernel_deps/{_module_file(module)}"]\n'
        f'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"{deselect}]\n'
        f"pytest_add_cli_args_test_selection = [{selection}]\n"
    )
    command = [str(MUTMUT), "run", "--max-children", str(jobs)]
    log = (folder / "mutmut.log").open("w")
    earlier = _codes(retest_of / module, module) if retest_of else None
    if earlier is not None or sample is not None:
        # A name that matches nothing: mutmut generates the mutants and collects which tests
        # reach which function, then stops with "nothing matches" (logged). Doing that in a
        # process of its own keeps the clean run that follows from inheriting the kernels the
        # collecting run loaded (the loader keeps them for the life of the process).
        subprocess.run([*command, f"kernel_deps.{module}.none-such"], cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    if earlier is not None:
        # Adding tests cannot revive a killed mutant: only the earlier survivors run again.
        command += sorted(name for name, code in earlier.items() if code is not None and code not in KILLED_CODES)
    elif sample is not None:
        # The sample is drawn from the names mutmut generated.
        names = _mutant_names(folder, module)
        if len(names) > sample:
            names = sorted(random.Random(f"kernel-deps {module}").sample(names, sample))
            command += names
    print(f"mutmut: {module} against {', '.join(tests)}", flush=True)
    subprocess.run(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, check=False)
    if earlier is not None:  # the earlier verdicts, with the survivors' new ones
        meta = _meta_path(folder, module)
        data = json.loads(meta.read_text())
        data["exit_code_by_key"] = {**earlier, **{k: v for k, v in data["exit_code_by_key"].items() if v is not None}}
        meta.write_text(json.dumps(data))
    return folder


def _module_file(module: str) -> str:
    """A module's file under src/kernel_deps/: ``commands.verify`` -> ``commands/verify.py``."""
    return module.replace(".", "/") + ".py"


def _meta_path(folder: Path, module: str) -> Path:
    return folder / "mutants" / "src" / "kernel_deps" / f"{_module_file(module)}.meta"


def _codes(folder: Path, module: str) -> dict[str, int | None]:
    return json.loads(_meta_path(folder, module).read_text())["exit_code_by_key"]


def tally(module: str, folder: Path, equivalent: dict[str, str]) -> Tally:
    """Sort one module's mutants into killed, survived, equivalent and message-only."""
    mutated = folder / "mutants" / "src" / "kernel_deps" / _module_file(module)
    codes: dict[str, int | None] = json.loads(Path(f"{mutated}.meta").read_text())["exit_code_by_key"]
    messages = {f"kernel_deps.{module}.{name}" for name in message_only_mutants(mutated)}
    result = Tally(module)
    for name, code in sorted(codes.items()):
        if code is None:
            continue  # not in the sample
        result.mutants += 1
        if name in messages:
            if code in KILLED_CODES:
                result.message_killed += 1
            else:
                result.message_survived.append(name)
        elif code in KILLED_CODES:
            result.killed += 1
        elif code in SURVIVED_CODES:
            if name in equivalent:
                result.equivalent += 1
            else:
                result.survived.append(name)
        else:
            result.other += 1
    return result


def render(tallies: list[Tally]) -> str:
    """The per-module table, as Markdown."""
    lines = [
        "| module | mutants | killed | survived | equivalent | message-only (killed / survived) | not run | killed % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in tallies:
        score = "-" if t.score is None else f"{100 * t.score:.0f} %"
        lines.append(f"| {t.module} | {t.mutants} | {t.killed} | {len(t.survived)} | {t.equivalent} | "
                     f"{t.message_killed} / {len(t.message_survived)} | {t.other} | {score} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=f"any of: {', '.join(MODULE_TESTS)}")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--sample", type=int, default=None, help="run a seeded sample of N mutants per module")
    parser.add_argument("--survivors", action="store_true", help="also list each surviving mutant's name")
    parser.add_argument("--table-only", action="store_true", help="tally the last run's results, run nothing")
    parser.add_argument("--list-equivalents", action="store_true",
                        help="print the listed equivalent mutants as the Markdown list of docs/testing.md, run nothing")
    parser.add_argument("--work", type=Path, default=WORK, help="scratch folder (default .mutation/)")
    parser.add_argument("--retest-survivors-of", type=Path, default=None, metavar="WORK",
                        help="run only the mutants that survived in an earlier run's scratch folder, keeping its other verdicts")
    parser.add_argument("--tests", type=Path, default=ROOT / "tests", help="the tests folder to judge by (e.g. an older one)")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULE_TESTS]
    if unknown:
        print(f"error: no such core module {unknown[0]!r}; expected one of {', '.join(MODULE_TESTS)}", file=sys.stderr)
        return 2
    if not MUTMUT.exists():
        print(f"error: {MUTMUT} is missing; run 'make mutation' (it installs mutmut)", file=sys.stderr)
        return 2
    equivalent = tomllib.loads(EQUIVALENT_FILE.read_text())["equivalent"] if EQUIVALENT_FILE.exists() else {}
    if args.list_equivalents:
        for name, why in equivalent.items():
            print(f"- `{name.removeprefix('kernel_deps.')}`: {why}")
        return 0
    tallies = []
    for module in args.modules or list(MODULE_TESTS):
        tests = [t for t in MODULE_TESTS[module] if (args.tests.parent / t).exists()]
        if args.table_only:
            folder = args.work / module
        else:
            folder = run_module(module, tests, args.jobs, args.sample, args.work, args.tests.resolve(),
                                args.retest_survivors_of)  # fmt: skip
        tallies.append(tally(module, folder, equivalent))
    table = render(tallies)
    print(table)
    if args.survivors:
        for t in tallies:
            for name in t.survived:
                print(f"survived: {name}")
            for name in t.message_survived:
                print(f"message survived: {name}")
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "table.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
