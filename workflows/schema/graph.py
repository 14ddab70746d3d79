"""The step graph: which steps reach which, the shortest cycle through a step, and the
document's cycles reported at their paths."""

from __future__ import annotations

from workflows.schema.document import Document, index, join
from workflows.schema.spec import StepSpec


def cycles(dependencies: dict[str, set[str]], order: dict[str, int]) -> list[list[str]]:
    """One cycle per strongly connected group of steps, each in run order (``[a, b, a]``: b
    needs a), groups in the order of ``order`` (step name → position in the file)."""
    reachable_from = {name: reachable(name, dependencies) for name in dependencies}
    found = []
    reported: set[str] = set()
    for name in sorted(dependencies, key=order.__getitem__):
        if name in reported or name not in reachable_from[name]:
            continue
        group = {other for other in reachable_from[name] if name in reachable_from[other]}
        reported |= group
        found.append(shortest_cycle(name, dependencies, group))
    return found


def reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    """Every step reachable from ``start`` through one or more edges."""
    found: set[str] = set()
    frontier = list(edges[start])
    while frontier:
        name = frontier.pop()
        if name not in found:
            found.add(name)
            frontier.extend(edges.get(name, ()))
    return found


def shortest_cycle(start: str, dependencies: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest cycle through ``start`` in run order: ``[a, b, c, a]`` where b needs a."""
    dependents = {name: {d for d in group if name in dependencies[d]} for name in group}
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in previous:
        next_frontier = []
        for name in frontier:
            for dependent in sorted(dependents[name]):
                if dependent not in previous:
                    previous[dependent] = name
                    next_frontier.append(dependent)
        frontier = next_frontier
    cycle = [start]
    name = previous[start]
    while name != start:
        cycle.append(name)
        name = previous[name]
    cycle.append(start)
    return [cycle[0], *reversed(cycle[1:-1]), cycle[-1]]


def run_order(dependencies: dict[str, tuple[str, ...]]) -> list[str]:
    """Step names (``dependencies`` in file order, acyclic) so that each comes after what it
    depends on; among steps that could go next, the earlier in the file first."""
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(dependencies):
        name = next(
            name
            for name, needs in dependencies.items()
            if name not in placed and placed.issuperset(needs)
        )
        order.append(name)
        placed.add(name)
    return order


def check_cycles(doc: Document, steps: list[StepSpec], order: dict[str, int]) -> None:
    """Report each cycle of the steps' dependencies at its first step (its depends_on)."""
    dependencies = {
        step.name: {
            d for d in step.depends_on if isinstance(d, str) and d in order and d != step.name
        }
        for step in steps
        if isinstance(step.name, str) and order.get(step.name) is not None
    }
    for cycle in cycles(dependencies, order):
        path = index("steps", order[cycle[0]])
        if join(path, "depends_on") in doc.key_lines:
            path = join(path, "depends_on")
        doc.error(path, "cycle: " + " -> ".join(cycle))
