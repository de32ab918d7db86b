# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The product's layers point downward, its modules form no import cycle, and nothing dodges it.

    registry, assets, nemo_gym_prorl/__init__           the package's own top-level modules
      -> sandbox | llm -> tools -> pipeline -> agent, tasks
      -> service, integrations, demo, datasets
      -> cli | resources_servers/* | responses_api_agents/*

The product is `nemo_gym_prorl/`, `resources_servers/` and `responses_api_agents/` (their tests
directories aside). A unit (a subpackage, a top-level module, one Gym server) may import from
itself and the layers below; never from a layer above; from its own layer only where
`SAME_LAYER` allows it, and never from `benchmarks/` or `tests/`, which may import anything.

What counts as an import:
- every `import` statement (module level, inside functions, under TYPE_CHECKING): a lazy import
  upward is still a dependency upward;
- a string literal in product code that is an import target, `package.module:attr`, or a dotted
  module name of a known root (`"nemo_gym_prorl.tasks.math:MathTask"`, `"-m",
  "nemo_gym_prorl.cli"`): whoever uses the string imports (or runs) what it names;
- an import target in a config file's values (not its comments), counted as an import by the
  layer that reads the config, since that layer resolves it (`CONFIG_READERS`);
- a benchmark helper by its bare module name (`import ray_local`): benchmarks run with
  `benchmarks/` on `sys.path`, so that is how they are imported.

`prorl bench` (cli) runs benchmark files as programs, by path, as `python benchmarks/x.py` would;
no product module imports what they define. Read from the source with `ast` and YAML: nothing is
imported. Every checker function takes text or a tree, so the tests below plant violations and
watch them fail.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "nemo_gym_prorl"
ROOT = "nemo_gym_prorl"
GYM_SERVERS = ("resources_servers", "responses_api_agents")
PRODUCT_DIRS = (ROOT, *GYM_SERVERS)

LAYERS: dict[str, int] = {
    # the package's own top-level modules: the bottom, importable by every layer
    "__init__": -1,
    "registry": -1,
    "assets": -1,
    "files": -1,
    "provenance": -1,
    "intervals": -1,
    "latency": -1,
    "loop_monitor": 0,  # how late an event loop runs: the service's and each worker process's
    "retry": -1,
    "process_identity": -1,  # a process named for good: pid and start ticks
    "rollouts": -1,
    "serving": -1,
    "sandbox": 0,
    "llm": 0,
    "tools": 1,
    "server_paths": 1,  # what error answers must not name: the sandbox root, PRORL_HOME, the venv
    "pipeline": 2,
    "agent": 3,
    "tasks": 3,
    "service": 4,
    "integrations": 4,
    "demo": 4,
    "datasets": 4,
    "training": 4,
    "cli": 5,
    # Gym servers sit beside the cli: nothing in the package imports them (each is its own unit)
    "resources_servers": 5,
    "responses_api_agents": 5,
}

# Imports within one layer are refused unless listed here (importer, imported): why each may.
SAME_LAYER: dict[tuple[str, str], str] = {
    ("agent", "tasks"): "the agent runs tasks; a task knows nothing of the loop that drives it",
    ("integrations", "service"): "every transport mounts the one stack the service builds",
    ("demo", "service"): "the demo drives the service end to end",
    ("demo", "integrations"): "the demo shows the Gym contract's view of its rollouts",
    ("demo", "datasets"): "the demo submits rows built from the datasets",
    (
        "demo",
        "training",
    ): "the demo serves a trained policy as `prorl train` trained it, on its held-out tasks",
    ("training", "datasets"): "training draws its task rows (train and held-out) from the datasets",
    ("training", "service"): "training drives its rollouts and evaluations through the one service stack",
    (
        "training",
        "integrations",
    ): "training runs TRL's trainer programs, with the jobs and events they read and write",
    ("provenance", "assets"): "a results file goes under the project's benchmarks/results",
    ("rollouts", "intervals"): "a rollout summary gives its mean reward's interval",
}
# Where SAME_LAYER allows only some of a unit's modules: exactly these (and the names they define).
SAME_LAYER_MODULES: dict[tuple[str, str], frozenset[str]] = {
    ("training", "integrations"): frozenset(
        {
            "nemo_gym_prorl.integrations.trl.jobs",  # the programs' jobs, events and output paths
            "nemo_gym_prorl.integrations.trl.sft",  # the programs, run by module name
            "nemo_gym_prorl.integrations.trl.grpo",
            "nemo_gym_prorl.integrations.trl.merge",
        }
    ),
}
# Not layered: they may import anything, and nothing in the product imports them.
OUTSIDE = {"benchmarks": "benchmarks/", "tests": "tests/ (test support is imported as `support`)"}

# Which layer reads (and so resolves the import targets in) each kind of config file.
CONFIG_READERS: dict[str, str] = {
    "configs/service/**/*.yaml": "service",  # ServeConfig; task handlers resolved by the service
    "configs/train/**/*.yaml": "training",  # TrainConfig (`prorl train`)
    "configs/harness/**/*.yaml": "agent",  # mini-swe-agent's own config files, found by agent.harness
    "configs/gym/**/*.yaml": "integrations",  # ng_run compositions, read into the Gym servers' settings
    "configs/nemo_rl/**/*.yaml": "integrations",  # NeMo RL recipes: the Gym agent and nemo_rl hooks
    "resources_servers/*/configs/**/*.yaml": "integrations",  # parsed by integrations.gym
    "responses_api_agents/*/configs/**/*.yaml": "integrations",  # ProRLAgentSettings
    "environments/**/*.yaml": "integrations",  # Gym's catalog entries for the same servers
}

