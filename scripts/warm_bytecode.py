"""Byte-compile what the project venv's commands, servers and tests import, by importing it.

`scripts/bootstrap.sh` runs this once after installing the lock, with PYTHONDONTWRITEBYTECODE
unset, instead of compiling all of site-packages at install: the venv holds about 27,000 modules
(litellm, ray, sympy, pandas, mlflow, ...) of which the project imports about a sixth, and
compiling them all took 65 s of the 80 s set-up on two cores, against 6 s for the install and
about 25 s for this. What is imported later and not listed here is compiled on first use
(`make` runs with PYTHONDONTWRITEBYTECODE unset).

Its output is the SyntaxWarnings of dependencies (cellpylib's invalid escape sequences), silenced
here once so that a user's first command does not print them; an import that fails is reported
and does not fail the set-up (a missing module is `uv pip check`'s business, just before).
"""

from __future__ import annotations

import compileall
import importlib
import importlib.util
import multiprocessing
import pkgutil
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# Imported inside functions of the package, its servers or its test suite, so not reached by
# importing every module of nemo_gym_prorl, and used by most runs. What one kind of rollout alone
# imports (mini-swe-agent and litellm, the OpenAI Agents SDK, swebench's grader) is left to its
# first use.
LAZY_IMPORTS = (
    "aiohttp",
    "datasets",
    "fastapi",
    "hydra",
    "matplotlib.pyplot",
    "nemo_gym.base_resources_server",
    "nemo_gym.base_responses_api_agent",
    "nemo_gym.base_responses_api_model",
    "nemo_gym.global_config",
    "nemo_gym.rollout_correlation",
    "nemo_gym.rollout_observability",
    "nemo_gym.server_utils",
    "omegaconf",
    "openai",
    "ray",
    "reasoning_gym",
    "uvicorn",
    # the test suite (the dev extra)
    "hypothesis",
    "pytest",
    "pytest_asyncio",
    "pytest_timeout",
    "schemathesis",
    "xdist.plugin",
)
# Compiled whole, its warnings silenced: reasoning_gym imports its modules one task at a time.
WHOLE_PACKAGES = ("cellpylib",)
SKIPPED_SUFFIXES = ("__main__",)  # importing it runs the CLI


def import_quietly(name: str, failed: list[str]) -> None:
    try:
        importlib.import_module(name)
    except BaseException as exc:  # a module that exits (SystemExit) or fails on import is only reported
        failed.append(f"{name}: {type(exc).__name__}: {exc}"[:200])


def package_modules(package: str) -> list[str]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    return [
        info.name
        for info in pkgutil.walk_packages(spec.submodule_search_locations, f"{package}.")
        if not info.name.endswith(SKIPPED_SUFFIXES)
    ]


def warm(shard: str) -> list[str]:
    """Import one shard; returns what failed to import."""
    warnings.simplefilter("ignore")
    failed: list[str] = []
    if shard == "package":
        import_quietly("nemo_gym_prorl", failed)
        for name in package_modules("nemo_gym_prorl"):
            import_quietly(name, failed)
    else:
        for name in LAZY_IMPORTS:
            import_quietly(name, failed)
        compile_whole_packages()
    return failed


def compile_whole_packages() -> None:
    """Every module of WHOLE_PACKAGES compiled, printing nothing (their SyntaxWarnings included)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for package in WHOLE_PACKAGES:
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.origin:
                compileall.compile_dir(Path(spec.origin).parent, quiet=2)


def main() -> int:
    # Two processes, one per shard: the two cores of a small machine both compile. A module both
    # import may be compiled twice; Python writes each .pyc atomically.
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        failed = [line for lines in pool.map(warm, ("package", "dependencies")) for line in lines]
    # The TRL trainer modules import torch, which only the model venv has; its Python (3.11)
    # runs them and keeps bytecode of its own.
    for line in failed:
        if not line.startswith("nemo_gym_prorl.integrations.trl."):
            print(f"[setup] note: not byte-compiled ahead: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
