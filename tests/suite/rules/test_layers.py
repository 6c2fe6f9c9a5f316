"""The package's layering: every module imports only from its own layer or a lower one, with no cycles.

The layers, top to bottom, are the table under "## Layers" in docs/architecture.md; this test
reads that table, so the drawing and the check are one. Every import of kernel_deps in
every module under src/kernel_deps counts, at module top and inside functions; imports
under ``if TYPE_CHECKING:`` are for annotations only and are left out.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE_DIR = ROOT / "src" / "kernel_deps"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PKG = "kernel_deps"


@dataclass(frozen=True)
class Import:
    importer: str  # the module that imports
    imported: str  # the kernel_deps module it imports
    where: str  # file:line of the import statement


def module_names() -> dict[str, Path]:
    """Every module under src/kernel_deps, by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def layer_table() -> list[tuple[str, list[str]]]:
    """(layer, the modules and packages in it), top to bottom, from docs/architecture.md."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or cells[0] in ("layer", "") or set(cells[0]) <= {"-", " "}:
            continue
        rows.append((cells[0], re.findall(r"`(kernel_deps(?:\.\w+)*)`", cells[1])))
    return rows


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int | None:
    """The index of ``module``'s layer (0 is the top): its longest entry in the table.

    An entry names a module, or a package and everything in it; the package ``kernel_deps``
    itself names only its ``__init__.py``, so a new module is never placed by accident.
    """
    best: tuple[int, int] | None = None
    for index, (_, entries) in enumerate(table):
        for entry in entries:
            if module == entry or (entry != PKG and module.startswith(entry + ".")):
                if best is None or len(entry) > best[0]:
                    best = (len(entry), index)
    return None if best is None else best[1]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The kernel_deps modules ``module`` imports (``from kernel_deps.x import y`` counts as
    ``kernel_deps.x.y`` when that is a module), outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    where = path.relative_to(ROOT).as_posix()
    found: list[Import] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PKG or alias.name.startswith(PKG + "."):
                    found.append(Import(module, alias.name, f"{where}:{node.lineno}"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base == PKG or base.startswith(PKG + "."):
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    found.append(Import(module, target if target in modules else base, f"{where}:{node.lineno}"))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def all_imports() -> tuple[dict[str, Path], list[Import]]:
    modules = module_names()
    found = [imp for name, path in modules.items() for imp in imports_of(name, path, modules)]
    return modules, found


def test_every_module_has_a_layer_in_the_architecture_table() -> None:
    table = layer_table()
    assert [layer for layer, _ in table][:1] == ["edge"] and table[-1][0] == "core", table
    unplaced = [name for name in module_names() if layer_of(name, table) is None]
    assert not unplaced, (
        f"no layer for {', '.join(unplaced)}: add each to the table under '## Layers' in docs/architecture.md"
    )


def test_modules_import_only_from_their_own_layer_or_lower() -> None:
    table = layer_table()
    modules, found = all_imports()
    upward = []
    for imp in found:
        mine, theirs = layer_of(imp.importer, table), layer_of(imp.imported, table)
        if mine is not None and theirs is not None and theirs < mine:
            upward.append(
                f"{imp.where}: {imp.importer} (layer {table[mine][0]}) imports {imp.imported} "
                f"(layer {table[theirs][0]}, higher)"
            )
    assert not upward, "imports from a higher layer:\n" + "\n".join(dict.fromkeys(upward))


def test_no_module_imports_itself_back_through_others() -> None:
    modules, found = all_imports()
    graph: dict[str, dict[str, str]] = {name: {} for name in modules}
    for imp in found:
        if imp.imported in graph and imp.imported != imp.importer:
            graph[imp.importer].setdefault(imp.imported, imp.where)
    cycles = [cycle for cycle in _strongly_connected(graph) if len(cycle) > 1]
    described = []
    for cycle in cycles:
        path = _a_cycle_through(cycle, graph)
        described.append(" -> ".join(f"{a} ({graph[a][b]})" for a, b in zip(path, path[1:])) + f" -> {path[-1]}")
    assert not described, "import cycles:\n" + "\n".join(described)


# The command line: the only package that may import ``kernel_deps.commands`` (its verbs) or itself.
COMMAND_LINE = f"{PKG}.cli"


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_only_the_command_line_imports_the_commands() -> None:
    # A command module is one verb composing the engines below it (fetch, checks, resolve, lock):
    # no other module, the loader and the build hooks included, reaches into a verb, and no verb
    # imports another verb.
    _, found = all_imports()
    commands = f"{PKG}.commands"
    reaching = [
        f"{imp.where}: {imp.importer} imports {imp.imported}"
        for imp in found
        if _in(imp.imported, commands) and not _in(imp.importer, COMMAND_LINE) and imp.importer != commands
        and not (_in(imp.importer, commands) and imp.imported == commands)
    ]  # fmt: skip
    assert not reaching, "modules outside the command line import kernel_deps.commands:\n" + "\n".join(reaching)


def test_nothing_outside_the_command_line_imports_it() -> None:
    # click, the renderers and the verbs' options are the edge's: the loader, the build hooks and
    # every engine return data and raise errors, and never reach up into the command line.
    _, found = all_imports()
    reaching = [f"{imp.where}: {imp.importer} imports {imp.imported}" for imp in found
                if _in(imp.imported, COMMAND_LINE) and not _in(imp.importer, COMMAND_LINE)]  # fmt: skip
    assert not reaching, "modules outside the command line import kernel_deps.cli:\n" + "\n".join(reaching)


def test_every_module_is_described_in_the_architecture_page() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = []
    for name, path in module_names().items():
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if path.name == "__init__.py" and len(body) <= 1 and path.parent != PACKAGE_DIR:
            continue  # a layer's package holding only its docstring: the layer's heading describes it
        relative = path.relative_to(PACKAGE_DIR).as_posix()
        wanted = relative.removesuffix("__init__.py") if relative != "__init__.py" else relative
        if f"`{wanted}`" not in text:
            missing.append(f"{name} (`{wanted}`)")
    assert not missing, "not described in docs/architecture.md: " + ", ".join(missing)


def _strongly_connected(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _a_cycle_through(component: list[str], graph: dict[str, dict[str, str]]) -> list[str]:
    """One closed path inside ``component``, from its first module back to it (breadth first)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in graph[node]:
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return component + [component[0]]