# Violations found and left to a move in code other work owns: each entry must still occur
# (fixing one fails the test until it is removed here), and nothing else may be added quietly.
KNOWN_VIOLATIONS: dict[str, str] = {}

DOTTED_ROOTS = frozenset({ROOT, *GYM_SERVERS, "benchmarks", "tests"})
_TARGET = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?::[A-Za-z_][\w.]*)?")
_TOKEN = re.compile(r"[A-Za-z_][\w.]*(?::[A-Za-z_][\w.]*)?")


def benchmark_modules(root: Path = REPO) -> frozenset[str]:
    """The bare names benchmark helpers are imported by (`ray_local`, `tool_roundtrips`, ...)."""
    return frozenset(p.stem for p in (root / "benchmarks").glob("*.py"))


BENCHMARKS = benchmark_modules()


# -- what a file imports ----------------------------------------------------------------------


def string_target(value: str) -> str | None:
    """The module a whole string names as an import target (`pkg.mod:attr`) or as a dotted module
    of a known root (`nemo_gym_prorl.cli`); None for any other text. A bare dotted name outside
    those roots (`provenance.json`, `os.path`) is a name, not a target."""
    value = value.rstrip(".")
    if not _TARGET.fullmatch(value):
        return None
    module, colon, _ = value.partition(":")
    if colon or ("." in module and module.split(".")[0] in DOTTED_ROOTS):
        return module
    return None


