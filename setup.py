"""Bundles the checkout's top-level project directories into the wheel.

configs/, resources_servers/, responses_api_agents/, environments/, benchmarks/ and
requirements/ stay at the top of the repository (NeMo Gym's plugin layout); a wheel carries
them as `nemo_gym_prorl/_bundled/<dir>/`, found at run time by `nemo_gym_prorl.assets`.
An editable install needs no copy: `assets.project_root()` finds the checkout itself.
Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED_DIRS = (
    "configs",
    "resources_servers",
    "responses_api_agents",
    "environments",
    "benchmarks",
    "requirements",
)
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "outputs", "cache", "results")


class BuildPyWithBundle(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        here = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "nemo_gym_prorl" / "_bundled"
        for name in BUNDLED_DIRS:
            if not (here / name).is_dir():
                raise FileNotFoundError(
                    f"{name}/ missing from the source tree; cannot build a complete wheel"
                )
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(here / name, target / name, ignore=IGNORE)


setup(cmdclass={"build_py": BuildPyWithBundle})
