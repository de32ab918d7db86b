"""The project venv is uv.lock, exactly: same versions, `pip check` clean, uv at its pinned version;
what set-up byte-compiles ahead is there to compile."""

from __future__ import annotations

import importlib.util
import json
import os
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


def test_every_module_the_set_up_byte_compiles_ahead_exists_in_the_venv() -> None:
    # scripts/warm_bytecode.py reports a missing module as a note and goes on: a renamed module
    # would silently stop being compiled ahead, and each process would compile it again
    spec = importlib.util.spec_from_file_location("warm_bytecode", ROOT / "scripts" / "warm_bytecode.py")
    assert spec is not None and spec.loader is not None
    warm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(warm)
    missing = [
        name
        for name in (*warm.LAZY_IMPORTS, *warm.WHOLE_PACKAGES)
        if importlib.util.find_spec(name.split(".")[0]) is None or importlib.util.find_spec(name) is None
    ]
    assert not missing, missing
    assert "nemo_gym_prorl.cli.main" in warm.package_modules("nemo_gym_prorl")


_FIRST_COMPILE = """
import compileall, importlib.util, json, sys, warnings
from pathlib import Path
spec = importlib.util.spec_from_file_location("warm_bytecode", sys.argv[1])
warm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(warm)
files = {}
for package in warm.WHOLE_PACKAGES:
    files.update((str(f), f.read_text()) for f in Path(importlib.util.find_spec(package).origin).parent.rglob("*.py"))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for path, source in files.items():
        compile(source, path, "exec")
warm.compile_whole_packages()
print(json.dumps({
    "warned": sorted({w.filename for w in caught if issubclass(w.category, SyntaxWarning)}),
    "not_compiled": sorted(f for f in files if not Path(importlib.util.cache_from_source(f)).is_file()),
}))
"""


def test_the_set_up_compiles_the_dependencies_that_warn_so_no_command_prints_their_warnings(tmp_path) -> None:
    # A bytecode cache of its own (PYTHONPYCACHEPREFIX): as on a machine that never compiled them.
    # cellpylib's sources warn when compiled; set-up compiles them silently, so an import by a
    # user's first command (reasoning_gym's tasks) finds their bytecode and compiles nothing.
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_COMPILE, str(ROOT / "scripts" / "warm_bytecode.py")],
        env={**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    assert report["warned"], "no dependency warns when compiled any more: WHOLE_PACKAGES can go"
    assert report["not_compiled"] == []
    assert out.stderr == ""