@functools.cache  # several rules read the same tree: each file is parsed once
def python_imports(text: str, module: str, *, is_package: bool = False) -> frozenset[str]:
    """Every module the source imports (relative imports resolved) or names by import target."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
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
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = string_target(node.value)
            if named:
                found.add(named)
    return frozenset(found)


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)


def config_imports(text: str) -> set[str]:
    """Modules named by import targets anywhere in a YAML file's values, including inside longer
    strings (`python -m nemo_gym_prorl.cli ...`, `key=pkg.mod:factory`); comments are not read."""
    found: set[str] = set()
    for document in yaml.safe_load_all(text):
        for value in _strings(document):
            found.update(m for token in _TOKEN.findall(value) if (m := string_target(token)))
    return found


# -- where a module sits ----------------------------------------------------------------------


def unit(module: str, benchmarks: frozenset[str] = BENCHMARKS) -> str | None:
    """The unit the layers rule over, or None for a module outside the repository (third party)."""
    head, _, rest = module.partition(".")
    first = rest.split(".")[0]
    if head == ROOT:
        return first or "__init__"
    if head in GYM_SERVERS:
        return f"{head}.{first}" if first else head
    if head == "benchmarks" or head in benchmarks:
        return "benchmarks"
    if head in ("tests", "support"):
        return "tests"
    return None


def layer(unit_name: str) -> int | None:
    return LAYERS.get(unit_name.split(".")[0] if unit_name.startswith(GYM_SERVERS) else unit_name)


@dataclass(frozen=True)
class Edge:
    where: str  # the importing module, or the config file (and its reader)
    source: str  # the importing unit
    target: str  # the imported module

    @property
    def key(self) -> str:
        return f"{self.where.split(' ')[0]} -> {self.target}"


def violation(edge: Edge, benchmarks: frozenset[str] = BENCHMARKS) -> str | None:
    """Why the edge breaks the layering, or None if it does not."""
    target = unit(edge.target, benchmarks)
    if target is None or target == edge.source:
        return None
    if target in OUTSIDE:
        return f"{edge.where} imports {edge.target}: nothing in the product imports {OUTSIDE[target]}"
    low, high = layer(target), layer(edge.source)
    if low is None or high is None:
        return f"{edge.where} imports {edge.target}: give {edge.source!r} and {target!r} a layer"
    if low > high:
        return f"{edge.where} ({edge.source}, layer {high}) imports {edge.target} (layer {low}): upward"
    if low == high and (edge.source, target) not in SAME_LAYER:
        return f"{edge.where} ({edge.source}) imports {edge.target} ({target}): same layer, not in SAME_LAYER"
    allowed = SAME_LAYER_MODULES.get((edge.source, target))
    if low == high and allowed is not None and not _among(edge.target, allowed):
        return f"{edge.where} ({edge.source}) imports {edge.target}: same layer, not in SAME_LAYER_MODULES"
    return None


def _among(module: str, modules: Iterable[str]) -> bool:
    """Whether `module` is one of `modules` or a name inside one (`pkg.mod.Name`)."""
    return any(module == m or module.startswith(m + ".") for m in modules)


def violations(edges: Iterable[Edge], benchmarks: frozenset[str] = BENCHMARKS) -> dict[str, str]:
    """Edge key -> why, for every edge that breaks the layering."""
    found = {}
    for edge in edges:
        why = violation(edge, benchmarks)
        if why:
            found[edge.key] = why
    return found


# -- the repository ---------------------------------------------------------------------------


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_files(root: Path = REPO) -> Iterator[Path]:
    """The product's Python files; tests directories inside Gym servers are tests."""
    for directory in PRODUCT_DIRS:
        for path in sorted((root / directory).rglob("*.py")):
            if "tests" not in path.relative_to(root).parts:
                yield path


def config_files(root: Path = REPO) -> Iterator[tuple[Path, str]]:
    for pattern, reader in CONFIG_READERS.items():
        for path in sorted(root.glob(pattern)):
            yield path, reader


@functools.cache
def repository_edges(root: Path = REPO) -> tuple[Edge, ...]:
    benchmarks = benchmark_modules(root)
    edges = []
    for path in product_files(root):
        name = module_name(path, root)
        source = unit(name, benchmarks)
        assert source is not None
        text = path.read_text()
        for target in python_imports(text, name, is_package=path.name == "__init__.py"):
            edges.append(Edge(name, source, target))
    for path, reader in config_files(root):
        for target in config_imports(path.read_text()):
            edges.append(Edge(f"{path.relative_to(root)} (read by {reader})", reader, target))
    return tuple(edges)


def repository_violations(root: Path = REPO) -> dict[str, str]:
    return violations(repository_edges(root), benchmark_modules(root))


# -- the rules, on this repository ------------------------------------------------------------


def test_every_unit_of_the_product_has_a_layer() -> None:
    units = {unit(module_name(path)) or "" for path in product_files()}
    assert {"registry", "assets", "__init__", "cli", "resources_servers.prorl_math"} <= units
    unlayered = sorted(u for u in units if layer(u) is None)
    assert not unlayered, f"give these a layer in LAYERS: {unlayered}"


def test_no_product_module_or_config_imports_upward_across_a_layer_or_outside_the_product() -> None:
    found = repository_violations()
    new = {key: why for key, why in found.items() if key not in KNOWN_VIOLATIONS}
    assert not new, "\n".join(new.values())
    fixed = set(KNOWN_VIOLATIONS) - set(found)
    assert not fixed, f"fixed, so remove from KNOWN_VIOLATIONS: {sorted(fixed)}"


