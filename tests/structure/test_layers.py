"""The rooms of the code and their order: every import points down, and no module outgrows one
job. Failure messages say how to fix."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Bottom first; a package may import the packages of lower layers only. Packages of one layer
# are rooms side by side: they do not import each other.
LAYERS = [["core"], ["teams"], ["workflows"], ["executions"], ["engine", "api", "dashboard"]]
LAYERS.append(["mantle_site"])
LAYER = {package: n for n, packages in enumerate(LAYERS) for package in packages}
ORDER = " ← ".join(", ".join(packages) for packages in LAYERS)

MAX_LINES = 400  # non-blank lines of a product module


def _modules() -> list[Path]:
    return sorted(
        path
        for package in LAYER
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    )


def _imported_packages(path: Path) -> set[str]:
    packages = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            packages |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            packages.add(node.module.partition(".")[0])
    return packages & set(LAYER)


def test_every_import_points_down():
    upward = []
    for path in _modules():
        module = str(path.relative_to(ROOT))
        own = module.partition("/")[0]
        for package in sorted(_imported_packages(path) - {own}):
            if LAYER[package] >= LAYER[own]:
                upward.append(f"{module} imports {package}")
    assert not upward, (
        f"imports that do not point down ({ORDER}): {upward}. Move the code to the lower "
        "package, or let the lower one announce what happened (a signal, like "
        "teams.signals.limit_loosened) or leave a row for it to claim (as admission leaves a "
        "pending execution for the step workers) instead of importing upward"
    )


def test_no_product_module_outgrows_one_job():
    long = {}
    for path in _modules():
        lines = sum(1 for line in path.read_text().splitlines() if line.strip())
        if lines > MAX_LINES:
            long[str(path.relative_to(ROOT))] = lines
    assert not long, (
        f"modules over {MAX_LINES} non-blank lines: {long}. Split each by job into a package "
        "of small modules (as workflows/schema/ is: spec, document, validate, graph, inputs)"
    )
