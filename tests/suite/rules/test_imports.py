"""The test-suite's own import rule: shared helpers live in tests/fixtures, never in a test file.

A test file that imports another loads the other's module (its imports, its fixtures) with
it, and hides a shared helper where nobody looks for one. Each file is read with
:mod:`ast`, so every import counts, one inside a function included.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def imported_test_modules(path: Path) -> list[str]:
    """``line: module`` for each test module (``tests.test_*``) that ``path`` imports."""
    package = ".".join(path.relative_to(TESTS.parent).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            # "from tests import test_x" and "from . import test_x" name the module in the alias.
            modules = [module, *(f"{module}.{alias.name}" for alias in node.names if module == "tests")]
        else:
            continue
        found += [f"{node.lineno}: {m}" for m in modules if m.split(".")[0] == "tests" and _is_test_module(m)]
    return found


def _is_test_module(module: str) -> bool:
    parts = module.split(".")
    return len(parts) >= 2 and parts[-1].startswith("test_")


def test_no_test_file_imports_another_test_file() -> None:
    # The fixtures and conftest.py too: a helper moved there must not bring a test file along.
    paths = sorted(p for p in TESTS.rglob("test_*.py") if "fixtures" not in p.parts) + [TESTS / "conftest.py", *sorted((TESTS / "fixtures").rglob("*.py"))]
    found = {str(path.relative_to(TESTS)): imported_test_modules(path) for path in paths}
    assert {name: imports for name, imports in found.items() if imports} == {}, (
        "move the helper into a module of tests/fixtures/ and import it from there"
    )