def test_every_module_a_narrowed_allowance_names_is_still_imported() -> None:
    """SAME_LAYER_MODULES lists exactly what is imported: a module no longer needed leaves it."""
    edges = repository_edges()
    unused = [
        module
        for (source, target), modules in SAME_LAYER_MODULES.items()
        for module in sorted(modules)
        if not any(e.source == source and _among(e.target, [module]) for e in edges)
    ]
    assert not unused, f"no longer imported, so remove from SAME_LAYER_MODULES: {unused}"


def test_every_config_file_has_a_reader() -> None:
    read = {path for path, _ in config_files()}
    configs = {
        p
        for directory in ("configs", "environments", *GYM_SERVERS)
        for p in (REPO / directory).rglob("*.y*ml")
        if "tests" not in p.relative_to(REPO).parts and "data" not in p.relative_to(REPO).parts
    }
    assert configs and configs <= read, f"say which layer reads: {sorted(map(str, configs - read))}"


def _defines(path: Path, name: str) -> bool:
    """Whether a module binds `name` at its top level (def, class, assignment or import)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [t.id for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        else:
            continue
        if name in bound:
            return True
    return False


def source_of(module: str, root: Path = REPO) -> Path | None:
    """The file of a repository module: the package, a Gym server, tests/support, a benchmark."""
    parts = module.split(".")
    base = {"support": root / "tests"}.get(parts[0], root)
    if parts[0] in benchmark_modules(root):
        base = root / "benchmarks"
    for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def missing_targets(text: str, root: Path = REPO) -> list[str]:
    """The import targets (`module:attr`, anywhere in the text) of this repository's modules that
    name no module, or a name the module does not define."""
    missing = []
    for token in sorted(set(_TOKEN.findall(text))):
        module, colon, attr = token.partition(":")
        if not colon or unit(module, benchmark_modules(root)) is None:
            continue
        source = source_of(module, root)
        if source is None or not _defines(source, attr.split(".")[0]):
            missing.append(token)
    return missing


def test_every_import_target_in_the_product_and_its_configs_names_something_that_exists() -> None:
    """A string a move left behind fails here, not in the first run that reads it."""
    files = [*product_files(), *(path for path, _ in config_files())]
    missing = [f"{p.relative_to(REPO)}: {t}" for p in files for t in missing_targets(p.read_text())]
    assert not missing, "\n".join(missing)


def graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {
            t
            for t in python_imports(path.read_text(), name, is_package=path.name == "__init__.py")
            if t in modules and t != name
        }
        for name, path in modules.items()
    }


def strongly_connected(g: dict[str, set[str]]) -> list[list[str]]:
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


def test_no_import_cycles() -> None:
    g = graph()
    # A package's __init__ re-exporting its own modules (or naming them in a table of import
    # targets) is how a package is read, not a cycle between two concerns: drop the edges from
    # an __init__ down into its own package.
    for source, targets in g.items():
        if (PACKAGE.parent / Path(*source.split(".")) / "__init__.py").exists():
            targets -= {t for t in targets if t.startswith(source + ".")}
    cycles = [group for group in strongly_connected(g) if len(group) > 1]
    assert not cycles, "modules that import each other:\n" + "\n".join(", ".join(c) for c in cycles)


@pytest.mark.parametrize(
    ("where", "target"),
    [
        ("nemo_gym_prorl.agent.handler", "nemo_gym_prorl.tasks.base"),  # an import statement
        ("nemo_gym_prorl.tasks", "nemo_gym_prorl.tasks.math"),  # a table of import targets
        ("configs/service/tasks/default.yaml (read by service)", "nemo_gym_prorl.agent.factory"),
        ("nemo_gym_prorl.service.app", "nemo_gym_prorl"),  # the package's own top-level module
    ],
)
def test_the_checker_sees_every_kind_of_import_in_this_repository(where: str, target: str) -> None:
    assert any(e.where == where and e.target == target for e in repository_edges())


# -- the checker, on planted violations -------------------------------------------------------


def reader_of(config: str) -> str | None:
    """The layer that reads a config file (repository-relative path)."""
    return next(
        (r for pattern, r in CONFIG_READERS.items() if PurePosixPath(config).full_match(pattern)), None
    )


def check_text(where: str, text: str) -> dict[str, str]:
    """The violations in one file's text: a config (by its path) or a module (by its name)."""
    if where.endswith(".yaml"):
        reader = reader_of(where) or ""
        return violations(Edge(f"{where} (read by {reader})", reader, t) for t in config_imports(text))
    return violations(Edge(where, unit(where) or "", t) for t in python_imports(text, where))


