"""Search random small catalogues for locks the resolver gets wrong (not part of `make test`).

Each catalogue has 3 or 4 kernels with 2 or 3 of the versions 1.0.0, 2.0.0 and 3.0.0,
each version requiring some of the other kernels with a random range, and a project
requiring most of them. ``kernel_deps.resolve.resolver.resolve`` runs on it with the catalogue
held in memory (refs and kernel-depends, what the Hub index would give:
``tests/fixtures/memory_index.py``, which the resolver's case files in
``tests/unit/resolve/resolver_cases/`` use too), and every answer is judged against all possible sets
of pins:

- **unmet**: a lock where some locked kernel's kernel-depends is not met (a dependency
  missing, or locked at a version its range excludes);
- **false conflict**: a conflict reported although some set of pins meets everything
  (giving up after too many rounds included);
- **crash**: anything but a lock or a conflict (a traceback for the user).

Usage::

    .venv/bin/python tools/resolver_search.py [--seed N] [--count N] [--show N]

With ``--seed 5 --count 20000``: before the resolver checked resolvelib's answer, 17715
locked (20 of them unmet), 2142 conflicts (7 false) and 34 crashes (RecursionError
while resolvelib built its answer, and ResolutionTooDeep); now 17729 locked (none
unmet), 2162 conflicts (14 of them after too many rounds; 12 false) and no crash.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from packaging.version import Version  # noqa: E402

from resolvelib.resolvers import ResolverException  # noqa: E402

from kernel_deps.core.errors import ResolutionError  # noqa: E402
from kernel_deps.core.spec import requirement_from_value  # noqa: E402
from kernel_deps.resolve.resolver import resolve  # noqa: E402
from tests.fixtures.memory_index import CatalogueIndex  # noqa: E402

NAMES = ("org/a", "org/b", "org/c", "org/d")
VERSIONS = ("1.0.0", "2.0.0", "3.0.0")
RANGES = (">=1,<2", ">=2", "<3", ">=1", "==1.0.0", "==2.0.0", ">=3")

# kernel -> version -> [(dependency, range)]: the short form of tests.fixtures.memory_index's catalogue.
Catalogue = dict[str, dict[str, list[tuple[str, str]]]]


def random_catalogue(rng: random.Random) -> tuple[Catalogue, list[tuple[str, str]]]:
    names = NAMES[: rng.choice((3, 4))]
    catalogue: Catalogue = {}
    for name in names:
        versions = sorted(rng.sample(VERSIONS, rng.choice((2, 3))))
        catalogue[name] = {
            v: [(dep, rng.choice(RANGES)) for dep in names if dep != name and rng.random() < 0.35] for v in versions
        }
    project = [(name, ">=1") for name in names if rng.random() < 0.8]
    return catalogue, project


def meets_everything(catalogue: Catalogue, project: list[tuple[str, str]], pins: dict[str, str]) -> bool:
    wanted = [requirement_from_value(k, s) for k, s in project]
    wanted += [requirement_from_value(d, s) for k, v in pins.items() for d, s in catalogue[k][v]]
    return all(r.repo_id in pins and r.allows(Version(pins[r.repo_id])) for r in wanted)


def any_answer(catalogue: Catalogue, project: list[tuple[str, str]]) -> dict[str, str] | None:
    names = list(catalogue)
    for choice in itertools.product(*[(None, *catalogue[k]) for k in names]):
        pins = {k: v for k, v in zip(names, choice) if v is not None}
        if meets_everything(catalogue, project, pins):
            return pins
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--count", type=int, default=20000, help="catalogues to try")
    parser.add_argument("--show", type=int, default=2, help="catalogues of each finding to print")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    found: dict[str, list[str]] = {"unmet": [], "false conflict": [], "crash": []}
    locked = conflicts = gave_up = 0
    for _ in range(args.count):
        catalogue, project = random_catalogue(rng)
        if not project:
            continue
        try:
            resolution = resolve([requirement_from_value(k, s) for k, s in project], CatalogueIndex(catalogue))
        except (RecursionError, ResolverException) as exc:
            found["crash"].append(f"{catalogue} project {project}: {type(exc).__name__}")
            continue
        except ResolutionError as exc:
            conflicts += 1
            if "rounds of resolution" in exc.message:
                gave_up += 1
            if any_answer(catalogue, project) is not None:
                found["false conflict"].append(f"{catalogue} project {project}")
            continue
        locked += 1
        pins = {k: CatalogueIndex(catalogue).by_commit[c.commit][1] for k, c in resolution.pins.items()}
        if not meets_everything(catalogue, project, pins):
            found["unmet"].append(f"{catalogue} project {project} locked {pins}")
    print(f"{locked} locked, {conflicts} conflicts ({gave_up} after too many rounds); unmet: {len(found['unmet'])}, "
          f"false conflicts: {len(found['false conflict'])}, crashes: {len(found['crash'])}")  # fmt: skip
    for kind, cases in found.items():
        for case in cases[: args.show]:
            print(f"{kind}: {case}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
