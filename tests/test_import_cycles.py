"""No module of gpufleet imports itself through others, package ``__init__`` files included.

import-linter's ``acyclic_siblings`` contract (pyproject.toml, ``make lint``) compares siblings:
it cannot see a cycle that runs through a package's own ``__init__`` (``gpufleet.twin`` importing
``twin.kueue``, which imports ``gpufleet.twin``). This test walks the whole module graph (grimp,
import-linter's engine; ``TYPE_CHECKING`` imports count, as they do for the contract) and names
every module of every cycle it finds.
"""

from __future__ import annotations

import grimp
import pytest


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
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
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _graph(edges: dict[str, list[str]]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in edges.items():
        graph.add_module(importer)
        for other in imported:
            graph.add_import(importer=importer, imported=other)
    return graph


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"p.a": ["p.b"], "p.b": ["p.c"], "p.c": []}, []),
        ({"p.a": ["p.b"], "p.b": ["p.a"]}, [["p.a", "p.b"]]),
        ({"p": ["p.a"], "p.a": ["p.b"], "p.b": ["p"]}, [["p", "p.a", "p.b"]]),  # through an __init__
        ({"a": ["b"], "b": ["a"], "c": ["d"], "d": ["e"], "e": ["c"]}, [["a", "b"], ["c", "d", "e"]]),
    ],
)
def test_cycles_finds_every_circle(edges: dict[str, list[str]], expected: list[list[str]]) -> None:
    assert cycles(_graph(edges)) == expected


def test_gpufleet_has_no_import_cycle() -> None:
    found = cycles(grimp.build_graph("gpufleet"))
    assert not found, "import cycles (move the shared piece down):\n" + "\n".join(" <-> ".join(c) for c in found)