UP, SAME, OUT = "upward", "same layer", "nothing in the product imports"


@pytest.mark.parametrize(
    ("where", "text", "why"),
    [
        # upward, in every form an import takes
        ("nemo_gym_prorl.sandbox.planted", "from nemo_gym_prorl.tools import dispatch\n", UP),
        ("nemo_gym_prorl.sandbox.planted", "import nemo_gym_prorl.pipeline.engine\n", UP),
        ("nemo_gym_prorl.sandbox.planted", "def later():\n    from nemo_gym_prorl.service import app\n", UP),
        (
            "nemo_gym_prorl.sandbox.planted",
            "if TYPE_CHECKING:\n    from nemo_gym_prorl.agent import loop\n",
            UP,
        ),
        ("nemo_gym_prorl.sandbox.planted", "from ..tools import dispatch\n", UP),  # relative
        ("nemo_gym_prorl.sandbox.planted", "HANDLER = 'nemo_gym_prorl.tasks.math:MathTask'\n", UP),
        ("nemo_gym_prorl.sandbox.planted", "CMD = ['python', '-m', 'nemo_gym_prorl.cli']\n", UP),
        # within one layer, where SAME_LAYER does not allow it
        ("nemo_gym_prorl.llm.planted", "from nemo_gym_prorl.sandbox import open_sandbox\n", SAME),
        ("nemo_gym_prorl.sandbox.planted", "from nemo_gym_prorl.llm.records import ToolCall\n", SAME),
        ("nemo_gym_prorl.tasks.planted", "from nemo_gym_prorl.agent.loop import run_agent\n", SAME),
        ("nemo_gym_prorl.service.planted", "from nemo_gym_prorl.integrations.gym import runtime\n", SAME),
        ("nemo_gym_prorl.datasets.planted", "from nemo_gym_prorl.demo import report\n", SAME),
        ("resources_servers.prorl_math.app", "from resources_servers.prorl_code.app import X\n", SAME),
        ("nemo_gym_prorl.cli.planted", "from responses_api_agents.prorl_agent.app import Agent\n", SAME),
        ("nemo_gym_prorl.registry", "from nemo_gym_prorl.assets import asset\n", SAME),
        # within one layer, to a module its SAME_LAYER_MODULES allowance does not list
        (
            "nemo_gym_prorl.training.planted",
            "from nemo_gym_prorl.integrations.trl.fields import to_fields\n",
            SAME,
        ),
        ("nemo_gym_prorl.training.planted", "from nemo_gym_prorl.integrations.gym import launcher\n", SAME),
        # benchmarks/ and tests/, by package name, bare helper name or import target
        ("nemo_gym_prorl.pipeline.planted", "import ray_local\n", OUT),
        ("nemo_gym_prorl.tools.planted", "from tool_roundtrips import roundtrip\n", OUT),
        ("nemo_gym_prorl.llm.planted", "def f():\n    import balancer_sim\n", OUT),
        ("resources_servers.prorl_math.app", "SIM = 'balancer_sim:simulate'\n", OUT),
        ("responses_api_agents.prorl_agent.app", "import benchmarks.bench_real\n", OUT),
        ("nemo_gym_prorl.cli.planted", "from provenance import main\n", OUT),
        ("nemo_gym_prorl.service.planted", "from support.scripted_stages import build_scripted\n", OUT),
        # config strings, held to the rules of the layer that reads them
        ("configs/service/tasks/planted.yaml", "mine:\n  handler: nemo_gym_prorl.cli.main:main\n", UP),
        ("configs/gym/planted.yaml", "agent:\n  runner: nemo_gym_prorl.cli.gym:up\n", UP),
        ("environments/x/config.yaml", "cmd: python -m nemo_gym_prorl.cli model serve --port 8000\n", UP),
        ("configs/service/serve.yaml", "hooks: [ray_local:start_cluster]\n", OUT),
        ("configs/service/tasks/t.yaml", "x: {handler: support.scripted_stages:build_scripted}\n", OUT),
        ("configs/nemo_rl/planted.yaml", "sampler:\n  target: nemo_gym_prorl.demo.report:Report\n", SAME),
    ],
)
def test_a_planted_violation_fails(where: str, text: str, why: str) -> None:
    found = check_text(where, text)
    assert found and all(why in w for w in found.values()), found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("nemo_gym_prorl.agent.planted", "from nemo_gym_prorl.tasks.base import Task\n"),
        ("nemo_gym_prorl.integrations.planted", "from nemo_gym_prorl.service.wiring import build\n"),
        ("nemo_gym_prorl.training.planted", "from nemo_gym_prorl.integrations.trl.jobs import GrpoJob\n"),
        ("nemo_gym_prorl.training.planted", "PROGRAM = 'nemo_gym_prorl.integrations.trl.grpo'\n"),
        ("nemo_gym_prorl.sandbox.planted", "from nemo_gym_prorl.registry import Registry\n"),
        ("nemo_gym_prorl.tasks.planted", "T = 'nemo_gym_prorl.sandbox.factory:open_sandbox'\n"),
        ("nemo_gym_prorl.llm.planted", "import httpx\nNAME = 'provenance.json'\nDOC = 'see ray_local'\n"),
    ],
)
def test_downward_and_allowed_imports_pass(module: str, source: str) -> None:
    assert not check_text(module, source)


