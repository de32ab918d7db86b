# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The package's layers point downward and its modules form no import cycle.

    sandbox, llm -> tools -> pipeline -> agent, tasks -> service, integrations, demo -> cli

A module may import from its own layer and the layers below it, never from a layer above;
every import counts (module level, inside functions, under TYPE_CHECKING), because a lazy
import upward is still a dependency upward. Read from the source with `ast`: nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nemo_gym_prorl"
ROOT = "nemo_gym_prorl"

LAYERS: dict[str, int] = {
    "sandbox": 0,
    "llm": 0,
    "tools": 1,
    "pipeline": 2,
    "agent": 3,
    "tasks": 3,
    "service": 4,
    "integrations": 4,
    "demo": 4,
    "datasets": 4,
    "cli": 5,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every `nemo_gym_prorl...` module the file imports (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            # `from pkg import module` imports a module, not just a name
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {m for m in found if m == ROOT or m.startswith(ROOT + ".")}


Graph = dict[str, set[str]]


def graph() -> Graph:
    """Module -> the package's modules it imports."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {t for t in imports_of(path) if t in modules and t != name} for name, path in modules.items()
    }


def edges(g: Graph) -> list[tuple[str, str]]:
    return [(source, target) for source, targets in g.items() for target in sorted(targets)]


def strongly_connected(g: Graph) -> list[list[str]]:
    """Tarjan's algorithm: the groups of modules that import each other, directly or not."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in g[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            groups.append(sorted(group))

    for node in sorted(g):
        if node not in index:
            visit(node)
    return groups


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def test_every_subpackage_has_a_layer() -> None:
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages <= set(LAYERS), f"give these a layer: {sorted(subpackages - set(LAYERS))}"


def test_no_module_imports_from_a_layer_above_it() -> None:
    upward = [
        f"{source} (layer {layer(source)}) imports {target} (layer {layer(target)})"
        for source, target in edges(graph())
        if layer(source) is not None and layer(target) is not None and layer(target) > layer(source)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycles() -> None:
    g = graph()
    # A package's __init__ re-exporting its own modules is how a package is read, not a cycle
    # between two concerns: drop the edges from an __init__ down into its own package.
    for source, targets in g.items():
        if (PACKAGE.parent / Path(*source.split(".")) / "__init__.py").exists():
            targets -= {t for t in targets if t.startswith(source + ".")}
    cycles = [group for group in strongly_connected(g) if len(group) > 1]
    assert not cycles, "modules that import each other:\n" + "\n".join(", ".join(c) for c in cycles)


@pytest.mark.parametrize(
    "module", ["nemo_gym_prorl.integrations.gym.runtime", "nemo_gym_prorl.agent.handler"]
)
def test_the_checker_sees_imports(module: str) -> None:
    assert graph()[module]
