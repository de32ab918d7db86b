"""The project venv is uv.lock, exactly: same versions, `pip check` clean, uv at its pinned version."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.llm.embedded.setup import uv_binary

ROOT = project_root()
pytestmark = pytest.mark.skipif(
    not (ROOT / "uv.lock").is_file(), reason="uv.lock lives in a source checkout; this is an installed wheel"
)


def _python_version_override() -> list[str]:
    # nemo-gym declares >=3.13.14; scripts/bootstrap.sh installs with this override on older 3.13
    return ["--python-version", "3.13.14"] if sys.version_info < (3, 13, 14) else []


def lock_versions() -> dict[str, str]:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return {p["name"]: p["version"] for p in lock["package"] if "version" in p}


def test_pip_check_is_clean() -> None:
    out = subprocess.run(
        [uv_binary(), "pip", "check", "--python", sys.executable, *_python_version_override()],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "All installed packages are compatible" in out.stdout + out.stderr


def test_uv_is_the_version_uv_lock_pins() -> None:
    version = subprocess.run([uv_binary(), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.split()[1] == lock_versions()["uv"]


def test_every_installed_package_is_at_its_locked_version() -> None:
    out = subprocess.run(
        [uv_binary(), "pip", "list", "--format", "json", "--python", sys.executable],
        capture_output=True,
        text=True,
        check=True,
    )

    installed = {re.sub(r"[-_.]+", "-", p["name"]).lower(): p["version"] for p in json.loads(out.stdout)}
    locked = lock_versions()
    assert installed.keys() == locked.keys(), installed.keys() ^ locked.keys()
    assert {n: v for n, v in installed.items() if locked[n] != v} == {}