@pytest.mark.parametrize(
    "text",
    [
        "target: nemo_gym_prorl.integrations.nemo_rl_sampler:ZeroVarianceSkippingSampler\n",  # moved
        "handler: nemo_gym_prorl.agent.factory:no_such_handler\n",
        "hooks: [support.scripted_stages:gone]\n",
    ],
)
def test_a_planted_stale_import_target_is_found(text: str) -> None:
    assert missing_targets(text) == [text.split(": ")[1].strip("[]\n")]
    assert not missing_targets("handler: nemo_gym_prorl.agent.factory:domain_handler\n")


def test_comments_in_configs_are_prose_not_imports() -> None:
    text = (
        "# defaults of nemo_gym_prorl.cli.main:main\nhandler: nemo_gym_prorl.agent.factory:domain_handler\n"
    )
    assert config_imports(text) == {"nemo_gym_prorl.agent.factory"}
    assert not check_text("configs/service/tasks/planted.yaml", text)


def test_the_whole_tree_scan_finds_planted_violations(tmp_path: Path) -> None:
    """Files in a tree are found and read: an upward import, an upward config string, a benchmark
    helper imported by the package, and a Gym server's test importing anything (allowed)."""
    files = {
        "nemo_gym_prorl/__init__.py": "",
        "nemo_gym_prorl/sandbox/__init__.py": "",
        "nemo_gym_prorl/sandbox/bad.py": "from nemo_gym_prorl.tools import dispatch\n",
        "nemo_gym_prorl/tools/__init__.py": "",
        "nemo_gym_prorl/tools/dispatch.py": "import ray_local\n",
        "resources_servers/prorl_x/app.py": "from nemo_gym_prorl.tools import dispatch\n",
        "resources_servers/prorl_x/tests/test_app.py": "import ray_local\n",
        "configs/service/tasks/bad.yaml": "mine:\n  handler: nemo_gym_prorl.cli.main:main\n",
        "benchmarks/ray_local.py": "from nemo_gym_prorl.cli import main\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert set(repository_violations(tmp_path)) == {
        "nemo_gym_prorl.sandbox.bad -> nemo_gym_prorl.tools",
        "nemo_gym_prorl.sandbox.bad -> nemo_gym_prorl.tools.dispatch",
        "nemo_gym_prorl.tools.dispatch -> ray_local",
        "configs/service/tasks/bad.yaml -> nemo_gym_prorl.cli.main",
    }
