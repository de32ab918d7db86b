"""Bundles the checkout's top-level project directories into the wheel.

configs/, resources_servers/, responses_api_agents/, environment_servers/, environments/, benchmarks/ and
requirements/ stay at the top of the repository (NeMo Gym's plugin layout); a wheel carries
them as `nemo_gym_prorl/_bundled/<dir>/`, found at run time by `nemo_gym_prorl.assets`.
An editable install needs no copy: `assets.project_root()` finds the checkout itself.
Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


def _bundled_dirs() -> tuple[str, ...]:
    """The directories to bundle, as `nemo_gym_prorl.assets` (which finds them at run time) names
    them: read from its file, since the build cannot count on the package being importable."""
    path = Path(__file__).resolve().parent / "nemo_gym_prorl" / "assets.py"
    spec = importlib.util.spec_from_file_location("_prorl_assets", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.BUNDLED_DIRS)


BUNDLED_DIRS = _bundled_dirs()
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
