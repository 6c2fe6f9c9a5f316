"""Start-up: commands import huggingface_hub and torch only when they use them.

Each command runs as a real ``kernels`` subprocess with ``-X importtime`` (through
``PYTHONPROFILEIMPORTTIME``); the modules it imported are read from that report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_deps.cli.group import COMMAND_TABLE
from tests.fixtures.cached_project import write_cached_project
from tests.fixtures.processes import HEAVY, imported_modules, top_level


def test_help_imports_neither_huggingface_hub_nor_torch() -> None:
    result, modules = imported_modules("--help")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Usage:" in result.stdout
    assert not top_level(modules) & set(HEAVY)


# What `kernels --help` has no use for, though some commands do: JSON output and error
# documents (json), reading the Hugging Face CLI's entry points when it is installed
# (configparser), credentials in a URL (base64), the commands' definitions (their
# options, paths as pathlib's, the error classes and their dataclasses), and shutil,
# which click's help formatter imports for the terminal's width.
HELP_DOES_NOT_USE = (
    "json", "configparser", "base64", "kernel_deps.cli.options", "pathlib", "dataclasses", "kernel_deps.core.errors",
    "shutil",
)


# Every module of kernel-deps `kernels --help` imports: the console script's entry point, the
# group, Ctrl-C's handler and the Hugging Face CLI's reader (with its record base).
HELP_IMPORTS = {
    "kernel_deps", "kernel_deps.cli", "kernel_deps.cli.entry", "kernel_deps.cli.interrupt", "kernel_deps.cli.group",
    "kernel_deps.cli.hf", "kernel_deps.core", "kernel_deps.core.records",
}


def test_help_imports_only_what_it_uses() -> None:
    result, modules = imported_modules("--help")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Hugging Face kernels library, which is not installed" in result.stdout
    assert "verify    Check that pyproject.toml, kernels.lock and the cache agree..." in result.stdout
    assert not modules & set(HELP_DOES_NOT_USE)
    assert {name for name in modules if top_level({name}) == {"kernel_deps"}} == HELP_IMPORTS


def definitions(modules: set[str]) -> set[str]:
    """The modules of command definitions (those COMMAND_TABLE names in kernel_deps.cli) among ``modules``."""
    verbs = {module for module, _, _ in COMMAND_TABLE.values()}
    return {name.rpartition(".")[2] for name in modules if name.rpartition(".")[::2] in {("kernel_deps.cli", v) for v in verbs}}


def test_a_commands_help_measures_the_terminal_without_shutil() -> None:
    # `kernels lock --help` defines lock and no other command; its width is still measured
    # without shutil.
    narrow, modules = imported_modules("lock", "--help", env_extra={"COLUMNS": "60"})
    wide, _ = imported_modules("lock", "--help", env_extra={"COLUMNS": "200"})
    assert narrow.returncode == wide.returncode == 0, narrow.stderr[-2000:]
    assert definitions(modules) == {"lock"} and "shutil" not in modules
    assert max(map(len, narrow.stdout.splitlines())) <= 58 < max(map(len, wide.stdout.splitlines())) <= 78


@pytest.mark.parametrize("with_home", [False, True], ids=["default-cache", "HF_HOME"])
def test_offline_verify_imports_neither_huggingface_hub_nor_torch(tmp_path: Path, with_home: bool) -> None:
    # The cache is found where huggingface_hub would look; --require-cached also describes
    # this machine to choose its variant, from torch's files.
    if with_home:
        env = {"HF_HOME": str(tmp_path / "hf-home")}
        root = tmp_path / "hf-home" / "hub"
    else:
        env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
        root = tmp_path / "xdg" / "huggingface" / "hub"
    for name in ("KERNELS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "HF_HUB_OFFLINE"):
        env.setdefault(name, "")
    project = write_cached_project(tmp_path / "app", root)
    result, modules = imported_modules("verify", "--require-cached", str(project), env_extra=env)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert "1 cached variant verified" in result.stdout
    assert "kernel_deps.core.system" in modules
    assert not top_level(modules) & set(HEAVY)
    # A command run defines itself alone, not the other commands' options.
    assert definitions(modules) == {"verify"}
    # A verify writes nothing, so it does not import what naming a temp file takes, and it
    # reads pyproject.toml with the standard library's tomllib, not the editing parser.
    assert "secrets" not in modules
    if sys.version_info >= (3, 11):
        assert "tomlkit" not in modules
    # A few small files are hashed in this thread (no pool, no concurrent.futures), and a
    # metadata.json without a digest (here, none at all) needs no base64.
    assert not modules & set(VERIFY_DOES_NOT_USE)
    assert set(VERIFY_USES) <= modules
    assert not modules & set(READING_DOES_NOT_USE)


# What an offline verify of small cached kernels, none with a digest, does not import; nor
# the readers of other tools' lock formats, for a lock of kernel-deps' own.
VERIFY_DOES_NOT_USE = ("concurrent.futures", "concurrent.futures.thread", "base64", "kernel_deps.lock.formats",
                      "kernel_deps.checks.hub", "kernel_deps.fetch")  # the Hub's checks, and downloading
# The engines an offline verify composes: the project read once, the lock's checks.
VERIFY_USES = ("kernel_deps.project.record", "kernel_deps.checks.verification", "kernel_deps.checks.cache")

# What a command that only reads a project and checks a few small cached files has no use for:
# random (a file lock's wait), the file locks themselves (an edit of the project), dataclasses
# and copy (no record is copied with dataclasses.replace), and OpenSSL's hashes (hashlib,
# _hashlib: its few small files are hashed by the interpreter's own).
READING_DOES_NOT_USE = ("random", "kernel_deps.core.filelocks", "dataclasses", "copy", "hashlib", "_hashlib")


def test_a_warm_download_defines_only_download(tmp_path: Path) -> None:
    env = {"KERNELS_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    project = write_cached_project(tmp_path / "app", tmp_path / "cache")
    result, modules = imported_modules("download", str(project), env_extra=env)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert "1 variant present and verified (0 downloaded" in result.stdout
    assert definitions(modules) == {"download"}
    assert not top_level(modules) & set(HEAVY)
    # pyproject.toml is parsed (what it asks of the lock is judged by every download, whatever
    # the lock records), with the standard library's tomllib, not the editing parser; a lock of
    # kernel-deps' own needs no other tool's reader.
    assert "tomllib" in modules and not modules & {"tomlkit", "kernel_deps.lock.formats"}
    # What is in the cache is judged there: the fetching of a missing variant (and with it the
    # Hub client and filelock) is never imported, nor verify's checks.
    assert set(WARM_DOWNLOAD_USES) <= modules and not modules & set(WARM_DOWNLOAD_DOES_NOT_USE)
    assert not modules & set(READING_DOES_NOT_USE)


# The engines a warm download composes, and what only a missing variant or another verb imports.
WARM_DOWNLOAD_USES = ("kernel_deps.project.record", "kernel_deps.fetch.project", "kernel_deps.fetch.run",
                      "kernel_deps.fetch.gate", "kernel_deps.fetch.tasks")  # fmt: skip
WARM_DOWNLOAD_DOES_NOT_USE = ("kernel_deps.fetch.files", "filelock", "kernel_deps.checks", "kernel_deps.resolve")


def test_a_lock_of_major_branches_is_verified_without_packaging(tmp_path: Path) -> None:
    # pyproject's `= 1` met by the lock's v1 branch needs no PEP 440 parse; a range would.
    env = {"KERNELS_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    project = write_cached_project(tmp_path / "app", tmp_path / "cache", requirement=1, version="v1")
    result, modules = imported_modules("verify", str(project), env_extra=env)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert "1 cached variant verified" in result.stdout
    assert not top_level(modules) & {"packaging", "concurrent"}
    assert not modules & {*VERIFY_DOES_NOT_USE, *READING_DOES_NOT_USE}

    # The same lock with a v2 branch does not meet `= 1`: judged the same way, without packaging.
    lock = project / "kernels.lock"
    lock.write_text(lock.read_text().replace('"version": "v1"', '"version": "v2"'))
    result, modules = imported_modules("verify", str(project), env_extra=env)
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]
    assert "the locked v2 (0123456789ab) does not satisfy '1'" in result.stdout + result.stderr
    assert "packaging" not in top_level(modules)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"XDG_CACHE_HOME": "/xdg"},
        {"HF_HOME": "~/hf"},
        {"HF_HOME": "$KD_TEST_BASE/hf", "KD_TEST_BASE": "/base"},
        {"HF_HOME": "/hf", "XDG_CACHE_HOME": "/xdg"},
        {"HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HOME": "/hf"},
        {"HF_HUB_CACHE": "~/hub", "HUGGINGFACE_HUB_CACHE": "/legacy"},
    ],
    ids=["default", "xdg", "hf-home-user", "hf-home-var", "hf-home-over-xdg", "legacy", "hf-hub-cache"],
)
def test_cache_root_is_where_huggingface_hub_looks(env: dict[str, str]) -> None:
    names = ("KERNELS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")
    clean = {k: v for k, v in os.environ.items() if k not in names}
    code = (
        "import sys\nfrom kernel_deps.cache.store import cache_root\nours = str(cache_root())\n"
        "assert 'huggingface_hub' not in sys.modules\n"
        "from huggingface_hub import constants\nprint(ours)\nprint(constants.HF_HUB_CACHE)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env}, check=True)
    ours, theirs = result.stdout.splitlines()
    assert ours == theirs


def test_patterns_only_some_commands_use_are_not_compiled_at_import() -> None:
    # Reading torch's files for its C++ ABI (verify --require-cached, download, the loader)
    # and parsing `kernels add`'s argument compile their patterns when they run, not when
    # `kernels verify` or `--help` starts; so do a revision's rule, a message's line breaks,
    # a version tag's, a wheel's file names, an installed wheel's record hashes and the
    # credentials of a URL in a message.
    code = (
        "import re, sys\ncompiled = []\noriginal = re.compile\n"
        "re.compile = lambda pattern, flags=0: compiled.append(str(pattern)) or original(pattern, flags)\n"
        "import kernel_deps.cli, kernel_deps.commands.verify, kernel_deps.cache.installed\n"
        "wanted = ('compiled_with_cxx11_abi', 'GLIBCXX', '?P<spec>', '@\\\\{', '\\\\u2028', 'preview', 'cpython-3',\n"
        "          'dylib', '{40}|', '+.-]*://)')\n"
        "print('\\n'.join(p for p in compiled if any(w in p for w in wanted)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_verify_and_download_write_no_dataclass_method() -> None:
    # A dataclass writes and runs its methods' source when its class is made; the records an
    # offline verify and a warm download import are plain records, those copied with
    # dataclasses.replace declared dataclasses without a method written.
    code = (
        "import dataclasses\nmade = []\noriginal = dataclasses.dataclass\n"
        "def spy(cls=None, /, **kw):\n"
        "    writes = kw.get('init', True) or kw.get('repr', True) or kw.get('eq', True)\n"
        "    def wrap(c):\n"
        "        made.extend([c.__qualname__] if writes else [])\n"
        "        return original(**kw)(c)\n"
        "    return wrap if cls is None else wrap(cls)\n"
        "dataclasses.dataclass = spy\n"
        "import kernel_deps.cli, kernel_deps.commands.verify, kernel_deps.commands.download\n"
        "import kernel_deps.trust.signatures, kernel_deps.cache.installed\n"
        "print(' '.join(sorted(made)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == []


def test_a_command_line_leaves_its_objects_to_the_exit_and_a_library_call_does_not() -> None:
    # The console script's process ends once its command has: its collector runs less often
    # meanwhile, and what it made is frozen out of it, so the interpreter's last collection
    # does not walk it all. A caller running the group in its own process (click's test
    # runner) keeps its collector as it was.
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: sys.stderr.write(f'frozen={gc.get_freeze_count() > 0} {gc.get_threshold()[0]}'))\n"
        "from click.testing import CliRunner\nfrom kernel_deps.cli import main\n"
        "before = gc.get_threshold()\n"
        "result = CliRunner().invoke(main, ['--version'])\n"
        "assert result.exit_code == 0 and 'kernel-deps' in result.output, result.output\n"
        "assert gc.get_freeze_count() == 0 and gc.get_threshold() == before\n"
        "sys.argv = ['kernels', *sys.argv[1:]]\nfrom kernel_deps.cli.entry import main as command\ncommand()\n"
    )
    result = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("kernel-deps ")
    assert result.stderr.endswith("frozen=True 10000")
