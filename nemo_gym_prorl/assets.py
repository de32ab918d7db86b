"""Where the project's non-Python files are, in a source checkout and in an installed wheel.

The repository keeps its Gym plugin root at the top level (`configs/`, `resources_servers/`,
`responses_api_agents/`, `environment_servers/`, `environments/`), with `benchmarks/` and
`requirements/` (the locks) beside it. A wheel carries the same directories under
`nemo_gym_prorl/_bundled/` (see setup.py), so nothing named `configs` lands at the top of
site-packages. Every lookup of those files goes through `project_root()`, never through paths
relative to a module.

Outputs are a different matter: commands write to the working directory (or a path the user
gives), never beside the package; `output_root()` is that default.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

# The directories a wheel bundles; a checkout has them at its top level.
BUNDLED_DIRS = (
    "configs",
    "resources_servers",
    "responses_api_agents",
    "environment_servers",
    "environments",
    "benchmarks",
    "requirements",
)
_PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLE_DIR = _PACKAGE_DIR / "_bundled"


class AssetError(RuntimeError):
    """A project file the command needs is not where a checkout or a wheel keeps it."""


@cache
def project_root() -> Path:
    """The directory holding configs/, resources_servers/, ... (also NeMo Gym's plugin root).

    A checkout (editable install) wins: its files are the ones being edited. Otherwise the
    wheel's bundle. `PRORL_PROJECT_ROOT` points elsewhere explicitly (a fork's copy).
    """
    explicit = os.environ.get("PRORL_PROJECT_ROOT")
    if explicit:
        return _checked(Path(explicit).expanduser().resolve(), "PRORL_PROJECT_ROOT")
    checkout = _PACKAGE_DIR.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "configs").is_dir():
        return checkout
    return _checked(BUNDLE_DIR, "the installed package")


def is_installed_bundle() -> bool:
    """Whether the project files are the installed wheel's (not a checkout or a fork's copy)."""
    return project_root() == BUNDLE_DIR


def _checked(root: Path, where: str) -> Path:
    missing = [name for name in ("configs", "resources_servers") if not (root / name).is_dir()]
    if missing:
        raise AssetError(
            f"{where} ({root}) has no {', '.join(missing)}/: reinstall nemo-gym-prorl "
            "(`pip install nemo-gym-prorl`) or run from a source checkout"
        )
    return root


def asset(*parts: str) -> Path:
    """A path under the project root, e.g. `asset("configs", "service")`."""
    if not parts or parts[0] not in BUNDLED_DIRS:
        raise ValueError(f"asset paths start with one of {BUNDLED_DIRS}, got {parts!r}")
    return project_root().joinpath(*parts)


def configs_dir() -> Path:
    return asset("configs")


def resources_server_dir(name: str) -> Path:
    return asset("resources_servers", name)


def benchmarks_dir() -> Path:
    return asset("benchmarks")


def lock_file(name: str) -> Path:
    """A committed lock, `requirements/<name>.lock.txt` (see `make lock`)."""
    path = asset("requirements", f"{name}.lock.txt")
    if not path.is_file():
        raise AssetError(f"lock file {path} is missing; run `make lock` in a checkout")
    return path


def output_root() -> Path:
    """Where commands write results by default: `$PRORL_OUTPUT_DIR`, else `./outputs`."""
    return Path(os.environ.get("PRORL_OUTPUT_DIR") or "outputs").expanduser().resolve()
